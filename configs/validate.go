package configs

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// checker collects validation errors with their lines.
type checker struct {
	c    *Config
	errs Errors
}

func (k *checker) errf(path, format string, args ...any) {
	k.errs = append(k.errs, &Error{File: k.c.File, Line: k.c.lineOf(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// oneOf reports an error unless v is one of allowed.
func (k *checker) oneOf(path, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		k.errf(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
}

// names checks that every item has a unique non-empty name and returns the set.
func (k *checker) names(what, list string, names []string) map[string]int {
	set := make(map[string]int, len(names))
	for i, n := range names {
		p := fmt.Sprintf("%s[%d].name", list, i)
		switch {
		case n == "":
			k.errf(fmt.Sprintf("%s[%d]", list, i), "%s has no name", what)
		case !nameRE.MatchString(n):
			k.errf(p, "%s name %q may only hold letters, digits, '.', '_' and '-'", what, n)
		default:
			if j, dup := set[n]; dup {
				k.errf(p, "%s %q is defined twice (also %s[%d])", what, n, list, j)
				continue
			}
			set[n] = i
		}
	}
	return set
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@\\-]*$`)

func (k *checker) ref(path, what, name string, set map[string]int) {
	if _, ok := set[name]; !ok {
		k.errf(path, "%s %q is not defined", what, name)
	}
}

func (k *checker) port(path string, p int) {
	if p < 1 || p > 65535 {
		k.errf(path, "port %d is outside 1..65535", p)
	}
}

// addr refuses a missing address (a bad one is refused by Parse, with its line).
func (k *checker) addr(path string, a netip.Addr) {
	if !a.IsValid() {
		k.errf(path, "an IP address is required")
	}
}

// hostPort refuses a missing address:port or port 0.
func (k *checker) hostPort(path string, ap netip.AddrPort) {
	if !ap.IsValid() {
		k.errf(path, "an address:port is required (e.g. 127.0.0.1:443 or [::1]:443)")
		return
	}
	k.port(path, int(ap.Port()))
}

// cidr refuses a missing range ("") and one with host bits set, which is almost always a
// typo.
func (k *checker) cidr(path string, p netip.Prefix) bool {
	switch {
	case !p.IsValid():
		k.errf(path, "a CIDR range is required (e.g. 10.1.0.0/16, 2001:db8::/32)")
		return false
	case p != p.Masked():
		k.errf(path, "%q has host bits set; did you mean %s?", p.String(), p.Masked())
		return false
	}
	return true
}

// bcryptRE is a bcrypt hash in its modular crypt form: $2, a minor version, $, the two-digit
// cost, $, then 22 characters of salt and 31 of hash in bcrypt's base64.
var bcryptRE = regexp.MustCompile(`^\$2[abxy]?\$([0-9]{2})\$[./A-Za-z0-9]{53}$`)

// bcryptCost returns the cost of a bcrypt hash, and false when hash is not one.
func bcryptCost(hash string) (int, bool) {
	m := bcryptRE.FindStringSubmatch(hash)
	if m == nil {
		return 0, false
	}
	cost, _ := strconv.Atoi(m[1])
	return cost, cost >= bcryptMinCost && cost <= bcryptMaxCost
}

// passwordCost refuses a password hash that is not bcrypt's or is cheaper than the site's
// minimum cost.
func (k *checker) passwordCost(path, hash string) {
	cost, ok := bcryptCost(hash)
	least := k.c.Site.Auth.MinPasswordCost
	switch {
	case !ok:
		k.errf(path, "password_hash must be a bcrypt hash ($2a$..., $2b$...)")
	case cost < least && least > PasswordHashCost:
		k.errf(path, "password_hash has bcrypt cost %d, below the site's minimum %d (site.auth.min_password_cost): make a new hash with `frontdoor hash-password --cost %d`", cost, least, least)
	case cost < least:
		k.errf(path, "password_hash has bcrypt cost %d, below the site's minimum %d (site.auth.min_password_cost): make a new hash with `frontdoor hash-password`", cost, least)
	}
}

func (k *checker) percent(path string, p *int) {
	if p != nil && (*p < 0 || *p > 100) {
		k.errf(path, "load threshold %d is outside 0..100", *p)
	}
}

// ParsePortSpec parses "8443/tcp" into its port and protocol.
func ParsePortSpec(s string) (int, string, error) {
	ps, proto, ok := strings.Cut(s, "/")
	if !ok || (proto != "tcp" && proto != "udp") {
		return 0, "", fmt.Errorf("%q is not port/protocol (e.g. 8443/tcp, 4172/udp)", s)
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		return 0, "", fmt.Errorf("%q is not port/protocol (e.g. 8443/tcp, 4172/udp)", s)
	}
	if p < 1 || p > 65535 {
		return 0, "", fmt.Errorf("port %d is outside 1..65535", p)
	}
	return p, proto, nil
}

// Validate checks the defaulted configuration and returns Errors sorted by line, or nil.
func (c *Config) Validate() error {
	k := &checker{c: c}
	zones := k.validateZones()
	k.validateSite(zones)
	k.validateClientCertificates()
	nodes := k.validateNodes(zones)
	gws := k.validateGateways(zones, nodes)
	users, ugroups := k.validateUsers(zones)
	groups := k.validateGroups()
	if rt := c.Site.Sessions.ReliabilityTimeout.D(); rt < time.Second || rt > 24*time.Hour {
		k.errf("site.sessions.session_reliability_timeout", "%s: give 1s to 24h", rt)
	}
	if ar := c.Site.AuditRetention.D(); ar < 24*time.Hour {
		k.errf("site.audit_retention", "%s: give at least 24h", ar)
	}
	if rb := c.Site.Sessions.ReliabilityBuffer; rb < 64<<10 || rb > 256<<20 {
		k.errf("site.sessions.session_reliability_buffer", "%d bytes: give 65536 (64 KiB) to 268435456 (256 MiB)", rb)
	}
	k.validateMachines(zones, groups, users)
	k.validateResources(zones, groups, users, ugroups)
	k.validateGSLB(zones, gws)
	k.validateProxy(nodes, gws)
	k.validateAccessRules(zones, users, ugroups)
	k.validateRADIUS(users, ugroups)
	if len(k.errs) == 0 {
		return nil
	}
	sort.SliceStable(k.errs, func(i, j int) bool { return k.errs[i].Line < k.errs[j].Line })
	return k.errs
}

func (k *checker) validateSite(zones map[string]int) {
	s := &k.c.Site
	if s.DefaultZone != "" {
		k.ref("site.default_zone", "zone", s.DefaultZone, zones)
	}
	k.oneOf("site.store.backend", s.Store.Backend, "memory", "bolt", "etcd")
	if s.Store.Backend == "etcd" && len(s.Store.Endpoints) == 0 {
		k.errf("site.store.endpoints", "the etcd backend needs at least one endpoint")
	}
	if s.Store.Backend == "etcd" && s.Store.SecretFile == "" {
		k.errf("site.store.secret_file", "the etcd backend needs a secret file to seal the site identity (make one with `frontdoor init --secret FILE`)")
	}
	for i, e := range s.Store.Endpoints {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			k.errf(fmt.Sprintf("site.store.endpoints[%d]", i), "%q is not an http:// or https:// URL", e)
		}
	}
	if (s.Store.CertFile == "") != (s.Store.KeyFile == "") {
		k.errf("site.store.cert_file", "cert_file and key_file go together")
	}
	if !strings.HasSuffix(s.Store.Prefix, "/") && s.Store.Prefix != "" {
		k.errf("site.store.prefix", "%q must end with /", s.Store.Prefix)
	}
	k.oneOf("site.tls.issuer", s.TLS.Issuer, "internal", "acme")
	k.oneOf("site.tls.acme.challenge", s.TLS.ACME.Challenge, "dns-01", "http-01", "tls-alpn-01")
	if s.TLS.Issuer == "acme" && s.TLS.ACME.Email == "" {
		k.errf("site.tls.acme.email", "the acme issuer needs an email")
	}
	if c := s.Auth.MinPasswordCost; c < bcryptMinCost || c > bcryptMaxCost {
		k.errf("site.auth.min_password_cost", "%d is outside bcrypt's costs %d..%d", c, bcryptMinCost, bcryptMaxCost)
	}
	if d := s.Auth.FactorLifetime.D(); d < MinFactorLifetime {
		k.errf("site.auth.factor_lifetime", "%s is shorter than %s: a login must outlive its launch", d, MinFactorLifetime)
	}
	k.validateOIDC(s.Auth.OIDC)
}

func (k *checker) validateZones() map[string]int {
	c := k.c
	if len(c.Zones) == 0 {
		k.errf("zones", "at least one zone is required")
	}
	names := make([]string, len(c.Zones))
	for i, z := range c.Zones {
		names[i] = z.Name
	}
	zones := k.names("zone", "zones", names)
	primary := -1
	cidrs := map[netip.Prefix]string{}
	for i, z := range c.Zones {
		if z.Primary {
			if primary >= 0 {
				k.errf(fmt.Sprintf("zones[%d].primary", i), "two primary zones: %q and %q (exactly one zone is primary)", c.Zones[primary].Name, z.Name)
			} else {
				primary = i
			}
		}
		for j, r := range z.Ranges {
			p := fmt.Sprintf("zones[%d].ranges[%d]", i, j)
			pfx := r
			if !k.cidr(p, pfx) {
				continue
			}
			if other, dup := cidrs[pfx]; dup {
				k.errf(p, "range %s is mapped to two zones: %q and %q", pfx, other, z.Name)
				continue
			}
			cidrs[pfx] = z.Name
		}
	}
	if len(c.Zones) > 0 && primary < 0 {
		k.errf("zones", "no primary zone (exactly one zone must have primary: true)")
	}
	return zones
}

func (k *checker) validateNodes(zones map[string]int) map[string]int {
	c := k.c
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	nodes := k.names("node", "nodes", names)
	bound := map[string]string{}
	for i, n := range c.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		k.ref(p+".zone", "zone", n.Zone, zones)
		k.oneOf(p+".election_preference", n.ElectionPreference, "most_preferred", "preferred", "default", "not_preferred")
		for j, l := range n.Listeners {
			lp := fmt.Sprintf("%s.listeners[%d]", p, j)
			k.oneOf(lp+".kind", l.Kind, "dns", "launch", "admin", "gateway")
			k.hostPort(lp+".address", l.Address)
			for x, r := range l.ProxyProtocolFrom {
				pp := fmt.Sprintf("%s.proxy_protocol_from[%d]", lp, x)
				if l.Kind != "launch" && l.Kind != "admin" {
					k.errf(pp, "PROXY headers are read on launch and admin listeners only")
				} else {
					k.cidr(pp, r)
				}
			}
			if l.UDPCoalesce != nil {
				if l.Kind != "dns" {
					k.errf(lp+".udp_coalesce", "only dns listeners coalesce queries")
				} else if l.UDPCoalesce.D() > MaxUDPCoalesce {
					k.errf(lp+".udp_coalesce", "%s is more than %s", l.UDPCoalesce, MaxUDPCoalesce)
				}
			}
			for x, proto := range l.Protocols {
				k.oneOf(fmt.Sprintf("%s.protocols[%d]", lp, x), proto, "tcp", "udp")
				if (l.Kind == "launch" || l.Kind == "admin") && proto == "udp" {
					k.errf(fmt.Sprintf("%s.protocols[%d]", lp, x), "%s listeners are tcp only", l.Kind)
				}
				key := proto + " " + l.Address.String()
				if other, dup := bound[key]; dup {
					k.errf(lp+".address", "%s %s is already used by %s", proto, l.Address, other)
					continue
				}
				bound[key] = fmt.Sprintf("node %q (%s)", n.Name, l.Kind)
			}
		}
	}
	return nodes
}

func (k *checker) validateGateways(zones, nodes map[string]int) map[string]int {
	c := k.c
	names := make([]string, len(c.Gateways))
	for i, g := range c.Gateways {
		names[i] = g.Name
	}
	gws := k.names("gateway", "gateways", names)
	for i, g := range c.Gateways {
		p := fmt.Sprintf("gateways[%d]", i)
		k.ref(p+".zone", "zone", g.Zone, zones)
		k.addr(p+".address", g.Address)
		for j, a := range g.PublicAddresses {
			k.addr(fmt.Sprintf("%s.public_addresses[%d]", p, j), a)
		}
		if g.Node != "" {
			k.ref(p+".node", "node", g.Node, nodes)
		}
		if g.PlainUDP && !slices.ContainsFunc(g.Ports, func(pt GatewayPort) bool { return pt.Protocol == "udp" }) {
			k.errf(p+".plain_udp", "plain_udp is on but the gateway lists no udp port")
		}
		seen := map[string]bool{}
		if g.QUICPort != 0 {
			k.port(p+".quic_port", g.QUICPort)
			seen[fmt.Sprintf("%d/udp", g.QUICPort)] = true
		}
		for j, pt := range g.Ports {
			pp := fmt.Sprintf("%s.ports[%d]", p, j)
			k.port(pp+".port", pt.Port)
			k.oneOf(pp+".protocol", pt.Protocol, "tcp", "udp")
			key := fmt.Sprintf("%d/%s", pt.Port, pt.Protocol)
			if seen[key] {
				k.errf(pp, "port %s is listed twice (or is also the quic_port)", key)
			}
			seen[key] = true
			if pt.Protocol == "udp" {
				k.oneOf(pp+".check.kind", pt.Check.Kind, "udp")
			} else {
				k.oneOf(pp+".check.kind", pt.Check.Kind, "tcp", "tls", "http", "https")
				if g.Node != "" && pt.Check.Kind == "http" {
					k.errf(pp+".check.kind", "a gateway a node hosts serves its health port over TLS: use https, not http")
				}
			}
			if pt.Check.VerifyName && pt.Check.ServerName == "" {
				k.errf(pp+".check.verify_name", "verify_name needs a server_name")
			}
			if s := pt.Check.ExpectStatus; s != 0 && (s < 100 || s > 599) {
				k.errf(pp+".check.expect_status", "HTTP status %d is outside 100..599", s)
			}
		}
		m := g.Monitor
		mp := p + ".monitor"
		if m.Rise < 1 {
			k.errf(mp+".rise", "rise must be at least 1")
		}
		if m.Fall < 1 {
			k.errf(mp+".fall", "fall must be at least 1")
		}
		if m.Jitter < 0 || m.Jitter > 0.5 {
			k.errf(mp+".jitter", "jitter %g is outside 0..0.5", m.Jitter)
		}
		k.oneOf(mp+".initial", m.Initial, "up", "down")
		k.oneOf(mp+".mode", m.Mode, "all", "any")
		if m.PassiveFailures < 0 {
			k.errf(mp+".passive_failures", "passive_failures must not be negative")
		}
	}
	return gws
}

// factors checks an access rule's required factors: known ones, once each, on an allow
// rule, totp only where users can have a TOTP secret, and radius only where a RADIUS
// server is asked.
func (k *checker) factors(p string, r AccessRule) {
	if len(r.Factors) > 0 && r.Action == "deny" {
		k.errf(p+".factors", "a deny rule requires no factors (it denies whatever the login): factors go on allow rules")
		return
	}
	seen := map[string]bool{}
	for j, f := range r.Factors {
		fp := fmt.Sprintf("%s.factors[%d]", p, j)
		switch {
		case CheckFactor(f) != nil:
			k.errf(fp, "%v", CheckFactor(f))
		case seen[f]:
			k.errf(fp, "factor %q is listed twice", f)
		case f == FactorTOTP && k.c.Site.Auth.TOTPFile == "":
			k.errf(fp, "access rule %q requires totp, but no user can have a TOTP secret: set site.auth.totp_file (frontdoor totp enroll)", r.Name)
		case f == FactorRADIUS && k.c.Site.Auth.RADIUS == nil:
			k.errf(fp, "access rule %q requires radius, but the site asks no RADIUS server: set site.auth.radius", r.Name)
		case (f == FactorOIDC || f == FactorMFA) && !k.c.Site.Auth.OIDC.Enabled():
			k.errf(fp, "access rule %q requires %s, but no login can have it: set site.auth.oidc", r.Name, f)
		}
		seen[f] = true
	}
}
