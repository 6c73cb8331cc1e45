package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
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

// loadIdentity sets the site key, the CA and where the identity is kept (see LoadIdentity).
func (r *Node) loadIdentity(ctx context.Context) (err error) {
	r.siteKey, r.ca, r.ids, err = openIdentity(ctx, r.cfg, r.site, r.o.DataDir, r.log)
	return err
}

// LoadIdentity returns the site key and the CA of the site whose store is st: from dataDir
// on a store of one node (created there on first start; st may be nil), from the site
// database when st is etcd (created by the first node to start, sealed with the store
// secret). The CA certificates it trusts are in dataDir/ca.pem either way, for clients to
// trust.
func LoadIdentity(ctx context.Context, cfg *configs.Config, st broker.Store, dataDir string, log *slog.Logger) (ed25519.PrivateKey, *pki.CA, error) {
	s, err := openSite(ctx, st, cfg, dataDir)
	if err != nil {
		return nil, nil, err
	}
	key, ca, _, err := openIdentity(ctx, cfg, s, dataDir, log)
	return key, ca, err
}

func openIdentity(ctx context.Context, cfg *configs.Config, s site, dataDir string, log *slog.Logger) (ed25519.PrivateKey, *pki.CA, identities, error) {
	calog := log.With("component", "ca")
	ids, err := s.identities(cfg, dataDir, log)
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
