package logins

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/frontdoor-vdi/frontdoor/internal/lowprio"
	"github.com/frontdoor-vdi/frontdoor/internal/ratemap"
	"github.com/frontdoor-vdi/frontdoor/internal/timeshare"
	"github.com/frontdoor-vdi/frontdoor/pki"
)

// Password logins are throttled: every failed one costs its source address and its user name
// a token, and a source without a token is answered 429 with Retry-After, without a bcrypt
// comparison; so is a user without one, unless the login comes from a clean source (below):
// a user whose name others guess at is not locked out where they log in from. A comparison
// under way holds a token of each, so that logins sent at once compare no more passwords than
// the tokens allow; the next ones wait their turn (up to loginWait, then 503 with Retry-After
// 1), as a logon storm of an office behind one NAT does: its users' logins are queued, not
// refused. Each comparison runs on a thread of its own (internal/lowprio): it holds a CPU for
// tens of milliseconds, and on a goroutine it made every request the CPU served meanwhile
// wait a 10 ms scheduling slice at each read it waited for; the kernel preempts the thread
// instead. At most one clean comparison runs at once per CPU the Go runtime runs on, at
// lowprio.Low. A suspect login — its user failed lately, or it comes from a source that is
// not clean — takes one of half as many suspect slots instead (at least one), runs at
// lowprio.Lowest, and suspect comparisons take at most suspectShare of the wall time,
// however many guessers wait; a suspect login waits no longer than bcryptWait. So a guesser
// never holds the slot an honest first login waits for, gets a CPU only when the node's
// requests and clean logins leave it one, and guessers leave the CPU to the logins of users
// who have not failed (honest first logins) and to everything else the node serves.
//
// A source is clean when it has not failed lately, or has had successesPerFailure
// successful logins lately for each failure: an office whose users log on together stays
// clean when one of them mistypes. Its successes do not give it failures back: a source
// guesses no faster for logging in as itself in between. Waiting logins hold no place of
// their listener (connlimit.Pace). Behind a load balancer the source is the client only when
// the listener reads its PROXY header (proxy_protocol_from); else every client shares its
// address.
const (
	FailuresPerSource = 10               // failed logins a source address may make at once
	failuresPerUser   = 20               // failed logins of one user name at once, from anywhere
	refill            = 10 * time.Second // a token of each comes back after this
	bcryptWait        = 2 * time.Second  // a suspect login waits no longer for its comparison
	loginWait         = 15 * time.Second // a clean login waits no longer for its turn
	guardEntries      = 10000            // limiters kept per kind; full, the idle ones go
	// suspectShare is the most of the node's CPU time that suspect comparisons take: a
	// quarter, so at cost 10 (about 60 ms here) about four a second per CPU, at cost 12
	// (the default of hash-password) about one.
	suspectShare = 0.25
	// successesPerFailure is how many successful logins lately keep a source that failed
	// clean, per failure; a success counts half after successHalfLife.
	successesPerFailure = 10
	successHalfLife     = time.Minute
)

// Login failures of authenticate.
var (
	ErrNoLogin   = errors.New("authentication required")
	ErrLoginBusy = errors.New("too many logins at once; try again in a second")
)

// ThrottledError is a login refused without a try, for RetryAfter.
type ThrottledError struct{ after time.Duration }

// Error says how long to wait.
func (e ThrottledError) Error() string {
	return fmt.Sprintf("too many failed logins; try again in %s", e.after.Round(time.Second))
}

// Throttle throttles the password logins and bounds the bcrypt comparisons of every API that
// shares it (LaunchOptions.Logins, AdminOptions.Logins): one per process, so that the
// launch and admin APIs of a node take turns on its CPUs. The zero value is ready.
type Throttle struct {
	// CPUs is how many CPUs the comparisons may use at once (one clean comparison each,
	// and half as many suspect ones). Default: GOMAXPROCS when the first login comes;
	// a program that raises GOMAXPROCS for workers of its own (cmd/frontdoor serve) sets
	// it to the count from before.
	CPUs int
	// Logger tells when a user's failures are used up (others may be guessing at its
	// password). Default: none.
	Logger *slog.Logger
	// Registry, when set, gets the counters frontdoor_login_user_exhausted_total and
	// frontdoor_login_locked_user_admitted_total. Default: none.
	Registry prometheus.Registerer
	g        loginGuard
}

// guardOf returns l's guard, or a guard of its own for an API given none.
func guardOf(l *Throttle) *loginGuard {
	if l == nil {
		return &loginGuard{}
	}
	l.g.cpus, l.g.log, l.g.reg = l.CPUs, l.Logger, l.Registry
	return &l.g
}

// loginGuard holds the limiters and the comparison slots of the APIs that share it.
type loginGuard struct {
	mu sync.Mutex // guards sources, users, oks, trySources, tryUsers, queues and changed
	// sources and users hold the failure budgets (internal/ratemap: bounded, failing closed,
	// so that a flood of new names or addresses meets one budget rather than a fresh one each).
	sources *ratemap.Map[netip.Addr]
	users   *ratemap.Map[string]
	// oks counts the successful logins of each source lately (decaying); a source that
	// does not fit is judged by its failures alone.
	oks map[netip.Addr]decaying
	// trySources and tryUsers count the comparisons under way of each source and user:
	// each holds one of their tokens until it ends, so that logins at once compare no
	// more passwords than the tokens allow.
	trySources map[netip.Addr]int
	tryUsers   map[string]int
	// queues holds each source's waiting logins, in order; changed is closed, and
	// replaced, when a comparison ends or a waiting login leaves: they look again.
	queues     map[netip.Addr]*list.List
	changed    chan struct{}
	slots      chan struct{}    // clean comparisons: one per CPU
	suspects   chan struct{}    // suspect comparisons: half as many
	suspectCPU *timeshare.Share // the suspect comparisons' share of the CPU time
	cpus       int              // Throttle.CPUs; 0: GOMAXPROCS at init
	log        *slog.Logger     // Throttle.Logger; nil: none
	reg        prometheus.Registerer
	// exhausted counts users whose failures ran out; lockedAdmitted the logins of such
	// users from clean sources let in (as suspects).
	exhausted, lockedAdmitted prometheus.Counter
	once                      sync.Once
}

func (g *loginGuard) init() {
	g.once.Do(func() {
		g.sources = ratemap.New[netip.Addr](rate.Every(refill), FailuresPerSource, guardEntries)
		g.users = ratemap.New[string](rate.Every(refill), failuresPerUser, guardEntries)
		g.oks = map[netip.Addr]decaying{}
		g.trySources, g.tryUsers = map[netip.Addr]int{}, map[string]int{}
		g.changed, g.queues = make(chan struct{}), map[netip.Addr]*list.List{}
		cpus := g.cpus
		if cpus <= 0 {
			cpus = runtime.GOMAXPROCS(0) // read, not set
		}
		g.slots = make(chan struct{}, cpus)
		g.suspects = make(chan struct{}, suspectSlots(cpus))
		g.suspectCPU = timeshare.New(suspectShare * float64(cpus))
		g.exhausted = prometheus.NewCounter(prometheus.CounterOpts{Name: "frontdoor_login_user_exhausted_total",
			Help: "Times a user name's failed logins used up its budget: someone may be guessing its password."})
		g.lockedAdmitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "frontdoor_login_locked_user_admitted_total",
			Help: "Logins of a user whose failures are used up let in from a clean source, as suspect logins."})
		if g.reg != nil {
			for _, c := range []prometheus.Collector{g.exhausted, g.lockedAdmitted} {
				if err := g.reg.Register(c); err != nil && g.log != nil {
					g.log.Warn("registering a login counter", "err", err)
				}
			}
		}
	})
}

// sourceOf is the source a login is counted against: an IPv4 address, or the /64 of an IPv6
// one (one host's usual share, as the listeners count connections), so that a guesser does
// not get a fresh budget from each address of its /64.
func sourceOf(a netip.Addr) netip.Addr { return connlimit.SourceOf(a).Addr() }

// decaying is a count that halves every successHalfLife.
type decaying struct {
	v  float64
	at time.Time
}

// valueAt returns the count at now.
func (d decaying) valueAt(now time.Time) float64 {
	if d.v == 0 {
		return 0
	}
	return d.v * math.Exp2(-float64(now.Sub(d.at))/float64(successHalfLife))
}

// admit lets a password of user from src be compared, or says why not: a ThrottledError
// when the source has no token left, or the user none and the source is not clean;
// ErrLoginBusy when their tokens stay held by comparisons under way for loginWait (the
// wait holds no place of the request's listener, and ends if its connection goes). An
// admitted comparison holds a token of each until done; it is suspect when the source is
// not clean or the user failed lately.
func (g *loginGuard) admit(ctx context.Context, src netip.Addr, user string) (suspect bool, err error) {
	g.init()
	src = sourceOf(src)
	deadline := time.Now().Add(loginWait)
	var (
		gone <-chan struct{}
		me   *list.Element // this login's place in its source's queue, once it waits
	)
	defer func() {
		if me != nil {
			g.mu.Lock()
			g.unqueueLocked(src, me)
			g.mu.Unlock()
		}
	}()
	for {
		g.mu.Lock()
		now := time.Now()
		sl, ul := g.sources.Get(src, now), g.users.Get(user, now)
		ts, tu := sl.TokensAt(now), ul.TokensAt(now)
		clean := ts >= float64(sl.Burst()) || g.oks[src].valueAt(now) >= successesPerFailure*math.Ceil(float64(sl.Burst())-ts)
		locked := tu < 1
		var wait time.Duration
		if ts < 1 {
			wait = time.Duration((1 - ts) * float64(refill))
		}
		if locked && !clean {
			wait = max(wait, time.Duration((1-tu)*float64(refill)))
		}
		if wait > 0 {
			g.mu.Unlock()
			return false, ThrottledError{wait}
		}
		// The logins a source waits with take their turns in order: a logon storm's
		// last login waits about as long as its first.
		q := g.queues[src]
		first := q == nil || q.Front() == me
		if first && ts-float64(g.trySources[src]) >= 1 && (locked || tu-float64(g.tryUsers[user]) >= 1) {
			g.trySources[src]++
			g.tryUsers[user]++
			if locked {
				g.lockedAdmitted.Inc()
			}
			if me != nil {
				g.unqueueLocked(src, me)
				me = nil
			}
			g.mu.Unlock()
			return !clean || tu < float64(ul.Burst()), nil
		}
		if me == nil {
			if q == nil {
				q = list.New()
				g.queues[src] = q
			}
			me = q.PushBack(nil)
		}
		changed := g.changed
		g.mu.Unlock()
		if gone == nil {
			var done func()
			done, gone = connlimit.Pace(ctx)
			defer done()
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
			t.Stop()
		case <-t.C:
			return false, ErrLoginBusy
		case <-gone:
			t.Stop()
			return false, ErrLoginBusy
		case <-ctx.Done():
			t.Stop()
			return false, ErrLoginBusy
		}
	}
}

// unqueueLocked takes a waiting login out of src's queue and tells the others.
func (g *loginGuard) unqueueLocked(src netip.Addr, me *list.Element) {
	if q := g.queues[src]; q != nil {
		q.Remove(me)
		if q.Len() == 0 {
			delete(g.queues, src)
		}
	}
	g.changedLocked()
}

// changedLocked wakes the waiting logins to look again.
func (g *loginGuard) changedLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// done ends a comparison that admit let in; a failed one costs src and user a token, a
// successful one counts for src's cleanness.
func (g *loginGuard) done(src netip.Addr, user string, failed bool) {
	g.init()
	src = sourceOf(src)
	g.mu.Lock()
	defer g.mu.Unlock()
	release(g.trySources, src)
	release(g.tryUsers, user)
	now := time.Now()
	if failed {
		g.sources.Get(src, now).AllowN(now, 1)
		ul := g.users.Get(user, now)
		if ul.TokensAt(now) >= 1 && ul.AllowN(now, 1) && ul.TokensAt(now) < 1 {
			g.exhausted.Inc()
			if g.log != nil {
				g.log.Warn("a user's failed logins are used up: from sources that failed lately its logins are refused for a while; someone may be guessing its password",
					"user", user, "last_from", src)
			}
		}
	} else {
		g.succeededLocked(src, now)
	}
	g.changedLocked()
}

// succeededLocked counts a successful login of src.
func (g *loginGuard) succeededLocked(src netip.Addr, now time.Time) {
	d, ok := g.oks[src]
	if !ok && len(g.oks) >= guardEntries {
		for k, e := range g.oks {
			if e.valueAt(now) < 1 {
				delete(g.oks, k)
			}
		}
		if len(g.oks) >= guardEntries {
			return
		}
	}
	g.oks[src] = decaying{v: d.valueAt(now) + 1, at: now}
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
// instead and in its turn of suspectShare; ErrLoginBusy when none frees within loginWait
// (bcryptWait for a suspect one), or when a suspect comparison's turn comes later. Its
// waits hold no place of the request's listener (connlimit.Pace).
func (g *loginGuard) compare(ctx context.Context, hash, pass string, suspect bool) error {
	g.init()
	wait, slots, nice := loginWait, g.slots, lowprio.Low
	if suspect {
		wait, slots, nice = bcryptWait, g.suspects, lowprio.Lowest
	}
	deadline := time.Now().Add(wait)
	done, gone := connlimit.Pace(ctx)
	defer done()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
	case <-t.C:
		return ErrLoginBusy
	case <-gone:
		return ErrLoginBusy
	case <-ctx.Done():
		return ErrLoginBusy
	}
	defer func() { <-slots }()
	if suspect {
		turn := g.suspectCPU.Next(time.Now())
		if turn.After(deadline) {
			return ErrLoginBusy
		}
		time.Sleep(time.Until(turn))
		start := time.Now()
		defer func() { g.suspectCPU.Charge(start, time.Now()) }()
	}
	done()
	return lowprio.Run(nice, func() error { return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)) })
}

// PasswordSlots is how many bcrypt comparisons may run at once on cpus CPUs (Throttle.CPUs),
// clean and suspect: one clean per CPU and half as many suspect ones. Each runs on a
// thread of its own (internal/lowprio), so a program that keeps PasswordSlots(cpus)
// GOMAXPROCS slots beyond its CPUs (cmd/frontdoor serve does) lets its requests preempt the
// comparisons.
func PasswordSlots(cpus int) int { return cpus + suspectSlots(cpus) }

// suspectSlots is the number of suspect comparisons at once beside cpus clean ones.
func suspectSlots(cpus int) int { return max(1, cpus/2) }

// Status is the status that answers a refused login's err — 429 when throttled, 503
// while a check cannot be made (busy, or a code, certificate, RADIUS server or identity
// provider out of reach), else 401 — and sets Retry-After on w when trying again later
// helps. The APIs (loginRefused) and the login pages answer with it alike.
func Status(w http.ResponseWriter, err error) int {
	var th ThrottledError
	retry, code := "", http.StatusServiceUnavailable
	switch {
	case errors.As(err, &th):
		retry, code = strconv.Itoa(int(math.Ceil(th.after.Seconds()))), http.StatusTooManyRequests
	case errors.Is(err, ErrLoginBusy):
		retry = "1"
	case errors.Is(err, errCodeUnchecked):
		retry = "30"
	case errors.Is(err, pki.ErrCertUnchecked):
		retry = "60"
	case errors.Is(err, errRADIUSUnavailable), errors.Is(err, ErrSSOUnavailable):
		retry = "10"
	default:
		return http.StatusUnauthorized
	}
	w.Header().Set("Retry-After", retry)
	return code
}
