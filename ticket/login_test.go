package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// A ticket seals its login — user, factors, when — and a reissued reconnect ticket keeps it,
// expiry of the login included: a rotation is no new login.
func TestTheLoginIsSealedAndKeptByReissue(t *testing.T) {
	s, v, clk, _ := setup(t)
	login := clk.Now().Add(-3 * time.Minute)
	tok, c, err := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeGateway,
		User: "alice", Factors: FactorPassword | FactorTOTP, AuthTime: login, LoginExpires: login.Add(8 * time.Hour)}, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Check(tok, "", tcp8443)
	if err != nil {
		t.Fatal(err)
	}
	if got.User != "alice" || got.Factors != FactorPassword|FactorTOTP || !got.AuthTime.Equal(login) || !got.LoginExpires.Equal(login.Add(8*time.Hour)) {
		t.Fatalf("checked claims %+v, want alice's login of %s with password+totp", got, login)
	}
	clk.Advance(time.Hour)
	next, nc, err := s.Reissue(c, c.Expires)
	if err != nil {
		t.Fatal(err)
	}
	if nc.User != c.User || nc.Factors != c.Factors || !nc.AuthTime.Equal(c.AuthTime) || !nc.LoginExpires.Equal(c.LoginExpires) {
		t.Fatalf("reissued %+v from %+v: the login changed", nc, c)
	}
	if got, err := v.Check(next, "", tcp8443); err != nil || !got.AuthTime.Equal(login) || got.Factors.String() != "password+totp" {
		t.Fatalf("the reissued ticket: %+v, %v", got, err)
	}
}

// Past its login's expiry a ticket opens nothing, with ErrLoginExpired (which gateways answer
// StatusLoginExpired) and a reason that says who logged in when; a ticket without a login
// has no such limit.
func TestATicketPastItsLoginsLifetimeIsRefused(t *testing.T) {
	s, v, clk, _ := setup(t)
	login := clk.Now()
	tok, c, err := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeDirect,
		User: "alice", Factors: FactorPassword, AuthTime: login, LoginExpires: login.Add(2 * time.Hour)}, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bare, _, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-2", Machine: "vda-1", Mode: ModeDirect}, 10*time.Hour)
	clk.Advance(2*time.Hour - time.Millisecond)
	if _, err := v.Check(tok, "", tcp8443); err != nil {
		t.Fatalf("just before the login's end: %v", err)
	}
	clk.Advance(time.Millisecond)
	_, err = v.Check(tok, "", tcp8443)
	if !errors.Is(err, ErrLoginExpired) || !strings.Contains(err.Error(), "alice logged in at 2026-11-30T09:00:00Z with password") {
		t.Fatalf("at the login's end: %v, want ErrLoginExpired naming alice's login", err)
	}
	if DeniedStatus(err) != StatusLoginExpired || DeniedStatus(ErrRevoked) != StatusDenied {
		t.Fatalf("DeniedStatus: %d for the login's end, %d for a revocation", DeniedStatus(err), DeniedStatus(ErrRevoked))
	}
	if next, _, err := s.Reissue(c, c.Expires); err != nil {
		t.Fatal(err)
	} else if _, err := v.Check(next, "", tcp8443); !errors.Is(err, ErrLoginExpired) {
		t.Fatalf("a reissued ticket of the login: %v, want ErrLoginExpired", err)
	}
	if _, err := v.Check(bare, "", tcp8443); err != nil {
		t.Fatalf("a ticket without a login: %v", err)
	}
}

// A version 3 ticket (no login), as tickets in flight across an upgrade are, still checks;
// it names no login. Neither it nor a reconnect ticket reissued from it opens anything
// NoLoginLifetime after its chain started (the review found tickets of versions 1 to 3
// accepted forever: rotation kept them alive with no login to end them).
func TestVersionThreeTicketsStillCheck(t *testing.T) {
	s, v, clk, key := setup(t)
	c := Claims{Kind: Reconnect, Key: s.KeyID(), Session: "s-1", Machine: "vda-1", Mode: ModeGateway, Gen: 2,
		Issued: clk.Now(), Expires: clk.Now().Add(time.Hour)}
	b := []byte{versionV3}
	b = append(b, c.Key[:]...)
	b = append(b, byte(c.Kind))
	b = append(b, c.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Issued.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Expires.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, c.Gen)
	for _, f := range []string{c.Session, c.Machine, c.Mode} {
		b = append(append(b, byte(len(f))), f...)
	}
	b = append(b, 0)
	tok := enc.EncodeToString(append(b, ed25519.Sign(key, b)...))
	got, err := v.Check(tok, "vda-1", tcp8443)
	if err != nil || got.Session != "s-1" || got.Gen != 2 || got.User != "" || !got.AuthTime.IsZero() || !got.LoginExpires.IsZero() {
		t.Fatalf("a version 3 ticket: %+v, %v", got, err)
	}
	// Its next generation is a version 4 ticket, still without a login.
	next, _, err := s.Reissue(got, got.Expires)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := enc.DecodeString(next); raw[0] != version {
		t.Fatalf("the reissued ticket has version %d, want %d", raw[0], version)
	}
	later, _, err := s.Reissue(got, clk.Now().Add(NoLoginLifetime+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(NoLoginLifetime - time.Minute)
	if _, err := v.Check(later, "vda-1", tcp8443); err != nil {
		t.Fatalf("a ticket reissued from it, within NoLoginLifetime of the chain's start: %v", err)
	}
	clk.Advance(time.Minute)
	if _, err := v.Check(later, "vda-1", tcp8443); !errors.Is(err, ErrLoginExpired) {
		t.Fatalf("a ticket reissued from it, NoLoginLifetime after the chain's start: %v, want ErrLoginExpired", err)
	}
}

// Claims whose token would pass MaxLen are refused at issue, not signed into a token that
// no gateway would read.
func TestIssueRefusesTicketsLongerThanMaxLen(t *testing.T) {
	s, _, _, _ := setup(t)
	long := strings.Repeat("x", maxField)
	_, _, err := s.Issue(Claims{Kind: Reconnect, Session: long, Machine: long, Mode: ModeGateway, User: long}, time.Hour)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("Issue of %d-byte fields: %v, want ErrTooLong", maxField, err)
	}
	if _, _, err := s.Issue(Claims{Kind: Reconnect, Session: "s-1", User: strings.Repeat("u", maxField+1)}, time.Hour); err == nil {
		t.Fatal("Issue of a user name longer than a field: no error")
	}
}

// A one-time proof (a login code) is taken once, until its end.
func TestOnceTakesAProofOnce(t *testing.T) {
	_, v, clk, _ := setup(t)
	id := [16]byte{1}
	for i, want := range []bool{true, false} {
		if ok, err := v.Once(id, "totp", clk.Now().Add(time.Minute)); ok != want || err != nil {
			t.Fatalf("use %d: %v, %v; want %v", i, ok, err, want)
		}
	}
	if ok, _ := v.Once([16]byte{2}, "totp", clk.Now().Add(time.Minute)); !ok {
		t.Fatal("another proof was refused")
	}
}

func TestFactorNames(t *testing.T) {
	for _, tt := range []struct {
		f    Factors
		want string
	}{{0, "none"}, {FactorPassword, "password"}, {FactorCertificate | FactorTOTP, "certificate+totp"}, {FactorRADIUS, "radius"}, {FactorPassword | 1<<7, "password+factor7"}} {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%08b: %q, want %q", uint8(tt.f), got, tt.want)
		}
	}
	for _, n := range []string{"password", "certificate", "totp", "radius"} {
		if f, ok := ParseFactor(n); !ok || f.String() != n {
			t.Errorf("ParseFactor(%q) = %v, %v", n, f, ok)
		}
	}
	if _, ok := ParseFactor("sms"); ok {
		t.Error("ParseFactor took sms")
	}
}

// FuzzSealedLogin: whatever login the launch API seals — any user name, factor bits and
// times — a ticket either is refused at issue (too long) or parses back to the same login,
// to the millisecond, within MaxLen.
func FuzzSealedLogin(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	pub := key.Public().(ed25519.PublicKey)
	s := NewSigner(key, nil)
	f.Add("alice", uint8(FactorPassword|FactorTOTP), int64(1764579600123), int64(36000000), "s-1")
	f.Add("", uint8(0), int64(0), int64(0), "")
	f.Add("bob", uint8(0xff), int64(-5), int64(-1), strings.Repeat("s", 255))
	f.Fuzz(func(t *testing.T, user string, factors uint8, authMS, lifetimeMS int64, session string) {
		auth := time.UnixMilli(authMS)
		c := Claims{Kind: Reconnect, Session: session, Machine: "vda-1", Mode: ModeGateway, User: user, Factors: Factors(factors),
			AuthTime: auth, LoginExpires: auth.Add(time.Duration(lifetimeMS) * time.Millisecond)}
		tok, issued, err := s.Issue(c, time.Hour)
		if err != nil {
			if len(user) <= maxField && len(session) <= maxField && !errors.Is(err, ErrTooLong) {
				t.Fatalf("Issue: %v", err)
			}
			return
		}
		if len(tok) > MaxLen {
			t.Fatalf("a token of %d characters", len(tok))
		}
		got, err := Parse(tok, pub)
		if err != nil {
			t.Fatalf("Parse of an issued ticket: %v", err)
		}
		if got.User != user || got.Factors != Factors(factors) || !got.AuthTime.Equal(issued.AuthTime) || !got.LoginExpires.Equal(issued.LoginExpires) {
			t.Fatalf("parsed %+v, issued %+v", got, issued)
		}
		if authMS > 0 && !got.AuthTime.Equal(auth) {
			t.Fatalf("auth time %s, want %s", got.AuthTime, auth)
		}
	})
}
