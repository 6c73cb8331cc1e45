package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// identity is the site identity every node of a site shares: the ticket signing key (from
// which the agents' credentials derive) and the CA that issues the nodes' certificates.
type identity struct {
	SiteKey []byte `json:"site_key"` // PEM PKCS#8 Ed25519
	CACert  []byte `json:"ca_cert"`  // PEM
	CAKey   []byte `json:"ca_key"`   // PEM PKCS#8
	// TicketKeys are the ticket signing keys once one was rotated in (rotateKey); before
	// that SiteKey alone signs.
	TicketKeys *ticket.KeySet `json:"ticket_keys,omitempty"`
	// CARotation is a rotation of the CA under way (rotate-ca): CACert and CAKey are the CA
	// that issues, CARotation the other one, trusted too. Nil when none is.
	CARotation *pki.CARotation `json:"ca_rotation,omitempty"`
	// Generation counts the identity's changes (each rotate-key and rotate-ca step adds
	// one): a node refuses an identity older than one it has seen (checkGeneration).
	Generation uint64 `json:"generation,omitempty"`
}

// loadIdentity sets the site key, the CA and where the identity is kept (see LoadIdentity).
func (r *Node) loadIdentity(ctx context.Context) (err error) {
	r.siteKey, r.ca, r.ids, err = openIdentity(ctx, r.cfg, r.shared, r.o.DataDir, r.log)
	return err
}

// LoadIdentity returns the site key and the CA: from dataDir on a store of one node (created
// there on first start, shared nil), from the site database when it is shared (created by
// the first node to start, sealed with the store secret). The CA certificates it trusts are
// in dataDir/ca.pem either way, for clients to trust.
func LoadIdentity(ctx context.Context, cfg *configs.Config, shared *etcd.Store, dataDir string, log *slog.Logger) (ed25519.PrivateKey, *pki.CA, error) {
	key, ca, _, err := openIdentity(ctx, cfg, shared, dataDir, log)
	return key, ca, err
}

func openIdentity(ctx context.Context, cfg *configs.Config, shared *etcd.Store, dataDir string, log *slog.Logger) (ed25519.PrivateKey, *pki.CA, identities, error) {
	calog := log.With("component", "ca")
	ids, err := identitiesOf(cfg, shared, dataDir, log)
	if err != nil {
		return nil, nil, nil, err
	}
	id, err := ids.Load(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ticket.ParseKey(id.SiteKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the site key: %w", err)
	}
	ca, err := pki.NewCA(id.CACert, id.CAKey, calog)
	if err == nil {
		err = ca.Apply(id.caState())
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the site CA: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	if err := atomicfile.Write(filepath.Join(dataDir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
		return nil, nil, nil, fmt.Errorf("writing the CA certificate: %w", err)
	}
	return key, ca, ids, nil
}

// loadOrCreateKey reads the site's Ed25519 key from path (PEM, PKCS#8), creating it with
// mode 0600 when the file does not exist (loadOrCreate).
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := loadOrCreate(path, func() ([]byte, error) {
		_, key, err := ed25519.GenerateKey(nil)
		return ticket.EncodeKey(key), err
	})
	if err != nil {
		return nil, fmt.Errorf("site key: %w", err)
	}
	key, err := ticket.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("site key %s: %w", path, err)
	}
	return key, nil
}

// loadOrCreate returns what path holds, writing what fresh makes there (mode 0600) when it
// does not exist: whole or not at all (a crash cannot leave a torn key that blocks the next
// start), and of nodes that start at once one wins.
func loadOrCreate(path string, fresh func() ([]byte, error)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		nb, err := fresh()
		if err != nil {
			return nil, fmt.Errorf("generating %s: %w", path, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating the directory of %s: %w", path, err)
		}
		err = atomicfile.Create(path, nb, 0o600)
		if err == nil {
			return nb, nil
		}
		if !errors.Is(err, atomicfile.ErrExist) {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		b, err = os.ReadFile(path) // another node of this data dir was first
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// endedElsewhere closes the channels of a session that another node logged off or that the
// store expired.
func (r *Node) endedElsewhere(s broker.Session) {
	if !r.built.Load() {
		return // no gateway carries it yet
	}
	r.log.Info("session ended", "session", s.ID, "user", s.User, "machine", s.Machine)
	r.sessionEnded(s)
}

// applyModes installs the secure-gateway switches stored site-wide in the broker and the
// admin APIs. Groups the configuration does not have are ignored.
func (r *Node) applyModes(modes map[string]bool) {
	for g, on := range modes {
		r.broker.SetSecureGateway(g, on) // a group the config no longer has: nothing to switch
	}
	for _, a := range r.admins {
		a.ApplyModes(modes)
	}
}

// storeStatus describes the store for the admin status.
func (r *Node) storeStatus(ctx context.Context) any {
	if r.shared != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return r.shared.Presence().Status(ctx)
	}
	b := r.cfg.Site.Store.Backend
	if b == "" {
		b = "bolt"
	}
	return map[string]any{"backend": b}
}

// storeLedger is a ticket.Ledger over a store's ledger, which names channels as strings
// ("8443/tcp"): the site database's (etcd.Ledger) or a one-node site's bolt file
// (bolt.Ledger), so that a restart forgets no revocation, supersede mark or single use
// (finding L4 of the security review).
type storeLedger struct {
	l interface {
		Use(id [16]byte, ch string, until time.Time) (bool, error)
		Revoke(session string, before, until time.Time) error
		Revoked(session string) (time.Time, error)
		Supersede(session string, mark uint64, until time.Time) error
		Superseded(session string) (uint64, error)
	}
}

var _ ticket.Ledger = storeLedger{}

// Use implements ticket.Ledger.
func (s storeLedger) Use(id [16]byte, ch ticket.Channel, until time.Time) (bool, error) {
	return s.l.Use(id, ch.String(), until)
}

// Revoke implements ticket.Ledger.
func (s storeLedger) Revoke(session string, before, until time.Time) error {
	return s.l.Revoke(session, before, until)
}

// Revoked implements ticket.Ledger.
func (s storeLedger) Revoked(session string) (time.Time, error) { return s.l.Revoked(session) }

// Supersede implements ticket.Ledger.
func (s storeLedger) Supersede(session string, mark uint64, until time.Time) error {
	return s.l.Supersede(session, mark, until)
}

// Superseded implements ticket.Ledger.
func (s storeLedger) Superseded(session string) (uint64, error) { return s.l.Superseded(session) }

// siteLedger is the site database's ledger, which also wants the session of a launch
// ticket it records (ticket.SessionLedger).
type siteLedger struct {
	storeLedger
	site etcd.Ledger
}

var _ ticket.SessionLedger = siteLedger{}

// newSiteLedger returns the ticket.Ledger of the site database's ledger l.
func newSiteLedger(l etcd.Ledger) siteLedger { return siteLedger{storeLedger{l}, l} }

// UseFor implements ticket.SessionLedger.
func (s siteLedger) UseFor(id [16]byte, session string, ch ticket.Channel, until time.Time) (bool, error) {
	return s.site.UseFor(id, session, ch.String(), until)
}

// notifyingLedger is a ticket.Ledger of one node that tells fn of each revocation it takes,
// as the site database's watch tells a node of a shared store (etcd.Ledger.OnRevoked).
type notifyingLedger struct {
	ticket.Ledger
	fn func(session string, before time.Time)
}

// Revoke implements ticket.Ledger.
func (n notifyingLedger) Revoke(session string, before, until time.Time) error {
	if err := n.Ledger.Revoke(session, before, until); err != nil {
		return err
	}
	n.fn(session, before)
	return nil
}

// applyOverrides installs the health overrides stored site-wide: each gateway of the config
// follows its entry (none: the probes).
func (r *Node) applyOverrides(stored map[string]string) {
	for _, g := range r.cfg.Gateways {
		v, err := health.ParseOverride(stored[g.Name])
		if stored[g.Name] == "" || err != nil {
			v = health.OverrideNone
		}
		if st, ok := r.health.Status(g.Name); ok && st.Override == v {
			continue
		}
		if note, err := r.applyOverride(g, v); err != nil {
			r.log.Warn("applying a stored health override", "gateway", g.Name, "override", v.String(), "err", err)
		} else {
			r.log.Info("health override from the site", "gateway", g.Name, "override", v.String(), "note", note)
		}
	}
}

// applyOverride sets an override here: this front door's verdict, and the drain mode of the
// gateway when this node hosts it. The note says what else holds.
func (r *Node) applyOverride(g configs.Gateway, v health.Override) (note string, err error) {
	if err := r.health.SetOverride(g.Name, v); err != nil {
		return "", err
	}
	var notes []string
	if r.shared != nil {
		notes = append(notes, "set at every front door")
	}
	gw := r.gateways[g.Name]
	drain := v == health.OverrideDrain || v == health.OverrideDown
	switch {
	case gw == nil && g.Node != "":
		notes = append(notes, fmt.Sprintf("node %s, which hosts %s, sets its drain mode", g.Node, g.Name))
	case gw == nil: // a foreign server: the verdicts are all there is
	case !gw.CanDrain():
		if drain {
			notes = append(notes, "the gateway has no https health port to say it drains")
		}
	default:
		gw.Drain(drain)
		if q := r.quics()[g.Name]; q != nil {
			q.Drain(drain)
		}
	}
	return strings.Join(notes, "; "), nil
}
