package etcd

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys are the site's keys and certificates in etcd: the site identity (the ticket keys and
// the CA) and the ACME certificates, keys and account, each sealed with the store secret, and
// the ACME challenge records every DNS node serves (certs.go).
type Keys struct{ st *Store }

// Keys returns the store's keys and certificates.
func (st *Store) Keys() Keys { return Keys{st} }

// The site identity (the ticket signing key and the CA's key) is kept in etcd sealed with a
// secret the operator gives every node (site.store.secret_file): AES-256-GCM under a key
// derived from the secret with HKDF-SHA256, the key's name as additional data. An etcd
// reader without the secret learns nothing of the identity and cannot replace it with one
// the nodes accept (the seal is authenticated); it still reads sessions, machine load and
// the other live state, which are not secret, and can delete or change them: protect etcd
// itself with TLS client certificates and etcd's own authentication.

// ErrSecret is returned for a store secret that is missing, malformed, or not the one the
// site identity was sealed with.
var ErrSecret = errors.New("store secret")

// SecretSize is the size of a store secret, in bytes.
const SecretSize = 32

// NewSecret returns a new random store secret, base64-encoded, for a secret file.
func NewSecret() string {
	b := make([]byte, SecretSize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// ReadSecret reads a store secret file: base64 of SecretSize bytes, surrounding white space
// ignored. The file must not be readable by others.
func ReadSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecret, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by others (mode %v): chmod 600 it", ErrSecret, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecret, err)
	}
	s, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) != SecretSize {
		return nil, fmt.Errorf("%w: %s does not hold base64 of %d bytes (make one with `frontdoor init --secret FILE`)", ErrSecret, path, SecretSize)
	}
	return s, nil
}

func (st *Store) aead(secret []byte) (cipher.AEAD, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrSecret, len(secret), SecretSize)
	}
	k, err := hkdf.Key(sha256.New, secret, nil, "frontdoor site identity", 32)
	if err != nil {
		return nil, err
	}
	blk, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// seal seals plain for the etcd key k (its additional data): a random nonce, then the
// ciphertext.
func seal(a cipher.AEAD, k string, plain []byte) []byte {
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce)
	return a.Seal(nonce, nonce, plain, []byte(k))
}

// unseal opens what seal sealed for k; what names it in errors.
func unseal(a cipher.AEAD, k string, sealed []byte, what string) ([]byte, error) {
	if len(sealed) < a.NonceSize() {
		return nil, fmt.Errorf("%w: %s is truncated", ErrSecret, what)
	}
	plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], []byte(k))
	if err != nil {
		return nil, fmt.Errorf("%w: %s in etcd was sealed with another secret", ErrSecret, what)
	}
	return plain, nil
}

// Identity returns the site identity, unsealed with secret. When the site has none yet, it
// seals the one create makes and stores it with a create-if-absent transaction: of nodes that
// start at once, one wins and every node, the losers too, returns the winner's.
func (h Keys) Identity(ctx context.Context, secret []byte, create func() ([]byte, error)) ([]byte, error) {
	st := h.st
	a, err := st.aead(secret)
	if err != nil {
		return nil, err
	}
	k := st.key("identity")
	open := func(sealed []byte) ([]byte, error) { return unseal(a, k, sealed, "the site identity") }
	if st.outage.Load() {
		if sealed, ok := st.cachedValue(k); ok {
			return open(sealed) // a node that starts in an outage
		}
		return nil, fmt.Errorf("reading the site identity: %w", ErrOutage)
	}
	r, err := st.cli.Get(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("reading the site identity: %w", err)
	}
	if len(r.Kvs) == 1 {
		return open(r.Kvs[0].Value)
	}
	plain, err := create()
	if err != nil {
		return nil, err
	}
	sealed := seal(a, k, plain)
	t, err := st.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(sealed))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("storing the site identity: %w", err)
	}
	if t.Succeeded {
		return plain, nil
	}
	return open(t.Responses[0].GetResponseRange().Kvs[0].Value)
}

// UpdateIdentity changes the site identity: fn gets it unsealed and returns the new one,
// which is sealed and stored if nobody changed it meanwhile (else fn runs again on theirs,
// up to 5 times). It returns what it stored.
func (h Keys) UpdateIdentity(ctx context.Context, secret []byte, fn func([]byte) ([]byte, error)) ([]byte, error) {
	st := h.st
	a, err := st.aead(secret)
	if err != nil {
		return nil, err
	}
	k := st.key("identity")
	if st.outage.Load() {
		return nil, fmt.Errorf("changing the site identity: %w", ErrOutage)
	}
	for range 5 {
		r, err := st.cli.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("reading the site identity: %w", err)
		}
		if len(r.Kvs) != 1 {
			return nil, errors.New("the site has no identity yet")
		}
		plain, err := unseal(a, k, r.Kvs[0].Value, "the site identity")
		if err != nil {
			return nil, err
		}
		next, err := fn(plain)
		if err != nil {
			return nil, err
		}
		t, err := st.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", r.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(k, string(seal(a, k, next)))).
			Commit()
		if err != nil {
			return nil, fmt.Errorf("storing the site identity: %w", err)
		}
		if t.Succeeded {
			return next, nil
		}
	}
	return nil, errors.New("the site identity kept changing under the update")
}
