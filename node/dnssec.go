package node

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/store/etcd"
)

// dnssecKeys returns the DNSSEC key (ECDSA P-256) of every GSLB domain configured with
// dnssec, by apex: made at the first start, and kept sealed in etcd on a site of several
// nodes (the first node's wins; every node signs with it), else in the data dir (mode 0600).
func (r *Node) dnssecKeys(ctx context.Context) (map[string]crypto.Signer, error) {
	keys := map[string]crypto.Signer{}
	for _, d := range r.cfg.GSLB.Domains {
		if !d.DNSSEC {
			continue
		}
		apex := strings.ToLower(strings.TrimSuffix(d.Name, ".")) + "."
		fresh, err := newDNSSECKey()
		if err != nil {
			return nil, err
		}
		var der []byte
		if r.shared != nil {
			kv, err := r.siteKV()
			if err != nil {
				return nil, err
			}
			if der, err = kv.Create(ctx, "dnssec/"+apex+"key", fresh); err != nil {
				return nil, fmt.Errorf("the DNSSEC key of %s: %w", apex, err)
			}
		} else if der, err = loadOrCreatePEMKey(filepath.Join(r.o.DataDir, "dnssec", apex+"key.pem"), fresh); err != nil {
			return nil, fmt.Errorf("the DNSSEC key of %s: %w", apex, err)
		}
		k, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, fmt.Errorf("the DNSSEC key of %s: %w", apex, err)
		}
		s, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("the DNSSEC key of %s is not ECDSA", apex)
		}
		keys[apex] = s
	}
	return keys, nil
}

// siteKV returns the site's sealed storage in etcd (the site's certificates and keys).
func (r *Node) siteKV() (*etcd.Certs, error) {
	if r.siteCerts != nil {
		return r.siteCerts, nil
	}
	secret, err := etcd.ReadSecret(r.cfg.Site.Store.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("site.store.secret_file: %w", err)
	}
	r.siteCerts, err = r.shared.Certs(secret)
	return r.siteCerts, err
}

// newDNSSECKey returns a new ECDSA P-256 key, PKCS#8 DER.
func newDNSSECKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKCS8PrivateKey(k)
}

// loadOrCreatePEMKey reads the PEM private key in file, or writes fresh (PKCS#8 DER) there
// (loadOrCreate), and returns its DER.
func loadOrCreatePEMKey(file string, fresh []byte) ([]byte, error) {
	b, err := loadOrCreate(file, func() ([]byte, error) {
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: fresh}), nil
	})
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s holds no PEM private key", file)
	}
	return blk.Bytes, nil
}
