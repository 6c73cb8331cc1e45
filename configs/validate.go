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

func (k *checker) validateUsers(zones map[string]int) (users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.Users))
	for i, u := range c.Users {
		names[i] = u.Name
	}
	users = k.names("user", "users", names)
	sites := map[string]int{}
	for i, s := range c.Sites {
		sites[s.Name] = i
	}
	subjects := map[string]string{} // oidc_subject -> user
	for i, u := range c.Users {
		p := fmt.Sprintf("users[%d]", i)
		if u.HomeZone != "" {
			k.ref(p+".home_zone", "zone", u.HomeZone, zones)
		}
		if u.HomeSite != "" {
			k.ref(p+".home_site", "site", u.HomeSite, sites)
		}
		switch {
		case u.PasswordHash == PasswordPlaceholder:
			k.errf(p+".password_hash", "password_hash is the reference's placeholder: make a hash with `frontdoor hash-password`")
		case u.PasswordHash != "":
			k.passwordCost(p+".password_hash", u.PasswordHash)
		}
		switch {
		case u.OIDCSubject == "":
		case !c.Site.Auth.OIDC.Enabled():
			k.errf(p+".oidc_subject", "no single sign-on can reach it: set site.auth.oidc")
		case subjects[u.OIDCSubject] != "":
			k.errf(p+".oidc_subject", "%q is also %s's: a subject is one identity", u.OIDCSubject, subjects[u.OIDCSubject])
		default:
			subjects[u.OIDCSubject] = u.Name
		}
	}
	names = make([]string, len(c.UserGroups))
	for i, g := range c.UserGroups {
		names[i] = g.Name
	}
	ugroups = k.names("user group", "user_groups", names)
	for i, g := range c.UserGroups {
		p := fmt.Sprintf("user_groups[%d]", i)
		if g.HomeZone != "" {
			k.ref(p+".home_zone", "zone", g.HomeZone, zones)
		}
		for j, m := range g.Members {
			k.ref(fmt.Sprintf("%s.members[%d]", p, j), "user", m, users)
		}
	}
	k.validateSites(zones, sites)
	return users, ugroups
}

func (k *checker) validateSites(zones, sites map[string]int) {
	c := k.c
	names := make([]string, len(c.Sites))
	for i, s := range c.Sites {
		names[i] = s.Name
	}
	k.names("site", "sites", names)
	owner := map[string]string{}
	for i, s := range c.Sites {
		p := fmt.Sprintf("sites[%d]", i)
		if len(s.Zones) == 0 {
			k.errf(p+".zones", "site %q has no zones", s.Name)
		}
		for j, z := range s.Zones {
			zp := fmt.Sprintf("%s.zones[%d]", p, j)
			k.ref(zp, "zone", z, zones)
			if o, dup := owner[z]; dup {
				k.errf(zp, "zone %q is in two sites: %q and %q", z, o, s.Name)
			}
			owner[z] = s.Name
		}
		for j, ps := range s.PreferredSites {
			pp := fmt.Sprintf("%s.preferred_sites[%d]", p, j)
			k.ref(pp, "site", ps, sites)
			if ps == s.Name {
				k.errf(pp, "site %q lists itself as a preferred site", s.Name)
			}
		}
	}
}

func (k *checker) validateGroups() map[string]int {
	c := k.c
	names := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		names[i] = g.Name
	}
	groups := k.names("group", "groups", names)
	for i, g := range c.Groups {
		p := fmt.Sprintf("groups[%d]", i)
		k.oneOf(p+".kind", g.Kind, "shared", "assigned")
		seen := map[string]bool{}
		for j, zp := range g.ZonePrefs() {
			pp := fmt.Sprintf("%s.zone_preferences[%d]", p, j)
			k.oneOf(pp, zp, ApplicationHome, UserHome, UserHomeOnly, UserLocation)
			if seen[zp] {
				k.errf(pp, "%s is listed twice", zp)
			}
			seen[zp] = true
		}
		if seen[UserHome] && seen[UserHomeOnly] {
			k.errf(p+".zone_preferences", "UserHome and UserHomeOnly are both listed; only one may be")
		}
		k.oneOf(p+".session_reconnection", g.SessionReconnection, "always", "disconnected_only", "same_endpoint_only")
		k.oneOf(p+".load.policy", g.Load.Policy, "horizontal", "vertical")
		if g.Load.MaxLogons != nil && *g.Load.MaxLogons < 0 {
			k.errf(p+".load.max_logons", "max_logons must not be negative")
		}
		k.validateDesktop(p+".desktop", g.Desktop, nil)
	}
	return groups
}

func (k *checker) validateMachines(zones, groups, users map[string]int) {
	c := k.c
	names := make([]string, len(c.Machines))
	for i, m := range c.Machines {
		names[i] = m.Name
	}
	k.names("machine", "machines", names)
	for i, m := range c.Machines {
		p := fmt.Sprintf("machines[%d]", i)
		k.addr(p+".address", m.Address)
		k.ref(p+".zone", "zone", m.Zone, zones)
		k.ref(p+".group", "group", m.Group, groups)
		seen := map[string]bool{}
		for j, dp := range m.DisplayPorts {
			if _, _, err := ParsePortSpec(dp); err != nil {
				k.errf(fmt.Sprintf("%s.display_ports[%d]", p, j), "%v", err)
			} else if seen[dp] {
				k.errf(fmt.Sprintf("%s.display_ports[%d]", p, j), "%s is listed twice", dp)
			}
			seen[dp] = true
		}
		if m.MaxSessions < 1 {
			k.errf(p+".max_sessions", "max_sessions must be at least 1")
		}
		if m.Desktop != nil {
			k.validateDesktop(p+".desktop", *m.Desktop, m.DisplayPorts)
		} else if gi, ok := groups[m.Group]; ok {
			if d := c.Groups[gi].Desktop; d.Channel != "" && firstTCP(m.DisplayPorts) != "" {
				if n, proto, err := ParsePortSpec(d.Channel); err == nil && !hasPort(m.DisplayPorts, n, proto) {
					k.errf(p+".display_ports", "the group's desktop rides %s, which is not one of these", d.Channel)
				}
			}
		}
		gi, ok := groups[m.Group]
		if m.AssignedUser != "" {
			k.ref(p+".assigned_user", "user", m.AssignedUser, users)
			if ok && c.Groups[gi].Kind != "assigned" {
				k.errf(p+".assigned_user", "machine %q has an assigned user but group %q is shared", m.Name, m.Group)
			}
		}
	}
}

func (k *checker) validateResources(zones, groups, users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.Resources))
	for i, r := range c.Resources {
		names[i] = r.Name
	}
	k.names("resource", "resources", names)
	for i, r := range c.Resources {
		p := fmt.Sprintf("resources[%d]", i)
		k.oneOf(p+".kind", r.Kind, "app", "desktop")
		if len(r.Groups) == 0 {
			k.errf(p+".groups", "resource %q is published from no group", r.Name)
		}
		seen := map[string]bool{}
		for j, rg := range r.Groups {
			gp := fmt.Sprintf("%s.groups[%d]", p, j)
			k.ref(gp+".group", "group", rg.Group, groups)
			if seen[rg.Group] {
				k.errf(gp+".group", "group %q is listed twice", rg.Group)
			}
			seen[rg.Group] = true
			if rg.Prio() < 0 {
				k.errf(gp+".priority", "priority must not be negative")
			}
			if gi, ok := groups[rg.Group]; ok && c.Groups[gi].Kind == "assigned" && r.Kind == "app" {
				k.errf(gp+".group", "application %q is published from assigned group %q (assigned groups hold private desktops)", r.Name, rg.Group)
			}
		}
		if r.HomeZone != "" {
			if r.Kind != "app" {
				k.errf(p+".home_zone", "home_zone is for applications; %q is a desktop", r.Name)
			}
			k.ref(p+".home_zone", "zone", r.HomeZone, zones)
		}
		if r.HomeZoneOnly && r.HomeZone == "" {
			k.errf(p+".home_zone_only", "home_zone_only needs a home_zone")
		}
		if r.IgnoreUserHomeZone {
			if r.HomeZone != "" {
				k.errf(p+".ignore_user_home_zone", "ignore_user_home_zone is only valid for an application without a home zone, and %q has home zone %q", r.Name, r.HomeZone)
			}
			if r.Kind != "app" {
				k.errf(p+".ignore_user_home_zone", "ignore_user_home_zone is for applications; %q is a desktop", r.Name)
			}
		}
		k.percent(p+".load_threshold", r.LoadThreshold)
		k.oneOf(p+".load_distribution", r.LoadDistribution, "", "load_index", "session_count")
		if r.UsePreferredSites && !r.Global {
			k.errf(p+".use_preferred_sites", "use_preferred_sites needs global: true")
		}
		e := r.Entitled
		if !e.Everyone && len(e.Users) == 0 && len(e.UserGroups) == 0 {
			k.errf(p+".entitled", "resource %q entitles nobody (set users, user_groups or everyone: true)", r.Name)
		}
		for j, u := range e.Users {
			k.ref(fmt.Sprintf("%s.entitled.users[%d]", p, j), "user", u, users)
		}
		for j, g := range e.UserGroups {
			k.ref(fmt.Sprintf("%s.entitled.user_groups[%d]", p, j), "user group", g, ugroups)
		}
	}
}

func (k *checker) validateProxy(nodes, gws map[string]int) {
	p := k.c.Proxy
	names := make([]string, len(p.Pools))
	for i, pl := range p.Pools {
		names[i] = pl.Name
	}
	pools := k.names("pool", "proxy.pools", names)
	names = make([]string, len(p.Listeners))
	for i, l := range p.Listeners {
		names[i] = l.Name
	}
	k.names("listener", "proxy.listeners", names)
	if p.DrainTimeout != nil && *p.DrainTimeout < 0 {
		k.errf("proxy.drain_timeout", "drain_timeout must not be negative")
	}
	for i, l := range p.Listeners {
		lp := fmt.Sprintf("proxy.listeners[%d]", i)
		k.ref(lp+".node", "node", l.Node, nodes)
		k.hostPort(lp+".address", l.Address)
		k.oneOf(lp+".protocol", l.Protocol, "tcp", "tls", "udp")
		if l.Pool != "" {
			k.ref(lp+".pool", "pool", l.Pool, pools)
		} else if len(l.Routes) == 0 {
			k.errf(lp+".pool", "listener %q has no pool and no routes", l.Name)
		}
		if len(l.Routes) > 0 && l.Protocol != "tls" {
			k.errf(lp+".routes", "routes by server name need protocol tls")
		}
		for j, r := range l.Routes {
			k.ref(fmt.Sprintf("%s.routes[%d].pool", lp, j), "pool", r.Pool, pools)
			if len(r.ServerNames) == 0 {
				k.errf(fmt.Sprintf("%s.routes[%d].server_names", lp, j), "route has no server names")
			}
		}
		for j, r := range l.ProxyProtocolFrom {
			k.cidr(fmt.Sprintf("%s.proxy_protocol_from[%d]", lp, j), r)
		}
		if l.HalfClose != nil && l.Protocol == "udp" {
			k.errf(lp+".half_close", "udp listeners have no connections to half-close")
		}
		if l.DeferAccept != nil && l.Protocol == "udp" {
			k.errf(lp+".defer_accept", "udp listeners accept no connections")
		}
		if l.UDPCoalesce != nil {
			if l.Protocol != "udp" {
				k.errf(lp+".udp_coalesce", "only udp listeners coalesce datagrams")
			} else if l.UDPCoalesce.D() > MaxUDPCoalesce {
				k.errf(lp+".udp_coalesce", "%s is more than %s", l.UDPCoalesce, MaxUDPCoalesce)
			}
		}
	}
	for i, pl := range p.Pools {
		pp := fmt.Sprintf("proxy.pools[%d]", i)
		k.oneOf(pp+".balance", pl.Balance, "least_conn", "round_robin", "weighted", "source_hash")
		k.oneOf(pp+".send_proxy", pl.SendProxy, "", "v1", "v2")
		if len(pl.Backends) == 0 {
			k.errf(pp+".backends", "pool %q has no backends", pl.Name)
		}
		for j, b := range pl.Backends {
			bp := fmt.Sprintf("%s.backends[%d]", pp, j)
			switch {
			case b.Gateway != "" && b.Address.IsValid():
				k.errf(bp, "a backend is a gateway or an address, not both")
			case b.Gateway != "":
				k.ref(bp+".gateway", "gateway", b.Gateway, gws)
				k.port(bp+".port", b.Port)
			case b.Address.IsValid():
				k.hostPort(bp+".address", b.Address)
			default:
				k.errf(bp, "a backend needs a gateway and port, or an address")
			}
			if b.Weight < 1 || b.Weight > 1000 {
				k.errf(bp+".weight", "weight %d is outside 1..1000", b.Weight)
			}
		}
	}
}

func (k *checker) validateAccessRules(zones, users, ugroups map[string]int) {
	c := k.c
	names := make([]string, len(c.AccessRules))
	for i, r := range c.AccessRules {
		names[i] = r.Name
	}
	k.names("access rule", "access_rules", names)
	resources := map[string]int{}
	for i, r := range c.Resources {
		resources[r.Name] = i
	}
	for i, r := range c.AccessRules {
		p := fmt.Sprintf("access_rules[%d]", i)
		k.oneOf(p+".action", r.Action, "allow", "deny")
		if !r.Everyone && len(r.Users) == 0 && len(r.UserGroups) == 0 {
			k.errf(p, "access rule %q is for nobody: set everyone, users or user_groups", r.Name)
		}
		for j, u := range r.Users {
			k.ref(fmt.Sprintf("%s.users[%d]", p, j), "user", u, users)
		}
		for j, g := range r.UserGroups {
			k.ref(fmt.Sprintf("%s.user_groups[%d]", p, j), "user group", g, ugroups)
		}
		for j, res := range r.Resources {
			k.ref(fmt.Sprintf("%s.resources[%d]", p, j), "resource", res, resources)
		}
		for j, z := range r.Zones {
			k.ref(fmt.Sprintf("%s.zones[%d]", p, j), "zone", z, zones)
		}
		for j, cr := range r.ClientRanges {
			k.cidr(fmt.Sprintf("%s.client_ranges[%d]", p, j), cr)
		}
		if _, err := ParseDays(r.Days); err != nil {
			k.errf(p+".days", "%v", err)
		}
		if _, err := ParseHours(r.Hours); err != nil {
			k.errf(p+".hours", "%v", err)
		}
		if _, err := time.LoadLocation(r.TimeZone); err != nil {
			k.errf(p+".time_zone", "%q is not a time zone (an IANA name such as Europe/Berlin): %v", r.TimeZone, err)
		}
		k.factors(p, r)
	}
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
