package ticket

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger remembers which launch-ticket channels were used, which sessions were revoked and
// which generation of each session's reconnect tickets was used last.
// MemoryLedger serves one node; a distributed store implements the same with transactions so
// that no ticket is used twice across nodes.
type Ledger interface {
	// Use records that ticket id opened ch and reports false if it already had. Entries may be
	// forgotten after until (the ticket has expired by then).
	Use(id [16]byte, ch Channel, until time.Time) (bool, error)
	// Revoke makes the tickets of session issued before before invalid until until: a
	// logoff's revocation has before = until (every ticket), a steal's the issue time of the
	// new endpoint's tickets (the old endpoint's alone). A later revocation with an earlier
	// before does not undo a wider one.
	Revoke(session string, before, until time.Time) error
	// Revoked returns the issue time before which session's tickets are revoked; zero when
	// none are.
	Revoked(session string) (time.Time, error)
	// Supersede records that a reconnect ticket of session whose Claims.Mark is mark was
	// used, so that tickets of lower marks are refused, until until; a higher mark already
	// there stays.
	Supersede(session string, mark uint64, until time.Time) error
	// Superseded returns the mark below which session's reconnect tickets are refused; 0 when
	// none is.
	Superseded(session string) (uint64, error)
}

// SessionLedger is a Ledger that wants to know the session of a launch ticket it records
// (a site database in outage mode admits a ticket only at the node that holds its session).
type SessionLedger interface {
	Ledger
	// UseFor is Use for a launch ticket of session.
	UseFor(id [16]byte, session string, ch Channel, until time.Time) (bool, error)
}

// Mark orders the reconnect tickets of a session: the chain's issue time (a later launch
// starts a later chain, Signer.Reissue keeps it), then the generation within the chain.
func (c Claims) Mark() uint64 {
	return uint64(max(c.Issued.UnixMilli(), 0))<<20 | uint64(min(c.Gen, 1<<20-1))
}

// ErrLedgerFull is returned when a MemoryLedger holds its limit of unexpired entries.
var ErrLedgerFull = errors.New("ticket ledger full")

// MemoryLedger is a Ledger in memory, bounded by Limit unexpired entries.
type MemoryLedger struct {
	now   func() time.Time
	limit int

	mu      sync.Mutex // guards used, revoked and gens
	used    map[useKey]time.Time
	revoked map[string]revocation
	gens    map[string]generation
}

// generation is the mark of the last of a session's reconnect tickets used, in a MemoryLedger.
type generation struct {
	mark  uint64
	until time.Time
}

// revocation is one session's revocation in a MemoryLedger.
type revocation struct{ before, until time.Time }

type useKey struct {
	id [16]byte
	ch Channel
}

// NewMemoryLedger returns a ledger holding at most limit entries of each kind (0 means
// 1,000,000); now is the clock (time.Now when nil).
func NewMemoryLedger(limit int, now func() time.Time) *MemoryLedger {
	if limit <= 0 {
		limit = 1_000_000
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryLedger{now: now, limit: limit, used: map[useKey]time.Time{}, revoked: map[string]revocation{}, gens: map[string]generation{}}
}

// Supersede implements Ledger.
func (l *MemoryLedger) Supersede(session string, mark uint64, until time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return widen(l.gens, session, generation{mark, until}, l.limit, l.now())
}

// Superseded implements Ledger.
func (l *MemoryLedger) Superseded(session string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.gens[session]
	if !ok || !l.now().Before(g.until) {
		return 0, nil
	}
	return g.mark, nil
}

// Use implements Ledger.
func (l *MemoryLedger) Use(id [16]byte, ch Channel, until time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := useKey{id, ch}
	if exp, ok := l.used[k]; ok && l.now().Before(exp) {
		return false, nil
	}
	if len(l.used) >= l.limit {
		purgeLocked(l.used, l.now())
		if len(l.used) >= l.limit {
			return false, ErrLedgerFull
		}
	}
	l.used[k] = until
	return true, nil
}

// Revoke implements Ledger.
func (l *MemoryLedger) Revoke(session string, before, until time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return widen(l.revoked, session, revocation{before, until}, l.limit, l.now())
}

// widening is a per-session entry of a MemoryLedger that a later one only widens.
type widening[V any] interface {
	expires() time.Time
	union(V) V
}

func (r revocation) expires() time.Time { return r.until }
func (r revocation) union(o revocation) revocation {
	return revocation{maxTime(r.before, o.before), maxTime(r.until, o.until)}
}
func (g generation) expires() time.Time { return g.until }
func (g generation) union(o generation) generation {
	return generation{max(g.mark, o.mark), maxTime(g.until, o.until)}
}

// widen stores v for session in m, widened by the entry there unless it has expired; a new
// session past limit entries first makes room by dropping the expired ones.
func widen[V widening[V]](m map[string]V, session string, v V, limit int, now time.Time) error {
	old, ok := m[session]
	if !ok && len(m) >= limit {
		for k, e := range m {
			if !now.Before(e.expires()) {
				delete(m, k)
			}
		}
		if len(m) >= limit {
			return ErrLedgerFull
		}
	}
	if ok && now.Before(old.expires()) {
		v = v.union(old)
	}
	m[session] = v
	return nil
}

// Revoked implements Ledger.
func (l *MemoryLedger) Revoked(session string) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.revoked[session]
	if !ok || !l.now().Before(r.until) {
		return time.Time{}, nil
	}
	return r.before, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Len returns the number of entries held, expired or not.
func (l *MemoryLedger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.used) + len(l.revoked) + len(l.gens)
}

func purgeLocked[K comparable](m map[K]time.Time, now time.Time) {
	for k, exp := range m {
		if !now.Before(exp) {
			delete(m, k)
		}
	}
}

// Verifier checks tickets presented to a gateway.
type Verifier struct {
	keys   atomic.Pointer[ring]
	ledger Ledger
	now    func() time.Time
	// superseding bounds the ledger writes of new generations in flight apart from the
	// checks; past it a check writes its own.
	superseding chan struct{}
}

// NewVerifier returns a Verifier for the site's public key; now is the clock (time.Now when nil).
func NewVerifier(pub ed25519.PublicKey, ledger Ledger, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	v := &Verifier{ledger: ledger, now: now, superseding: make(chan struct{}, 64)}
	v.SetKeys([]ed25519.PublicKey{pub})
	return v
}

// SetKeys makes pubs the keys tickets are checked with from now on (KeySet.Verifying).
func (v *Verifier) SetKeys(pubs []ed25519.PublicKey) { v.keys.Store(newRing(pubs)) }

// parse decodes token and checks its signature with the verifier's keys.
func (v *Verifier) parse(token string) (Claims, error) {
	r := v.keys.Load()
	return parse(token, r.key, r.all)
}

// NoLoginLifetime is how long a ticket that carries no login — one of versions 1 to 3, or a
// reconnect ticket reissued from one — opens channels after its chain started
// (Claims.Issued, which Reissue keeps): as a login of the default factor lifetime would.
// Tickets in flight across an upgrade keep working for a working day, and none lives on by
// rotation.
const NoLoginLifetime = 10 * time.Hour

// Check verifies token for opening channel ch to machine (any machine when machine is "") and
// returns its claims. A launch ticket's channel is marked used: it opens each channel once. A
// gateway-mode reconnect ticket, which gateways rotate at each use (Signer.Reissue), is
// refused once a later generation of its session was used, and its own use supersedes the
// earlier ones (recorded apart from the check: the answer does not wait for the ledger); a
// direct-mode one, which nobody on its path can rotate, opens its channels again. Any ticket
// is refused once its session is revoked, and from the end of its login's factor lifetime
// (Claims.LoginExpires, or NoLoginLifetime after Issued for a ticket without a login:
// ErrLoginExpired). The error says why, for the log; clients are told
// only "denied", or, for ErrLoginExpired, to log in again (StatusLoginExpired).
func (v *Verifier) Check(token, machine string, ch Channel) (Claims, error) {
	c, err := v.parse(token)
	if err != nil {
		return c, err
	}
	now := v.now()
	if err := c.current(now); err != nil {
		return c, err
	}
	switch {
	case c.Kind == Enrol || c.Kind == LaunchFile:
		return c, fmt.Errorf("%w: %s ticket opens no channel", ErrWrongKind, c.Kind)
	case !c.LoginExpires.IsZero() && !now.Before(c.LoginExpires):
		return c, fmt.Errorf("%w: %s logged in at %s with %s, good until %s", ErrLoginExpired, c.User,
			c.AuthTime.UTC().Format(time.RFC3339), c.Factors, c.LoginExpires.UTC().Format(time.RFC3339))
	case c.LoginExpires.IsZero() && !now.Before(c.Issued.Add(NoLoginLifetime)):
		return c, fmt.Errorf("%w: the ticket carries no login (version 3 or older, or reissued from one) and its chain started at %s",
			ErrLoginExpired, c.Issued.UTC().Format(time.RFC3339))
	case machine != "" && c.Machine != machine:
		return c, fmt.Errorf("%w: %q, not %q", ErrWrongMachine, c.Machine, machine)
	case !c.Names(ch):
		return c, fmt.Errorf("%w: %s", ErrWrongChannel, ch)
	}
	if before, err := v.ledger.Revoked(c.Session); err != nil {
		return c, fmt.Errorf("checking revocation: %w", err)
	} else if c.Issued.Before(before) {
		return c, ErrRevoked
	}
	if c.Kind == Reconnect && c.Mode == ModeGateway {
		floor, err := v.ledger.Superseded(c.Session)
		if err != nil {
			return c, fmt.Errorf("checking the generation: %w", err)
		}
		if mark := c.Mark(); mark < floor {
			return c, fmt.Errorf("%w (generation %d)", ErrSuperseded, c.Gen)
		} else if mark > floor {
			v.supersede(c)
		} else {
			c.Reused = true
		}
	}
	if c.Kind == Launch {
		var fresh bool
		var err error
		if sl, ok := v.ledger.(SessionLedger); ok {
			fresh, err = sl.UseFor(c.ID, c.Session, ch, c.Expires.Add(clockSkew))
		} else {
			fresh, err = v.ledger.Use(c.ID, ch, c.Expires.Add(clockSkew))
		}
		if err != nil {
			return c, fmt.Errorf("recording ticket use: %w", err)
		}
		if !fresh {
			return c, ErrReplayed
		}
	}
	return c, nil
}

// supersede records that c's generation was used, apart from the check while few such writes
// are in flight.
func (v *Verifier) supersede(c Claims) {
	until := c.Expires.Add(clockSkew)
	select {
	case v.superseding <- struct{}{}:
		go func() {
			defer func() { <-v.superseding }()
			v.ledger.Supersede(c.Session, c.Mark(), until)
		}()
	default:
		v.ledger.Supersede(c.Session, c.Mark(), until)
	}
}

// AllIssued is a time after every ticket's issue: "issued before AllIssued" is every ticket.
var AllIssued = time.Unix(1<<40, 0)

// Revoked reports whether the ticket of claims c was revoked since it was checked: a channel
// registers, then asks, so that a revocation that came between its check and its
// registration (which cuts only registered channels) still cuts it.
func (v *Verifier) Revoked(c Claims) bool {
	before, err := v.ledger.Revoked(c.Session)
	return err == nil && c.Issued.Before(before)
}

// RevokedBefore returns the time before which session's tickets are revoked (a steal, or
// every ticket: AllIssued for a session that ended), zero when none are.
func (v *Verifier) RevokedBefore(session string) (time.Time, error) {
	return v.ledger.Revoked(session)
}

// current reports why c is not valid at now: not yet issued (beyond the clock skew), or
// expired; nil when it is.
func (c Claims) current(now time.Time) error {
	switch {
	case c.Issued.After(now.Add(clockSkew)):
		return ErrNotYetValid
	case !now.Before(c.Expires):
		return fmt.Errorf("%w at %s", ErrExpired, c.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// enrolChannel is what the ledger records of an enrolment ticket's one use.
var enrolChannel = Channel{Port: 0, Proto: "enrol"}

// CheckEnrolment verifies an enrolment ticket of machine and uses it up: it is good for one
// key, whose id key names — the same key again (a request retried at another front door) is
// taken, another is refused.
func (v *Verifier) CheckEnrolment(token, machine, key string) (Claims, error) {
	c, err := v.parse(token)
	if err != nil {
		return c, err
	}
	now := v.now()
	if err := c.current(now); err != nil {
		return c, err
	}
	switch {
	case c.Kind != Enrol:
		return c, fmt.Errorf("%w: %v, not an enrolment ticket", ErrWrongKind, c.Kind)
	case c.Machine != machine:
		return c, fmt.Errorf("%w: %q, not %q", ErrWrongMachine, c.Machine, machine)
	}
	until := c.Expires.Add(clockSkew)
	// Two entries: the ticket's one use, and the key it was used for. A ticket used before
	// is taken again only for that key, whose entry then exists already.
	first, err := v.ledger.Use(c.ID, enrolChannel, until)
	if err != nil {
		return c, fmt.Errorf("recording the enrolment: %w", err)
	}
	newKey, err := v.ledger.Use(c.ID, Channel{Proto: "enrol-" + key}, until)
	if err != nil {
		return c, fmt.Errorf("recording the enrolment: %w", err)
	}
	if !first && newKey {
		return c, ErrReplayed
	}
	return c, nil
}

// Once records that the one-time proof id of kind what ("totp": a login code) was used, until
// until, and reports false when it had been already: site-wide, in the ledger that records
// the launch tickets' channels, so that a code taken at one front door is refused at all.
func (v *Verifier) Once(id [16]byte, what string, until time.Time) (bool, error) {
	return v.ledger.Use(id, Channel{Proto: what}, until)
}

// Peek returns the claims of token once its signature checks, and checks and records
// nothing else: a caller may look at whose ticket it is before Check uses it.
func (v *Verifier) Peek(token string) (Claims, error) { return v.parse(token) }

// Revoke invalidates every ticket of session (on logoff) for ttl, the longest a ticket of it
// can live.
func (v *Verifier) Revoke(session string, ttl time.Duration) error {
	until := v.now().Add(ttl + clockSkew)
	return v.ledger.Revoke(session, until, until)
}

// RevokeBefore invalidates the tickets of session issued before before (a steal: the old
// endpoint's), for ttl, the longest a ticket of it can live.
func (v *Verifier) RevokeBefore(session string, before time.Time, ttl time.Duration) error {
	return v.ledger.Revoke(session, before, v.now().Add(ttl+clockSkew))
}
