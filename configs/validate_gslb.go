package configs

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

var dnsNameRE = regexp.MustCompile(`^([a-z0-9_*]([a-z0-9_-]{0,61}[a-z0-9_])?\.)+$`)

func validDNSName(n string) bool { return n == "." || (len(n) <= 254 && dnsNameRE.MatchString(n)) }

// inDomain reports whether name is at or below domain (both absolute, lower case).
func inDomain(name, domain string) bool {
	return domain == "." || name == domain || strings.HasSuffix(name, "."+domain)
}

func (k *checker) validateGSLB(zones, gws map[string]int) {
	c := k.c
	domains := map[string]int{}
	owners := map[string]string{} // owner name -> record type, to find CNAME clashes
	for i, d := range c.GSLB.Domains {
		p := fmt.Sprintf("gslb.domains[%d]", i)
		if d.Name == "" {
			k.errf(p, "domain has no name")
			continue
		}
		if !validDNSName(d.Name) {
			k.errf(p+".name", "%q is not a valid DNS name", d.Name)
		}
		if j, dup := domains[d.Name]; dup {
			k.errf(p+".name", "domain %q is defined twice (also gslb.domains[%d])", d.Name, j)
		}
		domains[d.Name] = i
		for j, ns := range d.NS {
			if !validDNSName(ns) {
				k.errf(fmt.Sprintf("%s.ns[%d]", p, j), "%q is not a valid DNS name", ns)
			}
		}
		for j, r := range d.Records {
			rp := fmt.Sprintf("%s.records[%d]", p, j)
			owner := d.RecordOwner(r)
			if r.Name == "" {
				k.errf(rp+".name", "record has no name (use \"@\" for the apex)")
			} else if !validDNSName(owner) {
				k.errf(rp+".name", "%q is not a valid DNS name", owner)
			} else if !inDomain(owner, d.Name) {
				k.errf(rp+".name", "%q is outside domain %q", owner, d.Name)
			}
			k.record(rp, r)
			if d.DNSSEC && r.Type == "NS" && !strings.EqualFold(strings.TrimSuffix(owner, "."), strings.TrimSuffix(d.Name, ".")) {
				k.errf(rp, "%s NS: a signed domain (dnssec) cannot delegate", owner)
			}
			if t, ok := owners[owner]; ok && (t == "CNAME" || r.Type == "CNAME") {
				k.errf(rp, "%s has a CNAME and other data", owner)
			}
			owners[owner] = r.Type
		}
	}
	for i, d := range c.GSLB.Domains {
		for j, o := range c.GSLB.Domains {
			if i != j && (d.DNSSEC || o.DNSSEC) && d.Name != o.Name && inDomain(o.Name, d.Name) {
				k.errf(fmt.Sprintf("gslb.domains[%d].dnssec", i), "domain %q lies inside %q: a signed domain cannot have another inside it, or lie inside another", o.Name, d.Name)
			}
		}
	}
	names := map[string]int{}
	for i, n := range c.GSLB.Names {
		p := fmt.Sprintf("gslb.names[%d]", i)
		if n.Name == "" {
			k.errf(p, "GSLB name has no name")
			continue
		}
		if !validDNSName(n.Name) {
			k.errf(p+".name", "%q is not a valid DNS name", n.Name)
		}
		inAny := false
		for d := range domains {
			inAny = inAny || inDomain(n.Name, d)
		}
		if !inAny {
			k.errf(p+".name", "%q is in none of the gslb domains", n.Name)
		}
		if j, dup := names[n.Name]; dup {
			k.errf(p+".name", "GSLB name %q is defined twice (also gslb.names[%d])", n.Name, j)
		}
		names[n.Name] = i
		if _, clash := owners[n.Name]; clash {
			k.errf(p+".name", "%q is both a GSLB name and a static record", n.Name)
		}
		k.oneOf(p+".policy", n.Policy, "failover", "round_robin", "weighted", "all_healthy")
		k.oneOf(p+".when_none_healthy", n.WhenNoneHealthy, "fail_open", "fail_closed")
		k.oneOf(p+".initial", n.Initial, "up", "down")
		if len(n.Sites) == 0 {
			k.errf(p+".sites", "GSLB name %q has no sites", n.Name)
		}
		siteZones := map[string]bool{}
		for j, s := range n.Sites {
			sp := fmt.Sprintf("%s.sites[%d]", p, j)
			k.ref(sp+".zone", "zone", s.Zone, zones)
			if siteZones[s.Zone] {
				k.errf(sp+".zone", "zone %q has two sites under %q", s.Zone, n.Name)
			}
			siteZones[s.Zone] = true
			if len(s.Gateways) == 0 {
				k.errf(sp+".gateways", "site %q lists no gateways", s.Zone)
			}
			for x, g := range s.Gateways {
				k.ref(fmt.Sprintf("%s.gateways[%d]", sp, x), "gateway", g, gws)
			}
			if s.Weight < 0 {
				k.errf(sp+".weight", "weight must not be negative")
			}
			k.percent(sp+".load_threshold", s.LoadThreshold)
		}
		for j, s := range n.Sites {
			for x, f := range s.Fallback {
				if !siteZones[f] {
					k.errf(fmt.Sprintf("%s.sites[%d].fallback[%d]", p, j, x), "zone %q has no site under %q", f, n.Name)
				}
			}
		}
	}
}

func (k *checker) record(p string, r Record) {
	v := r.Value
	switch r.Type {
	case "A", "AAAA":
		a, err := netip.ParseAddr(v)
		if err != nil || (r.Type == "A") != a.Is4() {
			k.errf(p+".value", "%q is not an IPv%s address", v, map[bool]string{true: "4", false: "6"}[r.Type == "A"])
		}
	case "CNAME", "NS":
		if !validDNSName(fqdn(v)) {
			k.errf(p+".value", "%q is not a valid DNS name", v)
		}
	case "TXT":
		if len(v) > 4000 {
			k.errf(p+".value", "TXT value is longer than 4000 bytes")
		}
	case "MX":
		pref, host, ok := strings.Cut(v, " ")
		_, err := strconv.ParseUint(pref, 10, 16)
		if !ok || err != nil || !validDNSName(fqdn(strings.TrimSpace(host))) {
			k.errf(p+".value", "%q is not \"preference name\" (e.g. \"10 mail.example.com.\")", v)
		}
	case "CAA":
		if _, _, _, err := ParseCAA(v); err != nil {
			k.errf(p+".value", "%v", err)
		}
	default:
		k.errf(p+".type", "%q is not one of A, AAAA, CNAME, TXT, MX, NS, CAA", r.Type)
	}
}

// ParseCAA parses a CAA record's value, "flags tag value" as in a zone file (RFC 8659): flags
// 0–255 (128: critical), a tag of letters and digits (issue, issuewild, iodef, ...) and a
// value, quoted or not (`0 issue "letsencrypt.org"`; `0 issue ";"` lets no CA issue).
func ParseCAA(v string) (flags uint8, tag, value string, err error) {
	f, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	n, perr := strconv.ParseUint(f, 10, 8)
	tag, value, ok2 := strings.Cut(strings.TrimSpace(rest), " ")
	if !ok || !ok2 || perr != nil {
		return 0, "", "", fmt.Errorf("%q is not \"flags tag value\" (e.g. `0 issue \"letsencrypt.org\"`)", v)
	}
	if tag == "" || len(tag) > 15 || strings.IndexFunc(tag, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return 0, "", "", fmt.Errorf("%q: the CAA tag %q is not 1 to 15 letters and digits", v, tag)
	}
	value = strings.TrimSpace(value)
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		value = value[1 : len(value)-1]
	}
	if strings.ContainsAny(value, "\"\\") || len(value) > 255 {
		return 0, "", "", fmt.Errorf("%q: the CAA value holds a quote or a backslash, or is longer than 255 bytes", v)
	}
	return uint8(n), strings.ToLower(tag), value, nil
}
