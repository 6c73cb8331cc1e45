package configs

import (
	"net/netip"
	"strings"
	"time"
)

// Zone preference names, as written in a group's zone_preferences.
const (
	ApplicationHome = "ApplicationHome"
	UserHome        = "UserHome"
	UserHomeOnly    = "UserHomeOnly"
	UserLocation    = "UserLocation"
)

// DefaultZonePreferences is the order used when a group does not set zone_preferences.
var DefaultZonePreferences = []string{ApplicationHome, UserHome, UserLocation}

// DefaultDisplayPorts are a machine's display ports when it lists none.
var DefaultDisplayPorts = []string{"4172/tcp", "4172/udp", "8443/tcp", "8443/udp"}

// DefaultUDPCoalesce and MaxUDPCoalesce bound the udp_coalesce of dns listeners and of udp
// proxy listeners.
const (
	DefaultUDPCoalesce = 250 * time.Microsecond
	MaxUDPCoalesce     = 5 * time.Millisecond
)

// DefaultMinPasswordCost is site.auth.min_password_cost when the config does not set it:
// bcrypt's default cost. PasswordHashCost is the cost of the hashes `frontdoor hash-password`
// makes unless told another (--cost).
const (
	DefaultMinPasswordCost = 10
	PasswordHashCost       = 12
)

// bcryptMinCost and bcryptMaxCost bound bcrypt's costs (golang.org/x/crypto/bcrypt's MinCost
// and MaxCost: configs imports only the standard library and YAML).
const (
	bcryptMinCost = 4
	bcryptMaxCost = 31
)

// DefaultFactorLifetime is site.auth.factor_lifetime when the config does not set it, and
// MinFactorLifetime the shortest one the loader takes.
const (
	DefaultFactorLifetime = 10 * time.Hour
	MinFactorLifetime     = time.Minute
)

// DefaultDrainTimeout is proxy.drain_timeout when the config does not set it.
const DefaultDrainTimeout = 30 * time.Second

// DefaultGatewayPorts returns the ports a gateway is probed on when it lists none.
func DefaultGatewayPorts() []GatewayPort {
	return []GatewayPort{
		{Port: 443, Protocol: "tcp", Check: Check{Kind: "https"}},
		{Port: 4172, Protocol: "tcp", Check: Check{Kind: "tcp"}},
		{Port: 4172, Protocol: "udp", Check: Check{Kind: "udp"}},
		{Port: 8443, Protocol: "tcp", Check: Check{Kind: "tls"}},
		{Port: 8443, Protocol: "udp", Check: Check{Kind: "udp"}},
	}
}

func setDur(d *Duration, v time.Duration) {
	if *d == 0 {
		*d = Duration(v)
	}
}

func setStr(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func setInt(i *int, v int) {
	if *i == 0 {
		*i = v
	}
}

func boolPtr(b bool) *bool { return &b }
func intPtr(i int) *int    { return &i }

// SetDefaults fills in every field the file left out. It is idempotent.
func (c *Config) SetDefaults() {
	s := &c.Site
	setStr(&s.Name, "frontdoor")
	if s.SecureGateway == nil {
		s.SecureGateway = boolPtr(true)
	}
	setStr(&s.Store.Backend, "bolt")
	setDur(&s.Store.DialTimeout, 5*time.Second)
	setStr(&s.Store.Prefix, "/frontdoor/"+s.Name+"/")
	setDur(&s.Tickets.LaunchTTL, 60*time.Second)
	setDur(&s.Tickets.ReconnectTTL, 10*time.Hour)
	setStr(&s.TLS.Issuer, "internal")
	setStr(&s.TLS.ACME.Challenge, "dns-01")
	setDur(&s.Sessions.PendingTimeout, 90*time.Second)
	setDur(&s.Sessions.DisconnectTimeout, time.Hour)
	setDur(&s.Sessions.ReliabilityTimeout, 180*time.Second)
	setInt(&s.Sessions.ReliabilityBuffer, 4<<20)
	setDur(&s.AuditRetention, DefaultAuditRetention)
	setInt(&s.Auth.MinPasswordCost, DefaultMinPasswordCost)
	setDur(&s.Auth.FactorLifetime, DefaultFactorLifetime)
	for i := range s.Auth.ClientCertificates {
		setStr(&s.Auth.ClientCertificates[i].UserFrom, UserFromCommonName)
	}
	s.Auth.OIDC.setDefaults()
	if s.Auth.RADIUS != nil {
		s.Auth.RADIUS.setDefaults(s.Name)
	}

	for i := range c.Nodes {
		n := &c.Nodes[i]
		setStr(&n.ElectionPreference, "default")
		for j := range n.Listeners {
			l := &n.Listeners[j]
			if len(l.Protocols) == 0 {
				switch l.Kind {
				case "dns":
					l.Protocols = []string{"udp", "tcp"}
				case "gateway":
					l.Protocols = []string{"tcp", "udp"}
				default:
					l.Protocols = []string{"tcp"}
				}
			}
			if l.Kind == "dns" && l.UDPCoalesce == nil {
				d := Duration(DefaultUDPCoalesce)
				l.UDPCoalesce = &d
			}
		}
	}
	for i := range c.Gateways {
		g := &c.Gateways[i]
		if len(g.PublicAddresses) == 0 && g.Address.IsValid() {
			g.PublicAddresses = []netip.Addr{g.Address}
		}
		if len(g.Ports) == 0 {
			g.Ports = DefaultGatewayPorts()
		}
		for j := range g.Ports {
			p := &g.Ports[j]
			setStr(&p.Protocol, "tcp")
			if p.Protocol == "udp" {
				setStr(&p.Check.Kind, "udp")
			} else {
				setStr(&p.Check.Kind, "tcp")
			}
			if p.Check.Kind == "http" || p.Check.Kind == "https" {
				setStr(&p.Check.Method, "HEAD")
				setStr(&p.Check.Path, "/favicon.ico")
				setInt(&p.Check.ExpectStatus, 200)
			}
			if p.Check.Kind == "udp" {
				setStr(&p.Check.Send, "?frontdoor-probe")
			}
		}
		m := &g.Monitor
		setDur(&m.Interval, 250*time.Millisecond)
		setDur(&m.Timeout, 250*time.Millisecond)
		setInt(&m.Rise, 2)
		setInt(&m.Fall, 3)
		setStr(&m.Initial, "up")
		setStr(&m.Mode, "all")
		setInt(&m.PassiveFailures, 3)
		setDur(&m.PassiveWindow, 5*time.Second)
	}
	for i := range c.Machines {
		m := &c.Machines[i]
		if len(m.DisplayPorts) == 0 {
			m.DisplayPorts = append([]string(nil), DefaultDisplayPorts...)
		}
		setInt(&m.MaxSessions, 1)
	}
	for i := range c.Groups {
		g := &c.Groups[i]
		setStr(&g.Kind, "shared")
		if g.ZonePreferences == nil {
			zp := append([]string(nil), DefaultZonePreferences...)
			g.ZonePreferences = &zp
		}
		setStr(&g.SessionReconnection, "always")
		if g.SecureGateway == nil {
			g.SecureGateway = boolPtr(*s.SecureGateway)
		}
		setDur(&g.DisconnectTimeout, s.Sessions.DisconnectTimeout.D())
		setStr(&g.Load.Policy, "horizontal")
		if g.Load.CPU == nil {
			g.Load.CPU = boolPtr(true)
		}
		if g.Load.Memory == nil {
			g.Load.Memory = boolPtr(true)
		}
		if g.Load.MaxLogons == nil {
			g.Load.MaxLogons = intPtr(2)
		}
	}
	setDesktopDefaults(c)
	for i := range c.Resources {
		r := &c.Resources[i]
		setStr(&r.Kind, "desktop")
		for j := range r.Groups {
			if r.Groups[j].Priority == nil {
				r.Groups[j].Priority = intPtr(j + 1)
			}
		}
		if r.LoadThreshold == nil {
			r.LoadThreshold = intPtr(98)
		}
	}
	for i := range c.GSLB.Domains {
		d := &c.GSLB.Domains[i]
		d.Name = fqdn(d.Name)
		if len(d.NS) == 0 && d.Name != "." {
			d.NS = []string{"ns1." + d.Name}
		}
		for j := range d.NS {
			d.NS[j] = absName(d.NS[j], d.Name)
		}
		soa := &d.SOA
		if len(d.NS) > 0 {
			setStr(&soa.MName, d.NS[0])
		}
		setStr(&soa.RName, "hostmaster."+d.Name)
		soa.MName = absName(soa.MName, d.Name)
		soa.RName = absName(soa.RName, d.Name)
		if soa.Serial == 0 {
			soa.Serial = 1
		}
		setDur(&soa.Refresh, time.Hour)
		setDur(&soa.Retry, 10*time.Minute)
		setDur(&soa.Expire, 168*time.Hour)
		setDur(&soa.Minimum, 30*time.Second)
		setDur(&soa.TTL, time.Hour)
		for j := range d.Records {
			setDur(&d.Records[j].TTL, 5*time.Minute)
		}
	}
	c.Proxy.SetDefaults()
	for i := range c.GSLB.Names {
		n := &c.GSLB.Names[i]
		n.Name = fqdn(n.Name)
		setStr(&n.Policy, "failover")
		setDur(&n.TTL, 5*time.Second)
		setStr(&n.WhenNoneHealthy, "fail_open")
		setStr(&n.Initial, "up")
		for j := range n.Sites {
			st := &n.Sites[j]
			setInt(&st.Weight, 1)
			if st.LoadThreshold == nil {
				st.LoadThreshold = intPtr(98)
			}
		}
	}
}

// SetDefaults fills the proxy section's fields left at their zero value. It is the one
// home of these defaults: package proxy takes its own from here.
func (p *Proxy) SetDefaults() {
	setDur(&p.AffinityTTL, 30*time.Minute)
	setInt(&p.MaxConns, 50000)
	setInt(&p.MaxFlows, 65536)
	if p.DrainTimeout == nil {
		d := Duration(DefaultDrainTimeout)
		p.DrainTimeout = &d
	}
	for i := range p.Listeners {
		l := &p.Listeners[i]
		setStr(&l.Protocol, "tcp")
		if l.Protocol == "udp" {
			setDur(&l.IdleTimeout, 60*time.Second)
		} else {
			setDur(&l.IdleTimeout, time.Hour)
		}
		if l.Protocol == "udp" && l.UDPCoalesce == nil {
			d := Duration(DefaultUDPCoalesce)
			l.UDPCoalesce = &d
		}
		if l.Protocol != "udp" && l.DeferAccept == nil {
			on := l.Protocol == "tls" // a TLS client always speaks first
			l.DeferAccept = &on
		}
	}
	for i := range p.Pools {
		pl := &p.Pools[i]
		setStr(&pl.Balance, "least_conn")
		setDur(&pl.ConnectTimeout, 3*time.Second)
		for j := range pl.Backends {
			setInt(&pl.Backends[j].Weight, 1)
		}
	}
}

// fqdn lower-cases a DNS name and makes it absolute.
func fqdn(n string) string {
	n = strings.ToLower(n)
	if n == "" || strings.HasSuffix(n, ".") {
		return n
	}
	return n + "."
}

// absName resolves a name relative to origin ("@" is the origin itself).
func absName(n, origin string) string {
	switch {
	case n == "" || n == "@":
		return origin
	case strings.HasSuffix(n, "."):
		return strings.ToLower(n)
	case origin == ".":
		return strings.ToLower(n) + "."
	default:
		return strings.ToLower(n) + "." + origin
	}
}

// RecordOwner returns the absolute owner name of a static record of domain d.
func (d *Domain) RecordOwner(r Record) string { return absName(r.Name, d.Name) }

// ZonePrefs returns the group's effective zone preference order (never nil after defaults).
func (g *Group) ZonePrefs() []string {
	if g.ZonePreferences == nil {
		return DefaultZonePreferences
	}
	return *g.ZonePreferences
}

// DefaultAuditRetention is how long the audit log keeps an entry unless
// site.audit_retention says otherwise: a year.
const DefaultAuditRetention = 365 * 24 * time.Hour
