package gslb

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// A signed domain's keys and how they are rolled over. frontdoor signs with combined signing
// keys (each signs the DNSKEY set and the data, as Knot's single-type-signing): a rollover
// changes the DS at the parent, by double signatures (RFC 6781 §4.1.2). It has two steps:
//
//  1. Rollover adds a new key: from then on both keys are in the DNSKEY set and sign every
//     answer, so that a resolver holding either key's DS validates. The operator publishes the
//     new key's DS at the parent in place of the old one, once the DNSKEY set's TTL (an hour)
//     has passed, so that no resolver holds the old set with the new DS.
//  2. Finish, once the parent publishes the new DS and the old DS's TTL has passed, retires
//     the old key: it leaves the DNSKEY set and signs no more.

// ErrRollover is returned for a rollover step that does not fit the key set's state: a
// rollover while one is under way, or a finish with none under way.
var ErrRollover = errors.New("DNSSEC rollover")

// KeySet is a signed domain's keys, oldest first, as the site keeps them: one key, or two
// while a rollover is under way (the second is the incoming one).
type KeySet struct {
	Keys []SetKey `json:"keys"`
}

// SetKey is a key of a KeySet.
type SetKey struct {
	// Private is the key, ECDSA P-256 in PKCS#8 DER.
	Private []byte `json:"private"`
	// Since is when the key joined the set (was first published).
	Since time.Time `json:"since"`
}

// NewKeySet returns a set of one new key, published at now.
func NewKeySet(now time.Time) (KeySet, error) {
	k, err := newPrivate()
	if err != nil {
		return KeySet{}, err
	}
	return KeySet{Keys: []SetKey{{Private: k, Since: now.UTC()}}}, nil
}

// ParseKeySet parses a KeySet as MarshalKeySet writes it, and checks each key.
func ParseKeySet(b []byte) (KeySet, error) {
	var s KeySet
	if err := json.Unmarshal(b, &s); err != nil {
		return KeySet{}, fmt.Errorf("a DNSSEC key set: %w", err)
	}
	if len(s.Keys) == 0 || len(s.Keys) > 2 {
		return KeySet{}, fmt.Errorf("a DNSSEC key set holds %d keys, want 1 or 2", len(s.Keys))
	}
	if _, err := s.Signers(); err != nil {
		return KeySet{}, err
	}
	return s, nil
}

// Marshal returns s as ParseKeySet reads it.
func (s KeySet) Marshal() []byte {
	b, _ := json.Marshal(s)
	return b
}

// Signers returns s's keys, oldest first.
func (s KeySet) Signers() ([]crypto.Signer, error) {
	var out []crypto.Signer
	for _, k := range s.Keys {
		p, err := x509.ParsePKCS8PrivateKey(k.Private)
		if err != nil {
			return nil, fmt.Errorf("a DNSSEC key: %w", err)
		}
		e, ok := p.(*ecdsa.PrivateKey)
		if !ok || e.Curve != elliptic.P256() {
			return nil, errors.New("a DNSSEC key is not ECDSA P-256")
		}
		out = append(out, e)
	}
	return out, nil
}

// Rolling reports whether a rollover is under way.
func (s KeySet) Rolling() bool { return len(s.Keys) > 1 }

// Rollover returns s with a new key, published at now: the first step of a rollover. It
// refuses while a rollover is under way.
func (s KeySet) Rollover(now time.Time) (KeySet, error) {
	if s.Rolling() {
		return s, fmt.Errorf("%w: one is under way; finish it first", ErrRollover)
	}
	k, err := newPrivate()
	if err != nil {
		return s, err
	}
	return KeySet{Keys: []SetKey{s.Keys[0], {Private: k, Since: now.UTC()}}}, nil
}

// Finish returns s without its old key: the last step of a rollover. It refuses when no
// rollover is under way.
func (s KeySet) Finish() (KeySet, error) {
	if !s.Rolling() {
		return s, fmt.Errorf("%w: none is under way", ErrRollover)
	}
	return KeySet{Keys: s.Keys[len(s.Keys)-1:]}, nil
}

// DS returns the DS record (SHA-256) of each of s's keys, as apex's parent publishes it,
// oldest first.
func (s KeySet) DS(apex string) ([]*dns.DS, error) {
	signers, err := s.Signers()
	if err != nil {
		return nil, err
	}
	zks, err := zoneKeys(apex, signers)
	if err != nil {
		return nil, err
	}
	out := make([]*dns.DS, len(zks))
	for i, zk := range zks {
		out[i] = zk.dnskey.ToDS(dns.SHA256)
	}
	return out, nil
}

// State says what key i of s is: "active"; or, while a rollover is under way, "retiring"
// (the old key) and "incoming" (the new one, whose DS goes to the parent).
func (s KeySet) State(i int) string {
	switch {
	case !s.Rolling():
		return "active"
	case i == len(s.Keys)-1:
		return "incoming"
	default:
		return "retiring"
	}
}

// Apex returns name as the apex of a signed domain is keyed: lower case, with the final dot.
func Apex(name string) string { return fqdn(strings.ToLower(name)) }

// newPrivate returns a new ECDSA P-256 key in PKCS#8 DER.
func newPrivate() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKCS8PrivateKey(k)
}
