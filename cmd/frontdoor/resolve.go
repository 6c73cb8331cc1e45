package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
)

func newResolveCmd() *cobra.Command {
	var server, subnet, qtype string
	var tcp, dnssec bool
	c := &cobra.Command{
		Use:   "resolve NAME --dns ADDR [--client-subnet CIDR] [--type A|AAAA|TXT|...] [--tcp] [--dnssec]",
		Short: "Ask a DNS server for NAME, optionally as a client of another subnet (EDNS Client Subnet)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, ok := dns.StringToType[strings.ToUpper(qtype)]
			if !ok {
				return fmt.Errorf("unknown record type %q", qtype)
			}
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(args[0]), t)
			m.SetEdns0(1232, dnssec)
			if subnet != "" {
				p, err := netip.ParsePrefix(subnet)
				if err != nil {
					return fmt.Errorf("--client-subnet: %w", err)
				}
				e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
				e.Family = 1
				if p.Addr().Is6() {
					e.Family = 2
				}
				m.IsEdns0().Option = append(m.IsEdns0().Option, e)
			}
			cl := &dns.Client{Timeout: 3 * time.Second}
			if tcp {
				cl.Net = "tcp"
			}
			r, rtt, err := cl.ExchangeContext(cmd.Context(), m, server)
			if err != nil {
				return fmt.Errorf("asking %s: %w", server, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s %s from %s in %s: %s\n", args[0], qtype, server, rtt.Round(time.Microsecond), dns.RcodeToString[r.Rcode])
			for _, rr := range r.Answer {
				fmt.Fprintln(out, " ", rr.String())
			}
			if o := r.IsEdns0(); o != nil {
				for _, opt := range o.Option {
					if s, ok := opt.(*dns.EDNS0_SUBNET); ok {
						fmt.Fprintf(out, "  client subnet %s/%d, scope /%d\n", s.Address, s.SourceNetmask, s.SourceScope)
					}
				}
			}
			if dnssec {
				// AD: a validating resolver checked the answer's signatures up to its trust
				// anchor; an authoritative server, as the GSLB, sends signatures but never AD.
				fmt.Fprintf(out, "  validated (AD): %s\n", map[bool]string{true: "yes", false: "no"}[r.AuthenticatedData])
			}
			if r.Rcode != dns.RcodeSuccess {
				return fmt.Errorf("%s", dns.RcodeToString[r.Rcode])
			}
			return nil
		},
	}
	c.Flags().StringVar(&server, "dns", "127.1.0.1:5353", "DNS server address")
	c.Flags().StringVar(&subnet, "client-subnet", "", "send an EDNS Client Subnet option for this range")
	c.Flags().StringVar(&qtype, "type", "A", "record type")
	c.Flags().BoolVar(&tcp, "tcp", false, "ask over TCP")
	c.Flags().BoolVar(&dnssec, "dnssec", false, "ask for DNSSEC (the DO bit): a signed domain's answers carry their signatures, and a validating resolver says whether it validated them")
	return c
}
