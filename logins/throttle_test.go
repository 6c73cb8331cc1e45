package logins

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/frontdoor-vdi/frontdoor/internal/timeshare"
	"golang.org/x/crypto/bcrypt"
)

// Logins sent at once from one address compare no more passwords than its tokens allow:
// each comparison under way holds one, and the next waits its turn (finding N1 of the
// security review: it was answered 503, and an office behind one NAT could not log on at
// 9:00). A comparison that succeeds gives its token back to the next; once they have all
// failed the address is throttled (429), the waiting login too. A wait ends with its
// request.
func TestLoginsAtOnceWaitForTokens(t *testing.T) {
	src := netip.MustParseAddr("192.0.2.7")
	user := func(i int) string { return fmt.Sprintf("user-%d", i) }
	ctx := t.Context()
	fill := func(t *testing.T, g *loginGuard) {
		t.Helper()
		for i := range FailuresPerSource {
			if _, err := g.admit(ctx, src, user(i)); err != nil {
				t.Fatalf("login %d at once: %v, want it compared", i, err)
			}
		}
	}
	waiting := func(g *loginGuard, name string) chan error {
		out := make(chan error, 1)
		go func() {
			_, err := g.admit(ctx, src, name)
			out <- err
		}()
		return out
	}
	t.Run("the next login waits for a comparison to succeed", func(t *testing.T) {
		var g loginGuard
		fill(t, &g)
		next := waiting(&g, "one-more")
		if _, err := g.admit(ctx, netip.MustParseAddr("192.0.2.8"), "another"); err != nil {
			t.Fatalf("a login from another address: %v, want it compared", err)
		}
		g.done(src, user(0), false)
		if err := <-next; err != nil {
			t.Fatalf("the waiting login after a success: %v, want it compared", err)
		}
	})
	t.Run("the next login is throttled once the others failed", func(t *testing.T) {
		var g loginGuard
		fill(t, &g)
		next := waiting(&g, "one-more")
		for i := range FailuresPerSource {
			g.done(src, user(i), true)
		}
		var th ThrottledError
		if err := <-next; !errors.As(err, &th) {
			t.Fatalf("the waiting login after %d failures: %v, want a ThrottledError", FailuresPerSource, err)
		}
	})
	t.Run("a wait ends with its request", func(t *testing.T) {
		var g loginGuard
		fill(t, &g)
		short, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := g.admit(short, src, "one-more"); !errors.Is(err, ErrLoginBusy) {
			t.Fatalf("a login whose request ended: %v, want %v", err, ErrLoginBusy)
		}
	})
	t.Run("logins that succeed give their tokens back", func(t *testing.T) {
		var g loginGuard
		for round := range 3 {
			fill(t, &g)
			for i := range FailuresPerSource {
				g.done(src, user(i), false)
			}
			if round == 0 {
				continue
			}
		}
		if len(g.trySources) != 0 || len(g.tryUsers) != 0 {
			t.Fatalf("after every login ended: %d sources and %d users still counted, want none", len(g.trySources), len(g.tryUsers))
		}
	})
	t.Run("one user's logins at once from many addresses hold the user's tokens", func(t *testing.T) {
		var g loginGuard
		for i := range failuresPerUser {
			if _, err := g.admit(ctx, netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), "alice"); err != nil {
				t.Fatalf("alice's login %d at once: %v, want it compared", i, err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, err := g.admit(short, netip.MustParseAddr("203.0.113.1"), "alice"); !errors.Is(err, ErrLoginBusy) {
			t.Fatalf("alice's login %d at once: %v, want it to wait, and %v when its request ends", failuresPerUser, err, ErrLoginBusy)
		}
	})
}

// A logon storm from one address: many users' first logins at once, all right, none
// refused, whatever the source's failure budget.
func TestALogonStormFromOneAddressIsQueued(t *testing.T) {
	var g loginGuard
	src := netip.MustParseAddr("192.0.2.80")
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for i := range 500 {
		wg.Go(func() {
			name := fmt.Sprintf("user-%d", i)
			if _, err := g.admit(t.Context(), src, name); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			runtime.Gosched()
			g.done(src, name, false)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a right login of the storm refused: %v", err)
	}
}

// A suspect login — its source failed lately, or its user did — takes one of the few
// suspect slots instead of a clean one: guessers that hold them all keep no clean login
// waiting. Logins at once from one source are not suspect for that alone: an office logs
// on together.
func TestSuspectLoginsShareFewSlots(t *testing.T) {
	var g loginGuard
	g.init()
	ctx := t.Context()
	guesser, honest := netip.MustParseAddr("192.0.2.66"), netip.MustParseAddr("192.0.2.10")
	if s, err := g.admit(ctx, guesser, "root"); err != nil || s {
		t.Fatalf("a source's first login: suspect %v, %v; want clean", s, err)
	}
	if s, err := g.admit(ctx, guesser, "admin"); err != nil || s {
		t.Fatalf("a second login at once from one source: suspect %v, %v; want clean", s, err)
	}
	g.done(guesser, "root", true)
	g.done(guesser, "admin", true)
	if s, _ := g.admit(ctx, guesser, "oracle"); !s {
		t.Fatal("a login from a source that failed is not suspect")
	}
	if s, _ := g.admit(ctx, honest, "root"); !s {
		t.Fatal("a login of a user that failed is not suspect")
	}
	for range cap(g.suspects) { // the guessers hold every suspect slot
		g.suspects <- struct{}{}
	}
	start := time.Now()
	if err := g.compare(ctx, dummyHash, "x", true); !errors.Is(err, ErrLoginBusy) {
		t.Fatalf("a suspect comparison with no suspect slot free: %v, want busy", err)
	}
	if d := time.Since(start); d < bcryptWait {
		t.Fatalf("it gave up after %v, before bcryptWait", d)
	}
	s, err := g.admit(ctx, honest, "alice")
	if err != nil || s {
		t.Fatalf("an honest first login: suspect %v, %v", s, err)
	}
	if err := g.compare(ctx, dummyHash, "x", s); errors.Is(err, ErrLoginBusy) {
		t.Fatal("an honest login waited on the guessers' slots")
	}
}

// A source that failed stays clean while it has had successesPerFailure successful logins
// lately for each failure (an office where one user mistyped); its successes give it no
// failures back.
func TestAnOfficeThatMistypedStaysClean(t *testing.T) {
	var g loginGuard
	ctx := t.Context()
	office := netip.MustParseAddr("192.0.2.90")
	for i := range successesPerFailure + 1 { // one more: the count decays
		name := fmt.Sprintf("user-%d", i)
		g.admit(ctx, office, name)
		g.done(office, name, false)
	}
	g.admit(ctx, office, "typo")
	g.done(office, "typo", true)
	if s, err := g.admit(ctx, office, "next"); err != nil || s {
		t.Fatalf("the office's next login: suspect %v, %v; want clean", s, err)
	}
	g.done(office, "next", false)
	for i := range FailuresPerSource - 1 {
		g.admit(ctx, office, "guess")
		g.done(office, "guess", true)
		if i == 0 {
			if s, _ := g.admit(ctx, office, "next"); !s {
				t.Fatal("after a second failure, with too few successes, the source is not suspect")
			}
			g.done(office, "next", false)
		}
	}
	var th ThrottledError
	if _, err := g.admit(ctx, office, "guess"); !errors.As(err, &th) {
		t.Fatalf("after %d failures: %v, want throttled, whatever its successes", FailuresPerSource, err)
	}
}

// Someone else's guesses do not lock a user out (finding M6 of the security review: 20
// wrong guesses, and the right password got 429 from anywhere): from a source with no
// recent failure the user's login is still compared, as a suspect one; from a source that
// failed it is throttled. The exhaustion is counted once.
func TestOthersGuessesDoNotLockAUserOut(t *testing.T) {
	var g loginGuard
	g.init()
	ctx := t.Context()
	for i := range failuresPerUser {
		src := netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i/FailuresPerSource)})
		if _, err := g.admit(ctx, src, "admin"); err != nil {
			t.Fatalf("guess %d: %v", i, err)
		}
		g.done(src, "admin", true)
	}
	var th ThrottledError
	if _, err := g.admit(ctx, netip.MustParseAddr("198.51.100.1"), "admin"); !errors.As(err, &th) {
		t.Fatalf("a guessing source after the user's failures ran out: %v, want throttled", err)
	}
	home := netip.MustParseAddr("192.0.2.20")
	s, err := g.admit(ctx, home, "admin")
	if err != nil || !s {
		t.Fatalf("the user from a clean source: suspect %v, %v; want compared as suspect", s, err)
	}
	g.done(home, "admin", false)
	fresh := netip.MustParseAddr("203.0.113.50")
	g.admit(ctx, fresh, "admin")
	g.done(fresh, "admin", true)
	if _, err := g.admit(ctx, fresh, "admin"); !errors.As(err, &th) {
		t.Fatalf("a fresh source after its first wrong guess at a locked user: %v, want throttled", err)
	}
	if got := testutil.ToFloat64(g.exhausted); got != 1 {
		t.Fatalf("exhaustions counted %v, want 1", got)
	}
	if got := testutil.ToFloat64(g.lockedAdmitted); got != 2 {
		t.Fatalf("logins of the locked user let in counted %v, want 2", got)
	}
}

// Clean comparisons run one per CPU at once; suspect ones in slots of their own and in their turn of the CPU
// time: one whose turn comes after bcryptWait is answered busy at once, one whose turn comes
// sooner waits for it, and each is charged what it took. Clean logins do not wait for the
// suspects' turns.
func TestSuspectComparisonsTakeTheirShare(t *testing.T) {
	var g loginGuard
	g.init()
	if cpus := runtime.GOMAXPROCS(0); cap(g.slots) != cpus || cap(g.suspects) != max(1, cpus/2) {
		t.Fatalf("%d slots and %d suspect slots on %d CPUs, want %d and %d", cap(g.slots), cap(g.suspects), cpus, cpus, max(1, cpus/2))
	}
	busy := func(d time.Duration) { // the suspects' turn comes d from now
		now := time.Now()
		g.suspectCPU = timeshare.New(suspectShare)
		g.suspectCPU.Charge(now, now.Add(time.Duration(float64(d)*suspectShare)))
	}
	busy(time.Hour)
	start := time.Now()
	if err := g.compare(t.Context(), dummyHash, "x", true); !errors.Is(err, ErrLoginBusy) {
		t.Fatalf("a suspect comparison whose turn is in an hour: %v, want busy", err)
	}
	if d := time.Since(start); d >= bcryptWait {
		t.Fatalf("it was refused after %v, want at once", d)
	}
	if err := g.compare(t.Context(), dummyHash, "x", false); !errors.Is(err, bcrypt.ErrMismatchedHashAndPassword) {
		t.Fatalf("a clean comparison meanwhile: %v, want it compared (mismatch)", err)
	}

	busy(100 * time.Millisecond)
	before := time.Now()
	if err := g.compare(t.Context(), dummyHash, "x", true); !errors.Is(err, bcrypt.ErrMismatchedHashAndPassword) {
		t.Fatalf("a suspect comparison whose turn is in 100 ms: %v, want it compared (mismatch)", err)
	}
	if d := time.Since(before); d < 100*time.Millisecond {
		t.Fatalf("it was compared after %v, before its turn", d)
	}

	g.suspectCPU = timeshare.New(suspectShare)
	before = time.Now()
	if err := g.compare(t.Context(), dummyHash, "x", true); !errors.Is(err, bcrypt.ErrMismatchedHashAndPassword) {
		t.Fatalf("a suspect comparison in its turn: %v, want it compared (mismatch)", err)
	}
	after := time.Now()
	// It ran for d within [before, after] and is paid for d ÷ a quarter after it began.
	if paid := g.suspectCPU.Next(after); !paid.After(after) || paid.Sub(before) > 4*after.Sub(before) {
		t.Fatalf("after a comparison of at most %v, the next suspect may start %v after it began, want after it ended and within 4×",
			after.Sub(before), paid.Sub(before))
	}
}

// The addresses of one IPv6 /64 share one budget of failed logins, as they share the
// listeners' per-source connection cap; another /64 has its own.
func TestIPv6LoginsCountPerSlash64(t *testing.T) {
	var g loginGuard
	for i := range FailuresPerSource {
		src := netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2::%x", i+1))
		if _, err := g.admit(t.Context(), src, fmt.Sprintf("user-%d", i)); err != nil {
			t.Fatalf("guess %d: %v", i, err)
		}
		g.done(src, fmt.Sprintf("user-%d", i), true)
	}
	var th ThrottledError
	if _, err := g.admit(t.Context(), netip.MustParseAddr("2001:db8:1:2:ffff::1"), "another"); !errors.As(err, &th) {
		t.Fatalf("another address of the same /64 after %d failures: %v, want throttled", FailuresPerSource, err)
	}
	if _, err := g.admit(t.Context(), netip.MustParseAddr("2001:db8:1:3::1"), "another"); err != nil {
		t.Fatalf("an address of another /64: %v", err)
	}
}

// A guard whose maps are full of limiters in use fails closed: the names and addresses that
// do not fit share one budget, so guesses past it are throttled (finding M4 of the security
// review: they each got a fresh limiter that was never stored, and guessed on unthrottled).
func TestAFullGuardFailsClosed(t *testing.T) {
	var g loginGuard
	g.init()
	for i := range guardEntries {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if _, err := g.admit(t.Context(), a, fmt.Sprintf("filler-%d", i)); err != nil {
			t.Fatal(err)
		}
		g.done(a, fmt.Sprintf("filler-%d", i), true) // each keeps a limiter in use
	}
	guesser, victim := netip.MustParseAddr("198.51.100.9"), "admin"
	throttled := false
	for i := 0; i < 2*FailuresPerSource+2 && !throttled; i++ {
		_, err := g.admit(t.Context(), guesser, victim)
		var th ThrottledError
		switch {
		case errors.As(err, &th):
			throttled = true
		case err != nil:
			t.Fatalf("guess %d: %v", i, err)
		default:
			g.done(guesser, victim, true)
		}
	}
	if !throttled {
		t.Fatalf("%d wrong guesses from a source that does not fit the full guard were all compared, want it throttled", 2*FailuresPerSource+2)
	}
}
