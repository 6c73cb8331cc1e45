package api

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// Logins sent at once from one address compare no more passwords than its tokens allow:
// each comparison under way holds one, the next is answered busy (503) without a
// comparison, and once they have all failed the address is throttled (429). Comparisons
// that succeed give their tokens back.
func TestLoginsAtOnceHoldTheirTokens(t *testing.T) {
	src := netip.MustParseAddr("192.0.2.7")
	user := func(i int) string { return fmt.Sprintf("user-%d", i) }
	t.Run("the logins under way hold every token: the next is busy", func(t *testing.T) {
		var g loginGuard
		for i := range failuresPerSource {
			if _, err := g.admit(src, user(i)); err != nil {
				t.Fatalf("login %d at once: %v, want it compared", i, err)
			}
		}
		if _, err := g.admit(src, "one-more"); !errors.Is(err, errLoginBusy) {
			t.Fatalf("login %d at once: %v, want %v", failuresPerSource, err, errLoginBusy)
		}
		if _, err := g.admit(netip.MustParseAddr("192.0.2.8"), "one-more"); err != nil {
			t.Fatalf("a login from another address: %v, want it compared", err)
		}
		for i := range failuresPerSource {
			g.done(src, user(i), true)
		}
		var th throttledError
		if _, err := g.admit(src, "one-more"); !errors.As(err, &th) {
			t.Fatalf("after %d failures: %v, want a throttledError", failuresPerSource, err)
		}
	})
	t.Run("logins that succeed give their tokens back", func(t *testing.T) {
		var g loginGuard
		for round := range 3 {
			for i := range failuresPerSource {
				if _, err := g.admit(src, user(i)); err != nil {
					t.Fatalf("round %d, login %d: %v, want it compared", round, i, err)
				}
			}
			for i := range failuresPerSource {
				g.done(src, user(i), false)
			}
		}
		if len(g.trySources) != 0 || len(g.tryUsers) != 0 {
			t.Fatalf("after every login ended: %d sources and %d users still counted, want none", len(g.trySources), len(g.tryUsers))
		}
	})
	t.Run("one user's logins at once from many addresses hold the user's tokens", func(t *testing.T) {
		var g loginGuard
		for i := range failuresPerUser {
			if _, err := g.admit(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), "alice"); err != nil {
				t.Fatalf("alice's login %d at once: %v, want it compared", i, err)
			}
		}
		if _, err := g.admit(netip.MustParseAddr("203.0.113.1"), "alice"); !errors.Is(err, errLoginBusy) {
			t.Fatalf("alice's login %d at once: %v, want %v", failuresPerUser, err, errLoginBusy)
		}
	})
}

// A suspect login — its source failed lately, or has another comparison under way — needs
// one of the few suspect slots too: guessers that hold them all keep no clean login waiting.
func TestSuspectLoginsShareFewSlots(t *testing.T) {
	var g loginGuard
	g.init()
	guesser, honest := netip.MustParseAddr("192.0.2.66"), netip.MustParseAddr("192.0.2.10")
	if s, err := g.admit(guesser, "root"); err != nil || s {
		t.Fatalf("a source's first login: suspect %v, %v; want clean", s, err)
	}
	if s, _ := g.admit(guesser, "admin"); !s {
		t.Fatal("a second login at once from one source is not suspect")
	}
	g.done(guesser, "root", true)
	g.done(guesser, "admin", true)
	if s, _ := g.admit(guesser, "oracle"); !s {
		t.Fatal("a login from a source that failed is not suspect")
	}
	for range cap(g.suspects) { // the guessers hold every suspect slot
		g.suspects <- struct{}{}
	}
	start := time.Now()
	if err := g.compare(dummyHash, "x", true); !errors.Is(err, errLoginBusy) {
		t.Fatalf("a suspect comparison with no suspect slot free: %v, want busy", err)
	}
	if d := time.Since(start); d < bcryptWait {
		t.Fatalf("it gave up after %v, before bcryptWait", d)
	}
	s, err := g.admit(honest, "alice")
	if err != nil || s {
		t.Fatalf("an honest first login: suspect %v, %v", s, err)
	}
	if err := g.compare(dummyHash, "x", s); errors.Is(err, errLoginBusy) {
		t.Fatal("an honest login waited on the guessers' slots")
	}
}
