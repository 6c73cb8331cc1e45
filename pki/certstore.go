package pki

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/caddyserver/certmagic"
)

// CertKV is a site-wide, sealed key-value space with locks (an etcd store's Certs): where the
// nodes of a site keep their ACME account, certificates and keys, so that one node obtains a
// name's certificate and every node serves it.
type CertKV interface {
	Put(ctx context.Context, key string, value []byte) error
	// Get returns fs.ErrNotExist for a key that is not there.
	Get(ctx context.Context, key string) ([]byte, time.Time, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
	HasBelow(ctx context.Context, key string) bool
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// SiteStorage is certmagic's storage on kv.
func SiteStorage(kv CertKV) certmagic.Storage { return kvStorage{kv} }

type kvStorage struct{ kv CertKV }

var _ certmagic.Storage = kvStorage{}

func (s kvStorage) Lock(ctx context.Context, name string) error   { return s.kv.Lock(ctx, name) }
func (s kvStorage) Unlock(ctx context.Context, name string) error { return s.kv.Unlock(ctx, name) }
func (s kvStorage) Store(ctx context.Context, key string, value []byte) error {
	return s.kv.Put(ctx, key, value)
}

func (s kvStorage) Load(ctx context.Context, key string) ([]byte, error) {
	v, _, err := s.kv.Get(ctx, key)
	return v, err
}

func (s kvStorage) Delete(ctx context.Context, key string) error { return s.kv.Delete(ctx, key) }

func (s kvStorage) Exists(ctx context.Context, key string) bool {
	_, _, err := s.kv.Get(ctx, key)
	return err == nil || s.kv.HasBelow(ctx, key)
}

func (s kvStorage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	keys, err := s.kv.List(ctx, path, recursive)
	if err == nil && len(keys) == 0 {
		return nil, fs.ErrNotExist
	}
	return keys, err
}

func (s kvStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	v, mod, err := s.kv.Get(ctx, key)
	switch {
	case err == nil:
		return certmagic.KeyInfo{Key: key, Modified: mod, Size: int64(len(v)), IsTerminal: true}, nil
	case errors.Is(err, fs.ErrNotExist) && s.kv.HasBelow(ctx, key):
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, err
}
