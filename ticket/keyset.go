package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// KeyID names a signing key in a ticket: the first 8 bytes of SHA-256 of its public key.
type KeyID [8]byte

// KeyIDOf returns the id of pub.
func KeyIDOf(pub ed25519.PublicKey) KeyID {
	sum := sha256.Sum256(pub)
	var id KeyID
	copy(id[:], sum[:])
	return id
}

// String is the id in hex.
func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// SiteKey is one of the site's ticket signing keys.
type SiteKey struct {
	// Private is the Ed25519 key.
	Private ed25519.PrivateKey
	// SignFrom is when the key starts to sign: until then it only verifies, so that every
	// verifier of the site holds it before any ticket it signs arrives. Zero: from the start.
	SignFrom time.Time
	// RetireAt is when the key stops verifying (the last ticket it signed has expired by
	// then); zero: never, while it is the newest.
	RetireAt time.Time
}

// ID returns the key's id.
func (k SiteKey) ID() KeyID { return KeyIDOf(k.Private.Public().(ed25519.PublicKey)) }

// KeySet is the site's ticket signing keys, oldest first.
type KeySet struct {
	Keys []SiteKey
}

// ErrNoKey is returned when a KeySet has no key that may sign.
var ErrNoKey = errors.New("the site has no ticket signing key")

// Signing returns the key that signs at now: the newest whose SignFrom has come.
func (ks KeySet) Signing(now time.Time) (SiteKey, error) {
	for i := len(ks.Keys) - 1; i >= 0; i-- {
		k := ks.Keys[i]
		if !now.Before(k.SignFrom) && (k.RetireAt.IsZero() || now.Before(k.RetireAt)) {
			return k, nil
		}
	}
	return SiteKey{}, ErrNoKey
}

// Verifying returns the public keys that verify at now: every key not retired.
func (ks KeySet) Verifying(now time.Time) []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for _, k := range ks.Live(now) {
		out = append(out, k.Private.Public().(ed25519.PublicKey))
	}
	return out
}

// Live returns the keys not retired at now: those whose tickets (and agent tokens) verify.
func (ks KeySet) Live(now time.Time) []SiteKey {
	var out []SiteKey
	for _, k := range ks.Keys {
		if k.RetireAt.IsZero() || now.Before(k.RetireAt) {
			out = append(out, k)
		}
	}
	return out
}

// Rotate returns the set with a new key that signs from now+overlap; the key that signs now
// retires keep after that (the longest a ticket it signed lives, with margin), and keys
// retired by now are dropped.
func (ks KeySet) Rotate(now time.Time, overlap, keep time.Duration) (KeySet, SiteKey, error) {
	old, err := ks.Signing(now)
	if err != nil {
		return ks, SiteKey{}, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return ks, SiteKey{}, fmt.Errorf("generating a ticket key: %w", err)
	}
	nk := SiteKey{Private: priv, SignFrom: now.Add(overlap).UTC().Truncate(time.Millisecond)}
	var out KeySet
	for _, k := range ks.Keys {
		switch {
		case !k.RetireAt.IsZero() && !now.Before(k.RetireAt):
			continue // retired
		case k.ID() == old.ID() || k.RetireAt.IsZero():
			if r := nk.SignFrom.Add(keep); k.RetireAt.IsZero() || r.Before(k.RetireAt) {
				k.RetireAt = r
			}
		}
		out.Keys = append(out.Keys, k)
	}
	out.Keys = append(out.Keys, nk)
	return out, nk, nil
}

// keyJSON is a SiteKey as MarshalJSON writes it.
type keyJSON struct {
	Key      []byte    `json:"key"` // PEM PKCS#8 (EncodeKey)
	SignFrom time.Time `json:"sign_from,omitzero"`
	RetireAt time.Time `json:"retire_at,omitzero"`
}

// MarshalJSON writes the set with its keys as PEM.
func (ks KeySet) MarshalJSON() ([]byte, error) {
	out := make([]keyJSON, 0, len(ks.Keys))
	for _, k := range ks.Keys {
		out = append(out, keyJSON{Key: EncodeKey(k.Private), SignFrom: k.SignFrom, RetireAt: k.RetireAt})
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (ks *KeySet) UnmarshalJSON(b []byte) error {
	var in []keyJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	ks.Keys = ks.Keys[:0]
	for i, k := range in {
		priv, err := ParseKey(k.Key)
		if err != nil {
			return fmt.Errorf("ticket key %d: %w", i, err)
		}
		ks.Keys = append(ks.Keys, SiteKey{Private: priv, SignFrom: k.SignFrom, RetireAt: k.RetireAt})
	}
	return nil
}

// ring is the public keys a Verifier checks with, by id.
type ring struct {
	byID map[KeyID]ed25519.PublicKey
	all  []ed25519.PublicKey
}

func newRing(pubs []ed25519.PublicKey) *ring {
	r := &ring{byID: make(map[KeyID]ed25519.PublicKey, len(pubs)), all: slices.Clone(pubs)}
	for _, p := range pubs {
		r.byID[KeyIDOf(p)] = p
	}
	return r
}

func (r *ring) key(id KeyID) (ed25519.PublicKey, bool) {
	p, ok := r.byID[id]
	return p, ok
}
