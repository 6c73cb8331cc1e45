package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/wire"
	"github.com/miekg/dns"
	"github.com/spf13/cobra"
)

func newDNSSECCmd(f *adminFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "dnssec",
		Short: "Show the keys of the GSLB domains signed with DNSSEC, with the DS records the parents publish",
		Long: `dnssec shows, for each GSLB domain signed with DNSSEC, its keys (tag, state, since when) and
each key's DS record, to publish at the domain's parent, and what to do next.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.do(cmd, http.MethodGet, "/v1/admin/dnssec", nil) },
	}
	var finish, force bool
	var resolver string
	roll := &cobra.Command{
		Use:   "rollover DOMAIN [--finish [--resolver HOST:PORT] [--force]]",
		Short: "Roll a signed domain's DNSSEC key over: add a new key, then with --finish retire the old one",
		Long: `rollover replaces the DNSSEC key of a GSLB domain, in two steps, by double signatures
(RFC 6781 4.1.2). A domain has one key, which signs both its DNSKEY set and its answers (a
combined signing key), so a rollover changes the DS record at the domain's parent.

  1. rollover DOMAIN adds a new key: from then on both keys are in the DNSKEY set and sign
     every answer at every front door of the site, and it prints the new key's DS. An hour
     later (the DNSKEY set's TTL), put that DS at the parent in place of the old key's.
  2. rollover DOMAIN --finish, once the parent publishes the new DS and the old DS's TTL has
     passed, retires the old key: it leaves the DNSKEY set and signs no more.

Before it finishes, --finish asks a resolver (--resolver, else the first nameserver of
/etc/resolv.conf) for the domain's DS records and refuses when the new key's DS is not among
them: a resolver that trusts only the old DS would then fail to validate the domain.
--force finishes without asking (a parent the resolver cannot see).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if finish && !force {
				if err := parentHasIncomingDS(cmd, f, args[0], resolver); err != nil {
					return err
				}
			}
			return f.do(cmd, http.MethodPost, "/v1/admin/dnssec/rollover", wire.DNSSECRolloverRequest{Domain: args[0], Finish: finish})
		},
	}
	roll.Flags().BoolVar(&finish, "finish", false, "retire the old key of the rollover under way (once the parent publishes the new DS)")
	roll.Flags().StringVar(&resolver, "resolver", "", "the resolver --finish asks for the parent's DS records, HOST:PORT (default: the first nameserver of /etc/resolv.conf)")
	roll.Flags().BoolVar(&force, "force", false, "with --finish: retire the old key without asking whether the parent publishes the new DS")
	c.AddCommand(roll)
	return c
}

// parentHasIncomingDS returns nil when a rollover of domain is under way and resolver answers
// the new key's DS for it; else an error that says what it found.
func parentHasIncomingDS(cmd *cobra.Command, f *adminFlags, domain, resolver string) error {
	out, err := f.call(cmd, http.MethodGet, "/v1/admin/dnssec", nil)
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	var domains []wire.DNSSECDomain
	if err := json.Unmarshal(out, &domains); err != nil {
		return fmt.Errorf("GET /v1/admin/dnssec: %w", err)
	}
	apex := gslb.Apex(domain)
	i := slices.IndexFunc(domains, func(d wire.DNSSECDomain) bool { return d.Domain == apex })
	if i < 0 {
		return fmt.Errorf("%s is not a GSLB domain signed with DNSSEC", apex)
	}
	keys := domains[i].Keys
	if len(keys) < 2 {
		return fmt.Errorf("no rollover of %s is under way (key %d is its only key)", apex, keys[0].Tag)
	}
	in := keys[len(keys)-1]
	want, err := dns.NewRR(in.DS)
	if err != nil {
		return fmt.Errorf("the new key's DS %q: %w", in.DS, err)
	}
	if resolver == "" {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cc.Servers) == 0 {
			return fmt.Errorf("no resolver to ask for the parent's DS records (/etc/resolv.conf: %v): name one with --resolver, or --force", err)
		}
		resolver = net.JoinHostPort(cc.Servers[0], cc.Port)
	}
	m := new(dns.Msg)
	m.SetQuestion(apex, dns.TypeDS)
	m.SetEdns0(1232, true)
	r, _, err := (&dns.Client{Timeout: 5 * time.Second}).ExchangeContext(cmd.Context(), m, resolver)
	if err == nil && r.Truncated {
		r, _, err = (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).ExchangeContext(cmd.Context(), m, resolver)
	}
	if err != nil {
		return fmt.Errorf("asking %s for the DS records of %s: %w (or --force)", resolver, apex, err)
	}
	var seen []string
	for _, rr := range r.Answer {
		ds, ok := rr.(*dns.DS)
		if !ok {
			continue
		}
		if wds := want.(*dns.DS); ds.KeyTag == wds.KeyTag && ds.Algorithm == wds.Algorithm && ds.DigestType == wds.DigestType &&
			strings.EqualFold(ds.Digest, wds.Digest) {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s answers key %d's DS for %s (TTL %ds: a resolver that holds the old DS keeps it that long)\n",
				resolver, in.Tag, apex, ds.Hdr.Ttl)
			return nil
		}
		seen = append(seen, fmt.Sprint(ds.KeyTag))
	}
	found := "no DS record (" + dns.RcodeToString[r.Rcode] + ")"
	if len(seen) > 0 {
		found = "the DS of key " + strings.Join(seen, ", key ")
	}
	return fmt.Errorf("the parent of %s does not publish key %d's DS yet: %s answers %s. Publish %s there, wait for the old DS's TTL, and run this again (or --force)",
		apex, in.Tag, resolver, found, in.DS)
}
