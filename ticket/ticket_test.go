package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
)

var (
	tcp8443 = Channel{8443, "tcp"}
	udp4172 = Channel{4172, "udp"}
	tcp443  = Channel{443, "tcp"}
)

func setup(t *testing.T) (*Signer, *Verifier, *testclock.Clock, ed25519.PrivateKey) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	return NewSigner(key, clk.Now), NewVerifier(key.Public().(ed25519.PublicKey), NewMemoryLedger(0, clk.Now), clk.Now), clk, key
}

func launch(t *testing.T, s *Signer) (string, Claims) {
	t.Helper()
	tok, c, err := s.Issue(Claims{Kind: Launch, Session: "s-1", Machine: "vda-1", Mode: "gateway",
		Channels: []Channel{tcp8443, udp4172}}, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

func TestLaunchTicketOpensEachNamedChannelOnce(t *testing.T) {
	s, v, _, _ := setup(t)
	tok, issued := launch(t, s)
	c, err := v.Check(tok, "vda-1", tcp8443)
	if err != nil {
		t.Fatalf("first use on 8443/tcp: %v", err)
	}
	if c.Session != "s-1" || c.Machine != "vda-1" || c.Mode != "gateway" || c.ID != issued.ID || !c.Expires.Equal(issued.Expires) {
		t.Errorf("claims = %+v, want those issued %+v", c, issued)
	}
	if _, err := v.Check(tok, "vda-1", udp4172); err != nil {
		t.Errorf("first use on 4172/udp: %v", err)
	}
	if _, err := v.Check(tok, "vda-1", tcp8443); !errors.Is(err, ErrReplayed) {
		t.Errorf("second use on 8443/tcp: err = %v, want ErrReplayed", err)
	}
}

func TestRejections(t *testing.T) {
	s, v, clk, _ := setup(t)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	forger := NewSigner(otherKey, clk.Now)

	tests := []struct {
		name    string
		token   func() string
		machine string
		ch      Channel
		want    error
	}{
		{"a ticket signed with a key the site does not hold is refused", func() string {
			tok, _, _ := forger.Issue(Claims{Kind: Launch, Session: "s-1", Machine: "vda-1", Channels: []Channel{tcp8443}}, time.Minute)
			return tok
		}, "vda-1", tcp8443, ErrUnknownKey},
		{"a forged ticket that names the site's key is refused", func() string {
			c := Claims{Kind: Launch, Session: "s-1", Machine: "vda-1", Channels: []Channel{tcp8443}, Key: s.KeyID(),
				Issued: clk.Now(), Expires: clk.Now().Add(time.Minute)}
			b := marshal(c)
			return enc.EncodeToString(append(b, ed25519.Sign(otherKey, b)...))
		}, "vda-1", tcp8443, ErrSignature},
		{"a ticket with one byte flipped is refused", func() string {
			tok, _ := launch(t, s)
			b, err := enc.DecodeString(tok)
			if err != nil {
				t.Fatal(err)
			}
			b[64] ^= 1 // inside the session name
			return enc.EncodeToString(b)
		}, "vda-1", tcp8443, ErrSignature},
		{"garbage is malformed", func() string { return "not a ticket!" }, "vda-1", tcp8443, ErrMalformed},
		{"an empty token is malformed", func() string { return "" }, "vda-1", tcp8443, ErrMalformed},
		{"an oversized token is malformed", func() string { return strings.Repeat("A", MaxLen+1) }, "vda-1", tcp8443, ErrMalformed},
		{"a ticket for another machine is refused", func() string { tok, _ := launch(t, s); return tok }, "vda-2", tcp8443, ErrWrongMachine},
		{"a ticket used on a port it does not name is refused", func() string { tok, _ := launch(t, s); return tok }, "vda-1", tcp443, ErrWrongChannel},
		{"an expired ticket is refused", func() string {
			tok, _ := launch(t, s)
			clk.Advance(61 * time.Second)
			return tok
		}, "vda-1", tcp8443, ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.token()
			if _, err := v.Check(tok, tt.machine, tt.ch); !errors.Is(err, tt.want) {
				t.Errorf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTicketFromTheFutureIsRefused(t *testing.T) {
	s, v, clk, _ := setup(t)
	tok, _ := launch(t, s)
	clk.Advance(-time.Minute)
	if _, err := v.Check(tok, "vda-1", tcp8443); !errors.Is(err, ErrNotYetValid) {
		t.Errorf("Check = %v, want ErrNotYetValid", err)
	}
}

func TestReconnectTicketIsReusableUntilRevoked(t *testing.T) {
	s, v, clk, _ := setup(t)
	tok, _, err := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeDirect}, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		clk.Advance(time.Hour)
		if _, err := v.Check(tok, "", tcp8443); err != nil {
			t.Fatalf("reconnect %d: %v", i, err)
		}
	}
	if err := v.Revoke("s-1", 10*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(tok, "", tcp8443); !errors.Is(err, ErrRevoked) {
		t.Errorf("after logoff: %v, want ErrRevoked", err)
	}
}

// A gateway-mode reconnect ticket opens channels until a ticket of a later generation of its
// chain (Reissue), or of a later launch, is used; the reissued ticket keeps the chain's issue
// time, so that a steal's revocation reaches it.
func TestAGatewayModeReconnectTicketRotates(t *testing.T) {
	s, v, clk, _ := setup(t)
	tok, c, err := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeGateway}, 10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // an answer lost with its gateway: the client goes on with the ticket it holds
		if _, err := v.Check(tok, "", tcp8443); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	next, nc, err := s.Reissue(c, c.Expires)
	if err != nil {
		t.Fatal(err)
	}
	if nc.ID == c.ID || nc.Gen != 1 || !nc.Issued.Equal(c.Issued) || !nc.Expires.Equal(c.Expires) || nc.Session != "s-1" || nc.Kind != Reconnect {
		t.Fatalf("reissued claims %+v from %+v", nc, c)
	}
	if got, err := v.Check(next, "", tcp8443); err != nil || got.Gen != 1 {
		t.Fatalf("the reissued ticket: %+v %v", got, err)
	}
	superseded := func(tok string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			_, err := v.Check(tok, "", tcp8443)
			if errors.Is(err, ErrSuperseded) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a superseded ticket: %v, want ErrSuperseded", err)
			}
		}
	}
	superseded(tok)
	// A later launch starts a later chain: its generation 0 outranks the old chain's 1.
	clk.Advance(time.Minute)
	relaunched, rc, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeGateway}, 10*time.Hour)
	if _, err := v.Check(relaunched, "", tcp8443); err != nil {
		t.Fatalf("the ticket of a later launch: %v", err)
	}
	superseded(next)
	if err := v.RevokeBefore("s-1", rc.Issued.Add(time.Millisecond), 10*time.Hour); err != nil {
		t.Fatal(err)
	}
	later, _, _ := s.Reissue(rc, rc.Expires)
	if _, err := v.Check(later, "", tcp8443); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a ticket of a revoked chain: %v, want ErrRevoked", err)
	}
}

// A steal revokes the tickets issued before the new endpoint's: the old endpoint's reconnect
// ticket is refused, the new one's works, and a logoff's revocation of all is not narrowed
// by a later steal's.
func TestRevokeBeforeRefusesOnlyOlderTickets(t *testing.T) {
	s, v, clk, _ := setup(t)
	old, _, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeGateway}, 10*time.Hour)
	clk.Advance(time.Minute)
	fresh, c, _ := s.Issue(Claims{Kind: Reconnect, Session: "s-1", Machine: "vda-1", Mode: ModeGateway}, 10*time.Hour)
	if err := v.RevokeBefore("s-1", c.Issued, 10*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(old, "", tcp8443); !errors.Is(err, ErrRevoked) {
		t.Errorf("the old endpoint's ticket: %v, want ErrRevoked", err)
	}
	if _, err := v.Check(fresh, "", tcp8443); err != nil {
		t.Errorf("the new endpoint's ticket: %v", err)
	}
	if err := v.Revoke("s-1", 10*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := v.RevokeBefore("s-1", c.Issued, 10*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(fresh, "", tcp8443); !errors.Is(err, ErrRevoked) {
		t.Errorf("after the logoff and a later, narrower revocation: %v, want ErrRevoked", err)
	}
}

func TestLedgerIsBounded(t *testing.T) {
	clk := testclock.New(time.Unix(1000, 0))
	l := NewMemoryLedger(10, clk.Now)
	for i := 0; i < 10; i++ {
		if ok, err := l.Use([16]byte{byte(i)}, tcp8443, clk.Now().Add(time.Minute)); !ok || err != nil {
			t.Fatalf("Use %d = %v, %v", i, ok, err)
		}
	}
	if _, err := l.Use([16]byte{99}, tcp8443, clk.Now().Add(time.Minute)); !errors.Is(err, ErrLedgerFull) {
		t.Fatalf("Use over the limit = %v, want ErrLedgerFull", err)
	}
	clk.Advance(2 * time.Minute)
	if ok, err := l.Use([16]byte{99}, tcp8443, clk.Now().Add(time.Minute)); !ok || err != nil {
		t.Fatalf("Use after expiry = %v, %v; want expired entries purged", ok, err)
	}
	if l.Len() != 1 {
		t.Errorf("Len = %d after purge, want 1", l.Len())
	}
}

func TestConcurrentUseAdmitsExactlyOne(t *testing.T) {
	s, v, _, _ := setup(t)
	tok, _ := launch(t, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.Check(tok, "vda-1", tcp8443); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 1 {
		t.Errorf("%d of 50 concurrent uses were admitted, want exactly 1", ok)
	}
}

// FuzzParse: arbitrary tokens never panic and never verify.
func FuzzParse(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	s := NewSigner(key, nil)
	tok, _, _ := s.Issue(Claims{Kind: Launch, Session: "s", Machine: "m", Channels: []Channel{tcp8443}}, time.Minute)
	f.Add(tok)
	f.Add("")
	f.Add("AAAA")
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Parse(in, pub)
		if err == nil && in != tok {
			// Only genuinely signed input may parse; base64 allows no other encoding of tok.
			t.Fatalf("Parse accepted %q: %+v", in, c)
		}
	})
}

// An enrolment ticket lets its machine enrol one key (again for a retry, not for another
// key); it opens no channel, and another machine's is refused.
func TestEnrolmentTicketIsGoodOnceForItsMachine(t *testing.T) {
	s, v, _, _ := setup(t)
	tok, _, err := s.Issue(Claims{Kind: Enrol, Machine: "vda-1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(tok, "vda-1", tcp8443); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("an enrolment ticket at a channel port: %v, want ErrWrongKind", err)
	}
	if _, err := v.CheckEnrolment(tok, "vda-2", "k1"); !errors.Is(err, ErrWrongMachine) {
		t.Fatalf("another machine's enrolment: %v, want ErrWrongMachine", err)
	}
	if _, err := v.CheckEnrolment(tok, "vda-1", "k1"); err != nil {
		t.Fatalf("the enrolment: %v", err)
	}
	if _, err := v.CheckEnrolment(tok, "vda-1", "k1"); err != nil {
		t.Fatalf("the same key's enrolment again (a retry): %v", err)
	}
	if _, err := v.CheckEnrolment(tok, "vda-1", "k2"); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the enrolment for another key: %v, want ErrReplayed", err)
	}
	launch, _, _ := s.Issue(Claims{Kind: Launch, Session: "s-1", Machine: "vda-1", Channels: []Channel{tcp8443}}, time.Minute)
	if _, err := v.CheckEnrolment(launch, "vda-1", "k1"); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("a launch ticket as an enrolment: %v, want ErrWrongKind", err)
	}
}

// A launch's reconnect ticket ranks below every ticket rotated from its launch ticket, however
// the clock moves between the two: they are issued at one reading of it (finding M3 of the
// security review: a millisecond between two readings made the reconnect ticket outrank the
// rotated chain, so it was never superseded).
func TestALaunchsReconnectTicketRanksBelowTheRotatedChain(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	clock := time.Unix(1_800_000_000, 0)
	tick := func() time.Time { clock = clock.Add(time.Millisecond); return clock } // every reading a millisecond on
	s := NewSigner(key, tick)
	v := NewVerifier(key.Public().(ed25519.PublicKey), NewMemoryLedger(0, nil), func() time.Time { return clock })
	lt, rt, _, err := s.IssueLaunch(Claims{Session: "s-1", Machine: "m", Mode: ModeGateway, Channels: []Channel{{Port: 8443, Proto: "tcp"}}}, time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := v.Peek(lt)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := v.Peek(rt)
	if err != nil {
		t.Fatal(err)
	}
	_, next, err := s.Reissue(lc, clock.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if lc.Kind != Launch || rc.Kind != Reconnect || !rc.Issued.Equal(lc.Issued) {
		t.Fatalf("launch %v issued %v, reconnect %v issued %v: want one issue time", lc.Kind, lc.Issued, rc.Kind, rc.Issued)
	}
	if rc.Mark() >= next.Mark() {
		t.Fatalf("the launch's reconnect ticket ranks %d, the chain's next %d: want it below", rc.Mark(), next.Mark())
	}
}
