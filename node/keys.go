package node

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// keyOverlap is how long a new ticket key only verifies before it signs: every node (which
// rereads the keys every keyRefresh) and every agent (api.Agents' site-key, reread as often)
// holds it before a ticket it signs reaches them.
const keyOverlap = 30 * time.Second

// keyRefresh is how often a node rereads the site's ticket keys and applies them.
const keyRefresh = 5 * time.Second

// TicketKeysFile holds, in the data dir of a node on a store of one node, the site's ticket
// keys once a key was rotated; before that the site key (site.key) is the only one.
const TicketKeysFile = "ticket-keys.json"

// LocalKeys returns the ticket keys that rotate-key wrote in the data dir of a node on a
// store of one node (TicketKeysFile); ok is false when none was rotated in, and the site
// key (site.key) alone signs.
func LocalKeys(dataDir string) (ks ticket.KeySet, ok bool, err error) {
	ok, err = readDataJSON(dataDir, TicketKeysFile, &ks)
	return ks, ok, err
}

// readDataJSON reads the JSON file name in dataDir into v; ok is false when there is none.
func readDataJSON(dataDir, name string, v any) (ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dataDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s in %s: %w", name, dataDir, err)
	}
	return true, nil
}

// readKeys returns the site's ticket keys, of the site identity; the site key alone when none
// was rotated in.
func (r *Node) readKeys(ctx context.Context) (ticket.KeySet, error) {
	ks, _, err := r.readSite(ctx)
	return ks, err
}

// readSite returns the site's ticket keys (readKeys) and the site CA's state, both of the site
// identity.
func (r *Node) readSite(ctx context.Context) (ticket.KeySet, pki.CAState, error) {
	first := ticket.KeySet{Keys: []ticket.SiteKey{{Private: r.siteKey}}}
	id, err := r.readIdentity(ctx)
	if err != nil {
		return first, pki.CAState{}, err
	}
	if id.TicketKeys == nil || len(id.TicketKeys.Keys) == 0 {
		return first, id.caState(), nil
	}
	return *id.TicketKeys, id.caState(), nil
}

// readIdentity returns the site identity, refused when it is older than one the node has
// seen (checkGeneration).
func (r *Node) readIdentity(ctx context.Context) (identity, error) {
	id, err := r.ids.Read(ctx)
	if err != nil {
		return identity{}, err
	}
	if err := r.checkGeneration(id.Generation); err != nil {
		return identity{}, err
	}
	return id, nil
}

// generationFile keeps, in a node's data dir, the newest generation of the site identity the
// node has seen.
const generationFile = "identity-generation"

// ErrIdentityRolledBack refuses a site identity older than one the node has seen.
var ErrIdentityRolledBack = errors.New("the site identity in the store is older than one this front door has seen")

// checkGeneration refuses the site identity's generation gen when the node has seen a newer
// one (a writer of etcd put an old copy back, undoing a rotate-key: finding L6 of the
// security review), and else records it. The node keeps the keys it has; at start it does not
// start.
func (r *Node) checkGeneration(gen uint64) error {
	r.genMu.Lock()
	defer r.genMu.Unlock()
	path := filepath.Join(r.o.DataDir, generationFile)
	var seen uint64
	if b, err := os.ReadFile(path); err == nil {
		fmt.Sscan(string(b), &seen)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", generationFile, err)
	}
	switch {
	case gen < seen:
		return fmt.Errorf("%w (generation %d, after %d): was it put back by a writer of etcd? The ticket keys stay as they are; restore the newer identity, or remove %s to accept this one",
			ErrIdentityRolledBack, gen, seen, path)
	case gen > seen:
		if err := atomicfile.Write(path, []byte(fmt.Sprintln(gen)), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", generationFile, err)
		}
	}
	return nil
}

// applyKeys makes the key set's signing key sign and its keys verify at now, here and at the
// agents this node serves.
func (r *Node) applyKeys(ks ticket.KeySet, now time.Time) error {
	k, err := ks.Signing(now)
	if err != nil {
		return err
	}
	r.keysMu.Lock()
	changed := r.keys == nil || r.signer.KeyID() != k.ID() || len(ks.Verifying(now)) != len(r.keys.Verifying(now))
	r.keys = &ks
	r.keysMu.Unlock()
	pubs := ks.Verifying(now)
	r.signer.SetKey(k.Private)
	r.verifier.SetKeys(pubs)
	// The agents' tokens come from the same keys: a rotation rotates them, a key retired
	// (at once, with --retire-now) takes its tokens with it.
	var tokenKeys [][]byte
	for _, sk := range ks.Live(now) {
		tokenKeys = append(tokenKeys, api.AgentKey(sk.Private))
	}
	for _, a := range r.agents {
		a.SetSiteKeys(k.Private.Public().(ed25519.PublicKey), pubs)
		a.SetTokenKeys(tokenKeys)
	}
	if changed {
		r.log.Info("ticket keys", "signing", k.ID().String(), "verifying", len(pubs))
	}
	return nil
}

// refreshKeys rereads and applies the ticket keys and the site CA every
// keyRefresh until ctx ends: a key rotated (or a step of a CA rotation taken) at another front
// door reaches this one, and a new key starts to sign here when its time comes.
func (r *Node) refreshKeys(ctx context.Context) error {
	t := time.NewTicker(keyRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ks, ca, err := r.readSite(ctx)
		if err == nil {
			err = r.applyKeys(ks, time.Now())
		}
		if err == nil {
			err = r.applyCA(ctx, ca)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reading the ticket keys and the site CA", "err", err)
		}
	}
}

// rotateKey rolls a new ticket key into the site: it verifies at once everywhere, signs after
// keyOverlap, and the key that signs now retires once the longest ticket it signed (a
// reconnect ticket) has expired.
func (r *Node) rotateKey(ctx context.Context, retireNow bool) (api.Rotation, error) {
	r.rotateMu.Lock()
	defer r.rotateMu.Unlock()
	now := time.Now()
	overlap, keep := keyOverlap, r.cfg.Site.Tickets.ReconnectTTL.D()+time.Minute
	if retireNow {
		// A leaked key: the others retire the moment the new one signs, which is once every
		// front door has read it (they read the keys every keyRefresh): a new key that signed
		// at once would have its tickets refused at the other front doors meanwhile.
		overlap, keep = keyRefresh+time.Second, 0
	}
	var out api.Rotation
	rotate := func(ks ticket.KeySet) (ticket.KeySet, error) {
		old, err := ks.Signing(now)
		if err != nil {
			return ks, err
		}
		next, nk, err := ks.Rotate(now, overlap, keep)
		if err != nil {
			return ks, err
		}
		out = api.Rotation{Key: nk.ID().String(), SignsFrom: nk.SignFrom, Retiring: old.ID().String(), RetiresAt: nk.SignFrom.Add(keep)}
		return next, nil
	}
	id, err := r.ids.Update(ctx, func(id *identity) error {
		cur := ticket.KeySet{Keys: []ticket.SiteKey{{Private: r.siteKey}}}
		if id.TicketKeys != nil && len(id.TicketKeys.Keys) > 0 {
			cur = *id.TicketKeys
		}
		next, err := rotate(cur)
		if err != nil {
			return err
		}
		id.TicketKeys = &next
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("%w: the site identity did not take the new key: %v", api.ErrRefused, err)
	}
	ks := *id.TicketKeys
	if err := r.applyKeys(ks, now); err != nil {
		return out, err
	}
	r.log.Info("ticket key rotated", "key", out.Key, "signs_from", out.SignsFrom, "retiring", out.Retiring, "retires_at", out.RetiresAt)
	return out, nil
}

// trust is what a node signs and checks with: the site CA and its certificates, the ticket
// keys, the DNSSEC keys, and the locks that apply a change of them.
type trust struct {
	ids identities // where the site identity is kept (identity.go)
	// keySets keeps the DNSSEC keys of the signed GSLB domains; nil when none is signed.
	keySets  keySets
	ca       *pki.CA
	certs    *pki.Certs
	userCAs  *pki.ClientCAs // the operator CAs of users' client certificates; nil: none
	signer   *ticket.Signer
	verifier *ticket.Verifier
	siteKey  ed25519.PrivateKey
	agentKey []byte

	genMu    sync.Mutex     // serializes checkGeneration
	keysMu   sync.Mutex     // guards keys
	keys     *ticket.KeySet // the ticket keys last applied (applyKeys)
	rotateMu sync.Mutex     // serializes rotateKey and rotateCA
	caMu     sync.Mutex     // serializes applyCA; guards caApplied
	// caApplied is the site CA state last applied (applyCA), JSON.
	caApplied []byte
}
