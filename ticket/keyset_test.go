package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// A rotation rolls a new key in with overlap: it verifies at once, signs from the overlap's
// end, and the old key verifies the tickets it signed until it retires.
func TestRotationRollsANewKeyInWithOverlap(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	_, first, _ := ed25519.GenerateKey(rand.Reader)
	ks := KeySet{Keys: []SiteKey{{Private: first}}}
	ks, next, err := ks.Rotate(t0, time.Minute, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		at        time.Time
		signs     KeyID
		verifying int
	}{
		{"during the overlap the old key signs, both verify", t0.Add(30 * time.Second), SiteKey{Private: first}.ID(), 2},
		{"after the overlap the new key signs, both verify", t0.Add(2 * time.Minute), next.ID(), 2},
		{"after the old key retires only the new one verifies", t0.Add(time.Minute + 10*time.Hour), next.ID(), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := ks.Signing(c.at)
			if err != nil || k.ID() != c.signs {
				t.Fatalf("Signing = %s, %v; want %s", k.ID(), err, c.signs)
			}
			if n := len(ks.Verifying(c.at)); n != c.verifying {
				t.Fatalf("%d keys verify, want %d", n, c.verifying)
			}
		})
	}
	// A ticket signed by the old key checks with a verifier of both, as does one of the new.
	clk := t0.Add(30 * time.Second)
	now := func() time.Time { return clk }
	v := NewVerifier(first.Public().(ed25519.PublicKey), NewMemoryLedger(0, now), now)
	v.SetKeys(ks.Verifying(clk))
	s := NewSigner(first, now)
	old, _, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1"}, 10*time.Hour)
	s.SetKey(next.Private)
	fresh, c, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1"}, 10*time.Hour)
	if c.Key != next.ID() {
		t.Fatalf("the new ticket names key %s, want %s", c.Key, next.ID())
	}
	for _, tok := range []string{old, fresh} {
		if _, err := v.Check(tok, "vda-1", tcp8443); err != nil {
			t.Fatalf("Check during the overlap: %v", err)
		}
	}
	// Once the old key retires, its tickets are refused.
	clk = t0.Add(time.Minute + 10*time.Hour + time.Second)
	v.SetKeys(ks.Verifying(clk))
	if _, err := v.Check(old, "vda-1", tcp8443); !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrExpired) {
		t.Fatalf("a retired key's ticket: %v, want refused", err)
	}
	// Another rotation drops what retired and retires the key that signs.
	again, _, err := ks.Rotate(clk, time.Minute, 10*time.Hour)
	if err != nil || len(again.Keys) != 2 || again.Keys[0].ID() != next.ID() || again.Keys[0].RetireAt.IsZero() {
		t.Fatalf("second rotation: %d keys, %v", len(again.Keys), err)
	}
	// The set survives JSON.
	b, err := json.Marshal(ks)
	if err != nil {
		t.Fatal(err)
	}
	var back KeySet
	if err := json.Unmarshal(b, &back); err != nil || len(back.Keys) != 2 || back.Keys[1].ID() != next.ID() ||
		!back.Keys[1].SignFrom.Equal(next.SignFrom) || !back.Keys[0].RetireAt.Equal(ks.Keys[0].RetireAt) {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
}

// A version 1 ticket (no key id) still checks, with any key of the ring.
func TestVersionOneTicketsStillCheck(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	c := Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeDirect, Issued: now, Expires: now.Add(time.Hour)}
	b := []byte{versionV1, byte(c.Kind)}
	b = append(b, c.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Issued.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Expires.UnixMilli()))
	for _, f := range []string{c.Session, c.Machine, c.Mode} {
		b = append(append(b, byte(len(f))), f...)
	}
	b = append(b, 0)
	tok := enc.EncodeToString(append(b, ed25519.Sign(key, b)...))
	v := NewVerifier(other.Public().(ed25519.PublicKey), NewMemoryLedger(0, nil), nil)
	v.SetKeys([]ed25519.PublicKey{other.Public().(ed25519.PublicKey), key.Public().(ed25519.PublicKey)})
	got, err := v.Check(tok, "vda-1", tcp8443)
	if err != nil || got.Session != "s-1" || got.Key != (KeyID{}) {
		t.Fatalf("a version 1 ticket: %+v, %v", got, err)
	}
	v.SetKeys([]ed25519.PublicKey{other.Public().(ed25519.PublicKey)})
	if _, err := v.Check(tok, "vda-1", tcp8443); !errors.Is(err, ErrSignature) {
		t.Fatalf("a version 1 ticket without its key: %v, want a bad signature", err)
	}
}

// FuzzParseBody: what a signature covers is parsed before the signature is checked, so the
// parser itself faces the network; arbitrary bodies never panic, and what parses encodes back
// to the same body.
func FuzzParseBody(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tok, _, _ := NewSigner(key, nil).Issue(Claims{Kind: Launch, Session: "s", Machine: "m", Mode: ModeGateway, Channels: []Channel{tcp8443, {Port: 4172, Proto: "udp"}}}, time.Minute)
	b, _ := enc.DecodeString(tok)
	f.Add(b[:len(b)-ed25519.SignatureSize])
	login := time.Now()
	tok, _, _ = NewSigner(key, nil).Issue(Claims{Kind: Reconnect, Session: "s", Machine: "m", Mode: ModeGateway, User: "alice",
		Factors: FactorPassword | FactorTOTP, AuthTime: login, LoginExpires: login.Add(10 * time.Hour)}, time.Hour)
	b, _ = enc.DecodeString(tok)
	f.Add(b[:len(b)-ed25519.SignatureSize])
	f.Add([]byte{version})
	f.Add([]byte{versionV3, 1})
	f.Add([]byte{versionV1, 1})
	f.Add([]byte{versionV2, 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseBody(body)
		if err != nil || body[0] != version {
			return
		}
		if got := marshal(c); string(got) != string(body) {
			t.Fatalf("parsed %+v from %x, which encodes as %x", c, body, got)
		}
	})
}
