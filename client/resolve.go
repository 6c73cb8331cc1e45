package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Resolve looks name up (A, then AAAA) at the DNS server dnsServer ("host:port", e.g. the
// site's GSLB server) and returns the addresses in answer order, IPv4 first. An IP literal is
// returned as is; an empty dnsServer uses the system resolver. A truncated UDP answer is asked
// again over TCP.
func Resolve(ctx context.Context, name, dnsServer string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	if dnsServer == "" {
		as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", name, err)
		}
		for i := range as {
			as[i] = as[i].Unmap()
		}
		return as, nil
	}
	var out []netip.Addr
	var errs []error
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		as, err := query(ctx, name, dnsServer, qt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, as...)
	}
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, fmt.Errorf("resolving %s at %s: %w", name, dnsServer, errors.Join(errs...))
		}
		return nil, fmt.Errorf("resolving %s at %s: %w", name, dnsServer, ErrNoAddress)
	}
	return out, nil
}

func query(ctx context.Context, name, server string, qt uint16) ([]netip.Addr, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, fmt.Errorf("%s query: %w", dns.TypeToString[qt], err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s query: %s", dns.TypeToString[qt], dns.RcodeToString[r.Rcode])
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		var ip net.IP
		switch v := rr.(type) {
		case *dns.A:
			ip = v.A
		case *dns.AAAA:
			ip = v.AAAA
		default:
			continue
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}
