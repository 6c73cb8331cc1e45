package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/atomicfile"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// identities keep the site identity (identity: the ticket keys and the site CA). A site of
// several nodes keeps it in etcd, sealed with the store secret (siteIdentities); a site of one
// node in files of its data dir (dataDirIdentities). A node reads, rotates and follows it the
// same way on both.
type identities interface {
	// Load returns the identity, made and kept first when the site has none: its first start.
	Load(ctx context.Context) (identity, error)
	// Read returns the identity; an error when the site has none.
	Read(ctx context.Context) (identity, error)
	// Update changes the identity with fn in one step and returns what it kept. An error of
	// fn is returned as it is, and nothing changes.
	Update(ctx context.Context, fn func(*identity) error) (identity, error)
}

var (
	_ identities = siteIdentities{}
	_ identities = dataDirIdentities{}
)

// identitiesOf returns where the site of cfg keeps its identity: the site database when the
// store is shared, else dataDir.
func identitiesOf(cfg *configs.Config, shared *etcd.Store, dataDir string, log *slog.Logger) (identities, error) {
	if shared == nil {
		keyFile := cfg.Site.Tickets.KeyFile
		if keyFile == "" {
			keyFile = filepath.Join(dataDir, "site.key")
		}
		return dataDirIdentities{dir: dataDir, keyFile: keyFile, site: cfg.Site.Name, log: log}, nil
	}
	if cfg.Site.Tickets.KeyFile != "" {
		return nil, errors.New("site.tickets.key_file: on an etcd store the site key is the site's, kept sealed in etcd; remove key_file")
	}
	return siteIdentities{keys: shared.Keys(), secretFile: cfg.Site.Store.SecretFile, site: cfg.Site.Name, log: log}, nil
}

// newIdentity makes a site identity: a ticket key and a CA.
func newIdentity(site string) (identity, error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return identity{}, err
	}
	cert, caKey, err := pki.GenerateCA(site)
	if err != nil {
		return identity{}, err
	}
	return identity{SiteKey: ticket.EncodeKey(key), CACert: cert, CAKey: caKey}, nil
}

// siteIdentities is the identity of a site of several nodes, in etcd, sealed with the store
// secret (read from its file at each use). Each change counts up its generation.
type siteIdentities struct {
	keys       etcd.Keys
	secretFile string
	site       string
	log        *slog.Logger
}

func (s siteIdentities) secret() ([]byte, error) {
	secret, err := etcd.ReadSecret(s.secretFile)
	if err != nil {
		return nil, fmt.Errorf("site.store.secret_file: %w", err)
	}
	return secret, nil
}

func (s siteIdentities) Load(ctx context.Context) (identity, error) {
	return s.read(ctx, func() ([]byte, error) {
		id, err := newIdentity(s.site)
		if err != nil {
			return nil, err
		}
		s.log.Info("created the site identity (site key, CA) in the store")
		return json.Marshal(id)
	})
}

func (s siteIdentities) Read(ctx context.Context) (identity, error) {
	return s.read(ctx, func() ([]byte, error) { return nil, errors.New("the site identity is gone") })
}

func (s siteIdentities) read(ctx context.Context, create func() ([]byte, error)) (identity, error) {
	secret, err := s.secret()
	if err != nil {
		return identity{}, err
	}
	b, err := s.keys.Identity(ctx, secret, create)
	if err != nil {
		return identity{}, err
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return identity{}, fmt.Errorf("the site identity in the store: %w", err)
	}
	return id, nil
}

func (s siteIdentities) Update(ctx context.Context, fn func(*identity) error) (identity, error) {
	secret, err := s.secret()
	if err != nil {
		return identity{}, err
	}
	var out identity
	_, err = s.keys.UpdateIdentity(ctx, secret, func(b []byte) ([]byte, error) {
		var id identity
		if err := json.Unmarshal(b, &id); err != nil {
			return nil, fmt.Errorf("the site identity in the store: %w", err)
		}
		if err := fn(&id); err != nil {
			return nil, err
		}
		id.Generation++
		out = id
		return json.Marshal(id)
	})
	return out, err
}

// dataDirIdentities is the identity of a site of one node, in files of its data dir (mode
// 0600): the site key (site.key, or site.tickets.key_file), the ticket keys once a key was
// rotated in (TicketKeysFile), the CA (ca.pem and ca.key) and its state once it was rotated
// (caStateFile). Its generation is always 0: no other writer puts an older copy back.
type dataDirIdentities struct {
	dir, keyFile, site string
	log                *slog.Logger
}

func (d dataDirIdentities) Load(ctx context.Context) (identity, error) {
	if _, err := loadOrCreateKey(d.keyFile); err != nil {
		return identity{}, err
	}
	if _, err := pki.LoadOrCreateCA(d.dir, d.site, d.log); err != nil {
		return identity{}, err
	}
	return d.Read(ctx)
}

func (d dataDirIdentities) Read(context.Context) (identity, error) {
	var id identity
	var err error
	if id.SiteKey, err = os.ReadFile(d.keyFile); err != nil {
		return id, fmt.Errorf("site key: %w", err)
	}
	var ks ticket.KeySet
	if ok, err := readDataJSON(d.dir, TicketKeysFile, &ks); err != nil {
		return id, err
	} else if ok {
		id.TicketKeys = &ks
	}
	st, rotated, err := localCAState(d.dir)
	if err != nil {
		return id, err
	}
	if !rotated {
		if st.Cert, err = os.ReadFile(filepath.Join(d.dir, "ca.pem")); err != nil {
			return id, err
		}
		if st.Key, err = os.ReadFile(filepath.Join(d.dir, "ca.key")); err != nil {
			return id, err
		}
	}
	id.CACert, id.CAKey, id.CARotation = st.Cert, st.Key, st.Rotation
	return id, nil
}

// Update writes the files of what fn changed: the ticket keys, or the CA's state.
func (d dataDirIdentities) Update(ctx context.Context, fn func(*identity) error) (identity, error) {
	id, err := d.Read(ctx)
	if err != nil {
		return id, err
	}
	keysBefore, _ := json.Marshal(id.TicketKeys)
	caBefore, _ := json.Marshal(id.caState())
	if err := fn(&id); err != nil {
		return id, err
	}
	if b, _ := json.Marshal(id.TicketKeys); !bytes.Equal(b, keysBefore) {
		if err := atomicfile.Write(filepath.Join(d.dir, TicketKeysFile), b, 0o600); err != nil {
			return id, fmt.Errorf("writing the ticket keys: %w", err)
		}
	}
	if b, _ := json.Marshal(id.caState()); !bytes.Equal(b, caBefore) {
		if err := atomicfile.Write(filepath.Join(d.dir, caStateFile), b, 0o600); err != nil {
			return id, fmt.Errorf("writing %s: %w", caStateFile, err)
		}
	}
	return id, nil
}
