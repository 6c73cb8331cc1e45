package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreateKey reads the site's Ed25519 key from path (PEM, PKCS#8), creating it with mode
// 0600 when the file does not exist.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generating site key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("encoding site key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating key directory: %w", err)
		}
		p := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("writing site key: %w", err)
		}
		if _, err := f.Write(p); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing site key: %w", err)
		}
		return key, f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("reading site key: %w", err)
	}
	key, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("site key %s: %w", path, err)
	}
	return key, nil
}

// EncodeKey returns a site key as PEM (PKCS#8).
func EncodeKey(key ed25519.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(key) // an Ed25519 key always encodes
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// ParseKey reads a site key from PEM (PKCS#8).
func ParseKey(b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("not an Ed25519 key")
	}
	return key, nil
}
