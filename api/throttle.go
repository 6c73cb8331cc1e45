package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/internal/lowprio"
)

// Password logins are throttled: every failed one costs its source address and its user name
// a token, and a source or a user without a token is answered 429 with Retry-After, without a
// bcrypt comparison; a comparison under way holds a token of each, so that logins sent at
// once compare no more passwords than the tokens allow (the next is answered 503 with
// Retry-After 1). Each comparison runs on a thread of its own (internal/lowprio): it holds
// a CPU for tens of milliseconds, and on a goroutine it made every request the CPU served
// meanwhile wait a 10 ms scheduling slice at each read it waited for; the kernel preempts
// the thread instead. At most one clean comparison runs at once per CPU the Go runtime runs
// on, at lowprio.Low. A suspect login —
// its source or user failed lately, or has another comparison under way — takes one of
// half as many suspect slots instead (at least one), runs at lowprio.Lowest, and suspect
// comparisons take at most suspectShare of the wall time, however many guessers wait. So
// a guesser never holds the slot an honest first login waits for, gets a CPU only when
// the node's requests and clean logins leave it one, and is answered 503 past bcryptWait;
// guessers leave the CPU to the logins of users who have not failed (honest first logins)
// and to everything else the node serves. Behind a load balancer the source is the
// client only when the listener reads its PROXY header (proxy_protocol_from); else every
// client shares its address.
const (
	failuresPerSource = 10               // failed logins a source address may make at once
	failuresPerUser   = 20               // failed logins of one user name at once, from anywhere
	refill            = 10 * time.Second // a token of each comes back after this
	bcryptWait        = 2 * time.Second  // a login waits no longer for a comparison slot
	guardEntries      = 10000            // limiters kept per kind; full, the idle ones go
	// suspectShare is the most of the node's CPU time that suspect comparisons take: a
	// quarter, so at cost 10 (about 60 ms here) about four a second per CPU, at cost 12
	// (the default of hash-password) about one.
	suspectShare = 0.25
)

// Login failures of authenticate.
var (
	errNoLogin   = errors.New("authentication required")
	errLoginBusy = errors.New("too many logins at once; try again in a second")
)

// throttledError is a login refused without a try, for RetryAfter.
type throttledError struct{ after time.Duration }

func (e throttledError) Error() string {
	return fmt.Sprintf("too many failed logins; try again in %s", e.after.Round(time.Second))
}

// Logins throttles the password logins and bounds the bcrypt comparisons of every API that
// shares it (LaunchOptions.Logins, AdminOptions.Logins): one per process, so that the
// launch and admin APIs of a node take turns on its CPUs. The zero value is ready.
type Logins struct {
	// CPUs is how many CPUs the comparisons may use at once (one clean comparison each,
	// and half as many suspect ones). Default: GOMAXPROCS when the first login comes;
	// a program that raises GOMAXPROCS for workers of its own (cmd/frontdoor serve) sets
	// it to the count from before.
	CPUs int
	g    loginGuard
}

// guardOf returns l's guard, or a guard of its own for an API given none.
func guardOf(l *Logins) *loginGuard {
	if l == nil {
		return &loginGuard{}
	}
	l.g.cpus = l.CPUs
	return &l.g
}

// loginGuard holds the limiters and the comparison slots of the APIs that share it.
type loginGuard struct {
	mu      sync.Mutex // guards sources, users, the overflows, trySources and tryUsers
	sources map[netip.Addr]*rate.Limiter
	users   map[string]*rate.Limiter
	// overSources and overUsers are shared by the sources and users that find their map
	// full of limiters in use: a flood of new names or addresses meets one budget rather
	// than a fresh one each (the guard fails closed).
	overSources, overUsers *rate.Limiter
	// trySources and tryUsers count the comparisons under way of each source and user:
	// each holds one of their tokens until it ends, so that logins at once compare no
	// more passwords than the tokens allow.
	trySources map[netip.Addr]int
	tryUsers   map[string]int
	slots      chan struct{} // clean comparisons: one per CPU
	suspects   chan struct{} // suspect comparisons: half as many
	suspectCPU timeShare     // the suspect comparisons' share of the CPU time
	cpus       int           // Logins.CPUs; 0: GOMAXPROCS at init
	once       sync.Once
}

func (g *loginGuard) init() {
	g.once.Do(func() {
		g.sources, g.users = map[netip.Addr]*rate.Limiter{}, map[string]*rate.Limiter{}
		g.overSources = rate.NewLimiter(rate.Every(refill), failuresPerSource)
		g.overUsers = rate.NewLimiter(rate.Every(refill), failuresPerUser)
		g.trySources, g.tryUsers = map[netip.Addr]int{}, map[string]int{}
		cpus := g.cpus
		if cpus <= 0 {
			cpus = runtime.GOMAXPROCS(0) // read, not set
		}
		g.slots = make(chan struct{}, cpus)
		g.suspects = make(chan struct{}, suspectSlots(cpus))
		g.suspectCPU.share = suspectShare * float64(cpus)
	})
}

// sourceOf is the source a login is counted against: an IPv4 address, or the /64 of an IPv6
// one (one host's usual share, as the listeners count connections), so that a guesser does
// not get a fresh budget from each address of its /64.
func sourceOf(a netip.Addr) netip.Addr { return connlimit.SourceOf(a).Addr() }

// limiter returns m's limiter of k, made full on first use; a full map drops the limiters
// that are full again (nobody failed from there lately), and when none is, k shares
// overflow, the map's one limiter for whatever does not fit: never a fresh one that
// forgets, which would let a guesser who filled the map guess on unthrottled.
func limiter[K comparable](m map[K]*rate.Limiter, k K, burst int, overflow *rate.Limiter) *rate.Limiter {
	if l := m[k]; l != nil {
		return l
	}
	if len(m) >= guardEntries {
		now := time.Now()
		for key, l := range m {
			if l.TokensAt(now) >= float64(l.Burst()) {
				delete(m, key)
			}
		}
	}
	if len(m) >= guardEntries {
		return overflow
	}
	l := rate.NewLimiter(rate.Every(refill), burst)
	m[k] = l
	return l
}

// admit lets a password of user from src be compared, or says why not: a throttledError
// when either has no token left, errLoginBusy when their tokens are all held by
// comparisons under way. An admitted comparison holds a token of each until done; it is
// suspect when either failed lately or has another comparison under way.
func (g *loginGuard) admit(src netip.Addr, user string) (suspect bool, err error) {
	g.init()
	src = sourceOf(src)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var longest time.Duration
	busy := false
	for _, c := range []struct {
		l      *rate.Limiter
		trying int
	}{{limiter(g.sources, src, failuresPerSource, g.overSources), g.trySources[src]}, {limiter(g.users, user, failuresPerUser, g.overUsers), g.tryUsers[user]}} {
		t := c.l.TokensAt(now)
		switch {
		case t < 1:
			longest = max(longest, time.Duration((1-t)*float64(refill)))
		case t-float64(c.trying) < 1:
			busy = true
		}
		suspect = suspect || c.trying > 0 || t < float64(c.l.Burst())
	}
	switch {
	case longest > 0:
		return false, throttledError{longest}
	case busy:
		return false, errLoginBusy
	}
	g.trySources[src]++
	g.tryUsers[user]++
	return suspect, nil
}

// done ends a comparison that admit let in; a failed one costs src and user a token.
func (g *loginGuard) done(src netip.Addr, user string, failed bool) {
	g.init()
	src = sourceOf(src)
	g.mu.Lock()
	defer g.mu.Unlock()
	release(g.trySources, src)
	release(g.tryUsers, user)
	if failed {
		limiter(g.sources, src, failuresPerSource, g.overSources).Allow()
		limiter(g.users, user, failuresPerUser, g.overUsers).Allow()
	}
}

// release counts one comparison of k less in m.
func release[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// compare runs a bcrypt comparison in one of the slots, a suspect one in a suspect slot
// instead and in its turn of suspectShare; errLoginBusy when none frees within bcryptWait, or
// when a suspect comparison's turn comes later.
func (g *loginGuard) compare(hash, pass string, suspect bool) error {
	g.init()
	deadline := time.Now().Add(bcryptWait)
	t := time.NewTimer(bcryptWait)
	defer t.Stop()
	slots, nice := g.slots, lowprio.Low
	if suspect {
		slots, nice = g.suspects, lowprio.Lowest
	}
	select {
	case slots <- struct{}{}:
	case <-t.C:
		return errLoginBusy
	}
	defer func() { <-slots }()
	if suspect {
		turn := g.suspectCPU.next(time.Now())
		if turn.After(deadline) {
			return errLoginBusy
		}
		time.Sleep(time.Until(turn))
		start := time.Now()
		defer func() { g.suspectCPU.charge(start, time.Now()) }()
	}
	return lowprio.Run(nice, func() error { return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)) })
}

// PasswordSlots is how many bcrypt comparisons may run at once on cpus CPUs (Logins.CPUs),
// clean and suspect: one clean per CPU and half as many suspect ones. Each runs on a
// thread of its own (internal/lowprio), so a program that keeps PasswordSlots(cpus)
// GOMAXPROCS slots beyond its CPUs (cmd/frontdoor serve does) lets its requests preempt the
// comparisons.
func PasswordSlots(cpus int) int { return cpus + suspectSlots(cpus) }

// suspectSlots is the number of suspect comparisons at once beside cpus clean ones.
func suspectSlots(cpus int) int { return max(1, cpus/2) }

// timeShare meters work to a share of the time: a piece of work may start once the work
// charged before it is paid for, at share seconds of work a second (1: one CPU's worth).
// Nothing is saved up while no work runs, so a quiet spell lets no burst follow. Work is
// charged its wall time: on a busy CPU it takes longer and gets less.
type timeShare struct {
	share float64
	mu    sync.Mutex // guards paid
	paid  time.Time  // when the work charged so far is paid for
}

// next returns when work may start, now or later.
func (s *timeShare) next(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid.After(now) {
		return s.paid
	}
	return now
}

// charge counts work that ran from start to end.
func (s *timeShare) charge(start, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paid.Before(start) {
		s.paid = start
	}
	s.paid = s.paid.Add(time.Duration(float64(end.Sub(start)) / s.share))
}

// loginRefused answers a failed authentication: 429 with Retry-After when throttled, 503
// when the comparisons are all busy, one-time codes or a client certificate's revocation
// cannot be checked or no RADIUS server answers, else 401 with the realm's challenge (and
// the error's words: an Access-Challenge says what is not supported).
func loginRefused(w http.ResponseWriter, err error, realm string) {
	var th throttledError
	switch {
	case errors.As(err, &th):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(th.after.Seconds()))))
		httpError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, errLoginBusy):
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, errCodeUnchecked):
		w.Header().Set("Retry-After", "30")
		httpError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, errCertUnchecked):
		w.Header().Set("Retry-After", "60")
		httpError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, errRADIUSUnavailable), errors.Is(err, errSSOUnavailable):
		w.Header().Set("Retry-After", "10")
		httpError(w, http.StatusServiceUnavailable, err.Error())
	default:
		w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
		httpError(w, http.StatusUnauthorized, err.Error())
	}
}
