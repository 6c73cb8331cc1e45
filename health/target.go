package health

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Kind is how a port is probed.
type Kind string

// The probe kinds.
const (
	// KindTCP is a TCP connect: up when the three-way handshake completes.
	KindTCP Kind = "tcp"
	// KindTLS checks a TLS service over TCP. Without VerifyName it is a hello check (like
	// HAProxy's ssl-hello-chk): it sends a ClientHello and is up when the first record back
	// starts a ServerHello; an alert (the TLS stack refused the hello), anything that is not
	// TLS, or a close is down, silence a timeout. With VerifyName it runs the full handshake
	// and checks the certificate, which TLS 1.3 only sends encrypted.
	KindTLS Kind = "tls"
	// KindHTTP is an HTTP request over TCP; up on the expected status, draining on 503.
	KindHTTP Kind = "http"
	// KindHTTPS is an HTTP request over TLS; up on the expected status, draining on 503.
	KindHTTPS Kind = "https"
	// KindUDP sends a datagram on a connected UDP socket and needs a reply: silence is a
	// timeout and an ICMP port-unreachable is a failure, never "up".
	KindUDP Kind = "udp"
)

// Check says how one port is probed.
type Check struct {
	// Kind is the probe kind. Default: KindTCP for tcp ports, KindUDP for udp ports.
	Kind Kind
	// ServerName is the TLS server name sent (SNI) and, with VerifyName, checked against the
	// certificate. Default: "" (no SNI).
	ServerName string
	// VerifyName fails the probe when the leaf certificate is not valid for ServerName; it
	// turns a tls check from a hello check into a full handshake. Default: false.
	VerifyName bool
	// Method is the HTTP method. Default: HEAD.
	Method string
	// Path is the HTTP path. Default: /favicon.ico.
	Path string
	// ExpectStatus is the HTTP status meaning up; 503 always means draining. Default: 200.
	ExpectStatus int
	// Send is the UDP payload. Default: "?frontdoor-probe" (ticket.ProbePayload).
	Send []byte
	// Expect is a prefix the UDP reply must start with. Default: nil (any reply).
	Expect []byte
}

// PortID names one port of a target: number and transport protocol.
type PortID struct {
	// Port is the port number.
	Port uint16
	// Protocol is "tcp" or "udp".
	Protocol string
}

// String formats p as "4172/udp".
func (p PortID) String() string { return strconv.Itoa(int(p.Port)) + "/" + p.Protocol }

// TCP returns the PortID of TCP port n.
func TCP(n uint16) PortID { return PortID{Port: n, Protocol: "tcp"} }

// UDP returns the PortID of UDP port n.
func UDP(n uint16) PortID { return PortID{Port: n, Protocol: "udp"} }

// Port is one probed port of a target.
type Port struct {
	// ID is the port number and protocol. Required.
	ID PortID
	// Check is how the port is probed. Default: see Check.
	Check Check
	// Optional leaves the port out of an all-of verdict; it is still probed and reported,
	// and a 503 on it still caps the verdict at draining. Default: false (required).
	Optional bool
}

// Mode says how port states combine into a target verdict. In either mode a port that
// answered 503 (draining), optional or not, caps the verdict at draining.
type Mode string

// The composite modes.
const (
	// ModeAll makes a target up only when every required port is up.
	ModeAll Mode = "all"
	// ModeAny makes a target up when at least one port is up (and none answered 503).
	ModeAny Mode = "any"
)

// Monitor sets a target's probe timing and how its port verdicts combine.
type Monitor struct {
	// Interval is the time between the starts of two probes of one port. Default: 250ms.
	Interval time.Duration
	// Timeout bounds one probe; a probe still unanswered after it is a failure. Default: 250ms.
	Timeout time.Duration
	// Rise is the number of consecutive successes that mark a port up. Default: 2.
	Rise int
	// Fall is the number of consecutive failures that mark a port down. Default: 3.
	Fall int
	// Jitter starts each probe up to Jitter×Interval before its slot (0..0.5), for sites that
	// want probes spread beyond the random phase every port gets. It adds up to Jitter×Interval
	// to the worst detection time (see the package doc). Default: 0.
	Jitter float64
	// InitialDown starts every port down, so that a target needs Rise good probes before
	// it is eligible. Default: false (ports start up).
	InitialDown bool
	// Mode combines port states. Default: ModeAll.
	Mode Mode
	// PassiveFailures is how many failures reported with ReportFailure within PassiveWindow
	// mark a port down before the next probe; 0 turns passive marking off. Default: 0 in a
	// zero Monitor, 3 in DefaultMonitor and in configs.
	PassiveFailures int
	// PassiveWindow is the window for PassiveFailures. Default: 5s.
	PassiveWindow time.Duration
}

// DefaultMonitor returns the defaults of the site configuration: 250ms interval and timeout,
// rise 2, fall 3, no jitter, initially up, all-of, 3 passive failures in 5s.
func DefaultMonitor() Monitor {
	return Monitor{
		Interval:        250 * time.Millisecond,
		Timeout:         250 * time.Millisecond,
		Rise:            2,
		Fall:            3,
		Mode:            ModeAll,
		PassiveFailures: 3,
		PassiveWindow:   5 * time.Second,
	}
}

// withDefaults fills the zero fields of m.
func (m Monitor) withDefaults() Monitor {
	d := DefaultMonitor()
	if m.Interval <= 0 {
		m.Interval = d.Interval
	}
	if m.Timeout <= 0 {
		m.Timeout = d.Timeout
	}
	if m.Rise <= 0 {
		m.Rise = d.Rise
	}
	if m.Fall <= 0 {
		m.Fall = d.Fall
	}
	if m.Jitter < 0 {
		m.Jitter = 0
	}
	if m.Jitter > 0.5 {
		m.Jitter = 0.5
	}
	if m.Mode != ModeAny {
		m.Mode = ModeAll
	}
	if m.PassiveWindow <= 0 {
		m.PassiveWindow = d.PassiveWindow
	}
	return m
}

// Target is one probed host: a gateway, a connection server or a machine.
type Target struct {
	// Name identifies the target in every query, report and event; unique. Required.
	Name string
	// Kind is what the target is, e.g. "gateway" or "machine"; informational. Default: "".
	Kind string
	// Zone is the target's zone; informational. Default: "".
	Zone string
	// Addr is the address probed. Required.
	Addr netip.Addr
	// Ports are the probed ports. Required (a target without ports is never eligible).
	Ports []Port
	// Monitor sets timing and composition. Default: DefaultMonitor for zero fields.
	Monitor Monitor
}

// validate checks t after defaults.
func (t *Target) validate() error {
	if t.Name == "" {
		return fmt.Errorf("target without a name: %w", ErrInvalidTarget)
	}
	if !t.Addr.IsValid() {
		return fmt.Errorf("target %s: no address: %w", t.Name, ErrInvalidTarget)
	}
	if len(t.Ports) == 0 {
		return fmt.Errorf("target %s: no ports: %w", t.Name, ErrInvalidTarget)
	}
	seen := map[PortID]bool{}
	for i := range t.Ports {
		p := &t.Ports[i]
		if p.ID.Protocol != "tcp" && p.ID.Protocol != "udp" {
			return fmt.Errorf("target %s port %d: protocol %q is not tcp or udp: %w", t.Name, p.ID.Port, p.ID.Protocol, ErrInvalidTarget)
		}
		if p.ID.Port == 0 {
			return fmt.Errorf("target %s: port 0: %w", t.Name, ErrInvalidTarget)
		}
		if seen[p.ID] {
			return fmt.Errorf("target %s: port %s listed twice: %w", t.Name, p.ID, ErrInvalidTarget)
		}
		seen[p.ID] = true
		if err := p.Check.fill(p.ID.Protocol); err != nil {
			return fmt.Errorf("target %s port %s: %w", t.Name, p.ID, err)
		}
	}
	return nil
}

// fill sets the check's defaults for a port of protocol proto and checks the kind.
func (c *Check) fill(proto string) error {
	if c.Kind == "" {
		c.Kind = KindTCP
		if proto == "udp" {
			c.Kind = KindUDP
		}
	}
	switch c.Kind {
	case KindUDP:
		if proto != "udp" {
			return fmt.Errorf("check kind udp on a tcp port: %w", ErrInvalidTarget)
		}
		if len(c.Send) == 0 {
			c.Send = []byte("?frontdoor-probe")
		}
	case KindTCP, KindTLS, KindHTTP, KindHTTPS:
		if proto != "tcp" {
			return fmt.Errorf("check kind %s on a udp port: %w", c.Kind, ErrInvalidTarget)
		}
	default:
		return fmt.Errorf("unknown check kind %q: %w", c.Kind, ErrInvalidTarget)
	}
	if c.Kind == KindHTTP || c.Kind == KindHTTPS {
		if c.Method == "" {
			c.Method = "HEAD"
		}
		if c.Path == "" {
			c.Path = "/favicon.ico"
		}
		if c.ExpectStatus == 0 {
			c.ExpectStatus = 200
		}
	}
	return nil
}
