package node

import (
	"context"
	"crypto"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/wire"
)

// The DNSSEC keys of the GSLB domains configured with dnssec: a key set per domain
// (gslb.KeySet), made at the first start and kept sealed in etcd on a site of several nodes
// (the first node's wins; every node signs with it and follows its rollovers), else in the
// data dir (mode 0600).

// keySets keeps the signed domains' key sets.
type keySets interface {
	// load returns apex's key set, storing fresh as it when there is none.
	load(ctx context.Context, apex string, fresh gslb.KeySet) (gslb.KeySet, error)
	// update stores what change makes of apex's key set, one change at a time site-wide.
	update(ctx context.Context, apex string, change func(gslb.KeySet) (gslb.KeySet, error)) (gslb.KeySet, error)
	// follow calls fn with apex's key set each time another node changes it.
	follow(apex string, fn func(gslb.KeySet))
}

// dnssecKeys returns the DNSSEC keys of every GSLB domain configured with dnssec, by apex.
func (r *Node) dnssecKeys(ctx context.Context) (map[string][]crypto.Signer, error) {
	keys := map[string][]crypto.Signer{}
	for _, apex := range r.signedApexes() {
		if r.keySets == nil {
			ks, err := r.site.keySets(r.o.DataDir)
			if err != nil {
				return nil, err
			}
			r.keySets = ks
		}
		fresh, err := gslb.NewKeySet(time.Now())
		if err != nil {
			return nil, err
		}
		set, err := r.keySets.load(ctx, apex, fresh)
		if err != nil {
			return nil, fmt.Errorf("the DNSSEC keys of %s: %w", apex, err)
		}
		if keys[apex], err = set.Signers(); err != nil {
			return nil, fmt.Errorf("the DNSSEC keys of %s: %w", apex, err)
		}
		if d, err := describeKeySet(apex, set); err == nil {
			r.log.Info("DNSSEC: "+d.Next, "domain", apex)
		}
	}
	return keys, nil
}

// signedApexes returns the apex of each GSLB domain configured with dnssec.
func (r *Node) signedApexes() []string {
	var out []string
	for _, d := range r.cfg.GSLB.Domains {
		if d.DNSSEC {
			out = append(out, gslb.Apex(d.Name))
		}
	}
	return out
}

// followDNSSEC makes the GSLB sign with the key sets another node changes.
func (r *Node) followDNSSEC() {
	for _, apex := range r.signedApexes() {
		r.keySets.follow(apex, func(set gslb.KeySet) { r.useKeySet(apex, set) })
	}
}

// useKeySet makes the GSLB sign apex with set.
func (r *Node) useKeySet(apex string, set gslb.KeySet) {
	signers, err := set.Signers()
	if err == nil {
		err = r.dns.SetKeys(apex, signers)
	}
	if err != nil {
		r.log.Error("DNSSEC: the domain's new keys cannot be used; it signs with the keys it had", "domain", apex, "err", err)
	}
}

// DNSSECDomains describes the keys of each signed domain (GET /v1/admin/dnssec).
func (r *Node) DNSSECDomains(ctx context.Context) ([]wire.DNSSECDomain, error) {
	var out []wire.DNSSECDomain
	for _, apex := range r.signedApexes() {
		set, err := r.keySets.load(ctx, apex, gslb.KeySet{})
		if err != nil {
			return nil, err
		}
		d, err := describeKeySet(apex, set)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DNSSECRollover takes a step of a rollover of domain's key (POST /v1/admin/dnssec/rollover):
// it adds a new key, or with finish retires the old one. A step that does not fit the state
// of the domain's keys wraps api.ErrRefused, a domain that is not signed api.ErrNotSigned.
func (r *Node) DNSSECRollover(ctx context.Context, domain string, finish bool) (wire.DNSSECDomain, error) {
	apex := gslb.Apex(domain)
	signed := false
	for _, a := range r.signedApexes() {
		signed = signed || a == apex
	}
	if !signed {
		return wire.DNSSECDomain{}, fmt.Errorf("%s: %w", apex, api.ErrNotSigned)
	}
	set, err := r.keySets.update(ctx, apex, func(s gslb.KeySet) (gslb.KeySet, error) {
		if finish {
			return s.Finish()
		}
		return s.Rollover(time.Now())
	})
	if errors.Is(err, gslb.ErrRollover) {
		err = fmt.Errorf("%w: %w", api.ErrRefused, err)
	}
	if err != nil {
		return wire.DNSSECDomain{}, err
	}
	r.useKeySet(apex, set)
	return describeKeySet(apex, set)
}

// describeKeySet says what apex's keys are and what the operator does next.
func describeKeySet(apex string, set gslb.KeySet) (wire.DNSSECDomain, error) {
	ds, err := set.DS(apex)
	if err != nil {
		return wire.DNSSECDomain{}, err
	}
	keys := make([]wire.DNSSECKey, len(ds))
	for i, d := range ds {
		keys[i] = wire.DNSSECKey{Tag: d.KeyTag, State: set.State(i), Since: set.Keys[i].Since, DS: d.String()}
	}
	d := wire.DNSSECDomain{Domain: apex, Keys: keys}
	if set.Rolling() {
		in := keys[len(keys)-1]
		d.Next = fmt.Sprintf("both keys sign every answer. From %s (an hour after the new key was published: the DNSKEY set's TTL) "+
			"put key %d's DS at the parent of %s in place of key %d's: %s. Once the parent publishes it and the old DS's TTL has passed, "+
			"finish the rollover (frontdoor admin dnssec rollover %s --finish): key %d then retires.",
			in.Since.Add(time.Hour).UTC().Format(time.RFC3339), in.Tag, apex, keys[0].Tag, in.DS, apex, keys[0].Tag)
	} else {
		d.Next = fmt.Sprintf("the parent of %s publishes key %d's DS: %s", apex, keys[0].Tag, keys[0].DS)
	}
	return d, nil
}

// etcdKeySets keeps the key sets sealed in etcd, the site's.
type etcdKeySets struct{ kv *etcd.Certs }

func keySetKey(apex string) string { return "dnssec/" + apex + "keys" }

func (s etcdKeySets) load(ctx context.Context, apex string, fresh gslb.KeySet) (gslb.KeySet, error) {
	b, _, err := s.kv.Get(ctx, keySetKey(apex))
	if errors.Is(err, fs.ErrNotExist) && len(fresh.Keys) > 0 {
		// A site of an earlier version kept one key, PKCS#8 DER, under dnssec/APEXkey: the
		// domain goes on signing with it, and its DS stays right.
		if der, _, lerr := s.kv.Get(ctx, "dnssec/"+apex+"key"); lerr == nil {
			fresh = gslb.KeySet{Keys: []gslb.SetKey{{Private: der}}}
		}
		b, err = s.kv.Create(ctx, keySetKey(apex), fresh.Marshal())
	}
	if err != nil {
		return gslb.KeySet{}, err
	}
	return gslb.ParseKeySet(b)
}

func (s etcdKeySets) update(ctx context.Context, apex string, change func(gslb.KeySet) (gslb.KeySet, error)) (gslb.KeySet, error) {
	lock := "dnssec-" + apex
	if err := s.kv.Lock(ctx, lock); err != nil {
		return gslb.KeySet{}, err
	}
	defer s.kv.Unlock(context.WithoutCancel(ctx), lock)
	cur, err := s.load(ctx, apex, gslb.KeySet{})
	if err != nil {
		return gslb.KeySet{}, err
	}
	next, err := change(cur)
	if err != nil {
		return gslb.KeySet{}, err
	}
	if err := s.kv.Put(ctx, keySetKey(apex), next.Marshal()); err != nil {
		return gslb.KeySet{}, err
	}
	return next, nil
}

func (s etcdKeySets) follow(apex string, fn func(gslb.KeySet)) {
	s.kv.Follow(keySetKey(apex), func(b []byte) {
		if set, err := gslb.ParseKeySet(b); err == nil {
			fn(set)
		}
	})
}

// fileKeySets keeps the key sets of a one-node site in its data dir: dnssec/APEXkeys.json.
type fileKeySets struct {
	dir string
	mu  sync.Mutex // serialises update
}

func (s *fileKeySets) file(apex string) string { return filepath.Join(s.dir, apex+"keys.json") }

func (s *fileKeySets) load(_ context.Context, apex string, fresh gslb.KeySet) (gslb.KeySet, error) {
	if len(fresh.Keys) > 0 {
		if legacy, err := s.legacy(apex); err != nil {
			return gslb.KeySet{}, err
		} else if len(legacy.Keys) > 0 {
			fresh = legacy
		}
	}
	b, err := os.ReadFile(s.file(apex))
	if errors.Is(err, fs.ErrNotExist) && len(fresh.Keys) > 0 {
		if err = os.MkdirAll(s.dir, 0o700); err != nil {
			return gslb.KeySet{}, err
		}
		if err = atomicfile.Create(s.file(apex), fresh.Marshal(), 0o600); err == nil || errors.Is(err, fs.ErrExist) {
			b, err = os.ReadFile(s.file(apex))
		}
	}
	if err != nil {
		return gslb.KeySet{}, err
	}
	set, err := gslb.ParseKeySet(b)
	if err != nil {
		return gslb.KeySet{}, fmt.Errorf("%s: %w", s.file(apex), err)
	}
	return set, nil
}

// legacy returns the key that a node of an earlier version kept in dnssec/APEXkey.pem as a
// key set, or none: the domain goes on signing with it, and its DS stays right.
func (s *fileKeySets) legacy(apex string) (gslb.KeySet, error) {
	file := filepath.Join(s.dir, apex+"key.pem")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return gslb.KeySet{}, nil
	}
	if err != nil {
		return gslb.KeySet{}, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return gslb.KeySet{}, fmt.Errorf("%s holds no PEM private key", file)
	}
	var since time.Time
	if fi, err := os.Stat(file); err == nil {
		since = fi.ModTime().UTC()
	}
	return gslb.KeySet{Keys: []gslb.SetKey{{Private: blk.Bytes, Since: since}}}, nil
}

func (s *fileKeySets) update(ctx context.Context, apex string, change func(gslb.KeySet) (gslb.KeySet, error)) (gslb.KeySet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.load(ctx, apex, gslb.KeySet{})
	if err != nil {
		return gslb.KeySet{}, err
	}
	next, err := change(cur)
	if err != nil {
		return gslb.KeySet{}, err
	}
	if err := atomicfile.Write(s.file(apex), next.Marshal(), 0o600); err != nil {
		return gslb.KeySet{}, err
	}
	return next, nil
}

// follow has nothing to follow: the node's own admin API is the only one that changes them.
func (s *fileKeySets) follow(string, func(gslb.KeySet)) {}
