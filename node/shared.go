package node

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// identity is the site identity every node of a site shares: the ticket signing key (from
// which the agents' credentials derive) and the CA that issues the nodes' certificates.
type identity struct {
	SiteKey []byte `json:"site_key"` // PEM PKCS#8 Ed25519
	CACert  []byte `json:"ca_cert"`  // PEM
	CAKey   []byte `json:"ca_key"`   // PEM PKCS#8
}

// loadIdentity sets the site key and the CA: from the data dir on a store of one node
// (created there on first start), from the site database when it is shared (created by the
// first node to start, sealed with the store secret). The CA certificate is written to the
// data dir either way, for clients to trust.
func (r *Runtime) loadIdentity(ctx context.Context) error {
	log := r.log.With("component", "ca")
	if r.shared == nil {
		keyFile := r.cfg.Site.Tickets.KeyFile
		if keyFile == "" {
			keyFile = filepath.Join(r.o.DataDir, "site.key")
		}
		var err error
		if r.SiteKey, err = ticket.LoadOrCreateKey(keyFile); err != nil {
			return err
		}
		r.CA, err = api.LoadOrCreateCA(r.o.DataDir, r.cfg.Site.Name, log)
		return err
	}
	if r.cfg.Site.Tickets.KeyFile != "" {
		return errors.New("site.tickets.key_file: on an etcd store the site key is the site's, kept sealed in etcd; remove key_file")
	}
	secret, err := etcd.ReadSecret(r.cfg.Site.Store.SecretFile)
	if err != nil {
		return fmt.Errorf("site.store.secret_file: %w", err)
	}
	b, err := r.shared.Identity(ctx, secret, func() ([]byte, error) {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			return nil, err
		}
		cert, caKey, err := api.GenerateCA(r.cfg.Site.Name)
		if err != nil {
			return nil, err
		}
		r.log.Info("created the site identity (site key, CA) in the store")
		return json.Marshal(identity{SiteKey: ticket.EncodeKey(key), CACert: cert, CAKey: caKey})
	})
	if err != nil {
		return err
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("the site identity in the store: %w", err)
	}
	if r.SiteKey, err = ticket.ParseKey(id.SiteKey); err != nil {
		return fmt.Errorf("the site key in the store: %w", err)
	}
	if r.CA, err = api.NewCA(id.CACert, id.CAKey, log); err != nil {
		return fmt.Errorf("the site CA in the store: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(r.o.DataDir, "ca.pem"), id.CACert, 0o644); err != nil {
		return fmt.Errorf("writing the CA certificate: %w", err)
	}
	return nil
}

// writeFileAtomic writes b to path through a synced temporary file and a rename.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// endedElsewhere closes the channels of a session that another node logged off or that the
// store expired.
func (r *Runtime) endedElsewhere(s broker.Session) {
	if !r.built.Load() {
		return // no gateway carries it yet
	}
	r.log.Info("session ended", "session", s.ID, "user", s.User, "machine", s.Machine)
	r.closeSession(s.ID)
}

// applyModes installs the secure-gateway switches stored site-wide in the broker and the
// admin APIs. Groups the configuration does not have are ignored.
func (r *Runtime) applyModes(modes map[string]bool) {
	for g, on := range modes {
		if err := r.Broker.SetSecureGateway(g, on); err != nil {
			continue
		}
	}
	for _, a := range r.admins {
		a.ApplyModes(modes)
	}
}

// storeStatus describes the store for the admin status.
func (r *Runtime) storeStatus(ctx context.Context) any {
	if r.shared != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return r.shared.Status(ctx)
	}
	b := r.cfg.Site.Store.Backend
	if b == "" {
		b = "bolt"
	}
	return map[string]any{"backend": b}
}

// siteLedger adapts the site database's ledger to ticket.Ledger.
type siteLedger struct{ l etcd.Ledger }

var _ ticket.Ledger = siteLedger{}

// Use implements ticket.Ledger.
func (s siteLedger) Use(id [16]byte, ch ticket.Channel, until time.Time) (bool, error) {
	return s.l.Use(id, ch.String(), until)
}

// Revoke implements ticket.Ledger.
func (s siteLedger) Revoke(session string, until time.Time) error { return s.l.Revoke(session, until) }

// Revoked implements ticket.Ledger.
func (s siteLedger) Revoked(session string) (bool, error) { return s.l.Revoked(session) }
