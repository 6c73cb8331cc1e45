package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/libdns/libdns"
)

// acmeCerts manages the node's certificates with the site's ACME CA. The dns-01 challenge is
// answered by the node's own GSLB server. On a site of several nodes the ACME account, the
// certificates and their keys live sealed in etcd, one node obtains a name's certificate while
// the others wait for it (a site-wide lock), and a challenge's record is published through
// etcd, so that every DNS node of the site serves it, whichever node the CA asks.
func (r *Node) acmeCerts(ctx context.Context) (*pki.Certs, error) {
	t := r.cfg.Site.TLS
	names := t.Names
	if len(names) == 0 {
		for _, n := range r.cfg.GSLB.Names {
			names = append(names, strings.TrimSuffix(n.Name, "."))
		}
	}
	if len(names) == 0 {
		return nil, errors.New("site.tls.issuer is acme but there are no names: set site.tls.names or a GSLB name")
	}
	ao := pki.ACMEOptions{CA: t.ACME.CA, Email: t.ACME.Email, Challenge: t.ACME.Challenge, Resolvers: r.dnsListeners(),
		RenewCheck: r.o.CertRenewCheck}
	if t.ACME.CARoot != "" {
		var err error
		if ao.Roots, err = pki.ReadCAPool(t.ACME.CARoot); err != nil {
			return nil, fmt.Errorf("site.tls.acme.ca_root: %w", err)
		}
	}
	kv, err := r.site.acme(&ao, r.dns, r.log)
	if err != nil {
		return nil, err
	}
	return pki.NewACMECerts(ctx, r.o.DataDir, kv, names, ao)
}

// siteChallenges adds a dns-01 challenge's records to the node's own GSLB server (which
// checks that they are ours) and publishes them through etcd for the site's other DNS nodes.
type siteChallenges struct {
	st    *etcd.Store
	local *gslb.ACME
}

// AppendRecords implements libdns.RecordAppender.
func (s siteChallenges) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	done, err := s.local.AppendRecords(ctx, zone, recs)
	if err != nil {
		return done, err
	}
	for i, rec := range done {
		rr := rec.RR()
		if err := s.st.Keys().AddChallenge(ctx, libdns.AbsoluteName(rr.Name, zone), rr.Data); err != nil {
			s.local.DeleteRecords(ctx, zone, done[i:]) // not published: not served here either
			return done[:i], err
		}
	}
	return done, nil
}

// DeleteRecords implements libdns.RecordDeleter.
func (s siteChallenges) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	for _, rec := range recs {
		rr := rec.RR()
		if rr.Type == "TXT" || rr.Type == "" {
			s.st.Keys().RemoveChallenge(ctx, libdns.AbsoluteName(rr.Name, zone), rr.Data)
		}
	}
	return s.local.DeleteRecords(ctx, zone, recs)
}
