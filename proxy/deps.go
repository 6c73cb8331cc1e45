package proxy

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Locator maps a client address to its user-location zone ("" when the address is in no
// zone). zonemap provides one; the wiring passes it in.
type Locator interface {
	Zone(client netip.Addr) string
}

// LocatorFunc adapts a function to Locator.
type LocatorFunc func(netip.Addr) string

// Zone calls f.
func (f LocatorFunc) Zone(a netip.Addr) string { return f(a) }

// Health tells whether a backend (by Backend.Name) may take new connections: for a gateway,
// whether its composite monitor is up. It is asked on every pick, so it must be cheap.
type Health interface {
	Up(backend string) bool
}

// HealthFunc adapts a function to Health.
type HealthFunc func(backend string) bool

// Up calls f.
func (f HealthFunc) Up(backend string) bool { return f(backend) }

// PassiveReporter receives the connect failures the proxy sees, so that health can mark a
// backend down before its next probe.
type PassiveReporter func(backend string, addr netip.AddrPort, err error)

// Ticker is the part of *time.Ticker the server uses, so tests can drive it.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Options are the dependencies of a Server. Every field is optional.
type Options struct {
	// Logger receives the access log (one line per closed connection or flow) and errors.
	// Default: slog.New(slog.DiscardHandler).
	Logger *slog.Logger
	// Registry receives the proxy's metrics. Default: none (metrics are kept but not exported).
	Registry prometheus.Registerer
	// Locator gives each client its zone. Default: every client has zone "".
	Locator Locator
	// Health tells which backends are up. Default: every backend is up.
	Health Health
	// Passive receives connect failures. Default: none.
	Passive PassiveReporter
	// Now is the clock for affinity and flow expiry. Default: time.Now.
	Now func() time.Time
	// NewTicker makes the ticker of the expiry loop. Default: a time.Ticker.
	NewTicker func(time.Duration) Ticker
	// BlockingUDP serves each UDP listener bound to an IP address with workers that block in
	// the kernel, on sockets kept out of the Go poller (64-bit Linux; see package
	// internal/rawio): one reads the clients' datagrams with recvmmsg, one relays the
	// backends' replies from an epoll set of the flows' sockets. It also makes
	// Listener.UDPCoalesce work. A worker holds a P while it waits, so the process should add
	// UDPWorkers per such listener to GOMAXPROCS. Default: false (UDP listeners and flows are
	// read through the Go poller).
	BlockingUDP bool
}

// UDPWorkers is the number of blocking workers of one udp listener with Options.BlockingUDP.
const UDPWorkers = 2

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Locator == nil {
		o.Locator = LocatorFunc(func(netip.Addr) string { return "" })
	}
	if o.Health == nil {
		o.Health = HealthFunc(func(string) bool { return true })
	}
	if o.Passive == nil {
		o.Passive = func(string, netip.AddrPort, error) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewTicker == nil {
		o.NewTicker = func(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }
	}
}
