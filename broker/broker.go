package broker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// Broker places launches on machines and follows sessions through their lifecycle. It is safe
// for concurrent use.
type Broker struct {
	m      *model
	st     Store
	now    func() time.Time
	newID  func() string
	onEnd  func(Session) // told of sessions another node or an expiry ended (WithOnEnd)
	shared bool          // st is a Shared store: followed, and expiring sessions by itself
	// zone is this node's zone (WithZone); shareLoad is the site's share_load_across_zones.
	zone      string
	shareLoad bool

	stateMu sync.Mutex // serializes machine-state writes (taken before mu)

	mu        sync.Mutex // guards sessions, byUser, onMachine, the dynamic fields of machines and groups, and the buckets
	sessions  map[string]*Session
	byUser    map[string][]*Session // live sessions of each user, by Created then ID
	onMachine map[string][]*Session // live sessions of each machine, by Created then ID
	// creating holds the ids of sessions this broker is creating in the store: a change
	// that reports one before CreateSession has returned is left to the launch (false), and
	// one that ends it marks it true so that the launch does not add it.
	creating map[string]bool
	// ending holds the ids of sessions this broker is deleting: their end reaches the
	// caller, not the WithOnEnd hook.
	ending map[string]bool
}

// Option configures a Broker.
type Option func(*Broker)

// WithOnEnd sets a function told of every session that ended elsewhere: logged off at another
// node or expired by a Shared store (the node closes the session's channels). Sessions this
// broker ends are returned by Logoff and Expire instead.
func WithOnEnd(fn func(Session)) Option { return func(b *Broker) { b.onEnd = fn } }

// WithIDs sets the session id generator (default: 16 random bytes in hex). Tests and
// `frontdoor explain` use it for stable output.
func WithIDs(newID func() string) Option { return func(b *Broker) { b.newID = newID } }

// WithZone names the zone of the node the broker runs in (default: none). Unless the site
// sets share_load_across_zones, the broker then uses the CPU and memory only of the machines
// whose agents report to a node of that zone (seed 003: load stays in its zone; sessions and
// their events are shared): the load index of the others counts their sessions and logons.
func WithZone(zone string) Option { return func(b *Broker) { b.zone = zone } }

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// New builds a broker for the defaulted, validated configuration cfg over the store st, with
// the clock now, and loads the live state (sessions, machine states) from st. Sessions on
// machines the configuration no longer has are kept (they can be logged off) but occupy no
// slot.
func New(ctx context.Context, cfg *configs.Config, st Store, now func() time.Time, opts ...Option) (*Broker, error) {
	m, err := newModel(cfg)
	if err != nil {
		return nil, fmt.Errorf("building broker model: %w", err)
	}
	b := &Broker{m: m, st: st, now: now, newID: randomID, shareLoad: cfg.Site.ShareLoadAcrossZones,
		sessions: map[string]*Session{}, byUser: map[string][]*Session{}, onMachine: map[string][]*Session{}, creating: map[string]bool{}, ending: map[string]bool{}}
	for _, o := range opts {
		o(b)
	}
	var snap Snapshot
	if sh, ok := st.(Shared); ok {
		b.shared = true
		// Changes may come before the snapshot is applied: mu is held until it is.
		b.mu.Lock()
		snap, err = sh.Follow(ctx, b.apply)
		defer b.mu.Unlock()
	} else {
		snap, err = st.Load(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("loading broker state: %w", err)
	}
	for _, ms := range snap.Machines {
		mx := m.machines[ms.Name]
		if mx == nil {
			continue
		}
		b.applyState(mx, ms)
	}
	for i := range snap.Sessions {
		s := snap.Sessions[i]
		if !s.live() {
			continue
		}
		b.addLocked(&s)
		if mx := m.machines[s.Machine]; mx != nil {
			mx.sessions++
			if s.State == StatePending {
				mx.pending++
			}
		}
	}
	for _, mx := range m.machines {
		mx.load = mx.loadIndex()
		mx.group.buckets[mx.zone].insert(mx)
	}
	return b, nil
}

// applyState installs a stored machine state; the load of a machine that reports in another
// zone is hidden unless the site shares load across zones.
func (b *Broker) applyState(mx *machine, ms MachineState) {
	mx.cpu, mx.mem, mx.down = ms.CPU, ms.Memory, ms.Down
	mx.reportedAt, mx.loadZone = ms.Reported, ms.LoadZone
	lz := cmp.Or(ms.LoadZone, mx.zone)
	if mx.loadHidden = b.zone != "" && !b.shareLoad && lz != b.zone; mx.loadHidden {
		mx.cpu, mx.mem = 0, 0
	}
	mx.maintenance = mx.cfgMaintenance
	if ms.Maintenance != nil {
		mx.maintenance = *ms.Maintenance
	}
	mx.reported = true
}

// addLocked indexes a new session.
func (b *Broker) addLocked(s *Session) {
	b.sessions[s.ID] = s
	insertSession(b.byUser, s.User, s)
	insertSession(b.onMachine, s.Machine, s)
}

// insertSession adds s to index[k], kept by Created then ID.
func insertSession(index map[string][]*Session, k string, s *Session) {
	l := index[k]
	i, _ := slices.BinarySearchFunc(l, s, compareSessions)
	index[k] = slices.Insert(l, i, s)
}

// dropSession removes s from index[k].
func dropSession(index map[string][]*Session, k string, s *Session) {
	l := index[k]
	if i := slices.Index(l, s); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(index, k)
	} else {
		index[k] = l
	}
}

// removeLocked drops a session from the indexes and frees its slot.
func (b *Broker) removeLocked(id string) (*Session, bool) {
	s, ok := b.sessions[id]
	if !ok {
		return nil, false
	}
	delete(b.sessions, id)
	dropSession(b.byUser, s.User, s)
	dropSession(b.onMachine, s.Machine, s)
	if mx := b.m.machines[s.Machine]; mx != nil {
		mx.update(func() {
			mx.sessions--
			if s.State == StatePending {
				mx.pending--
			}
		})
	}
	return s, true
}

// replaceLocked installs a newer revision of an existing session; older revisions and
// sessions that are gone are ignored.
func (b *Broker) replaceLocked(next Session) {
	cur, ok := b.sessions[next.ID]
	if !ok || cur.Rev >= next.Rev {
		return
	}
	if mx := b.m.machines[cur.Machine]; mx != nil && (cur.State == StatePending) != (next.State == StatePending) {
		mx.update(func() {
			if next.State == StatePending {
				mx.pending++
			} else {
				mx.pending--
			}
		})
	}
	*cur = next
}

func compareSessions(a, b *Session) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// Session returns a copy of the live session id.
func (b *Broker) Session(id string) (Session, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return Session{}, false
	}
	return *s, true
}

// Sessions returns copies of all live sessions, ordered by Created then ID.
func (b *Broker) Sessions() []Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Session, 0, len(b.sessions))
	for _, s := range b.sessions {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, c Session) int { return compareSessions(&a, &c) })
	return out
}

// SessionsOn returns copies of the live sessions of machine, ordered by Created then ID.
func (b *Broker) SessionsOn(machine string) []Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.onMachine[machine]
	out := make([]Session, 0, len(l))
	for _, s := range l {
		out = append(out, *s)
	}
	return out
}

// MachineLoad returns the current load index of a machine and its live session count.
func (b *Broker) MachineLoad(name string) (load, sessions int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mx := b.m.machines[name]
	if mx == nil {
		return 0, 0, false
	}
	return mx.load, mx.sessions, true
}

// mutate applies fn to a copy of session id and writes it with a compare-and-swap, retrying
// on conflicts.
func (b *Broker) mutate(ctx context.Context, id string, fn func(s *Session) error) (Session, error) {
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		cur, ok := b.sessions[id]
		if !ok {
			b.mu.Unlock()
			return Session{}, fmt.Errorf("session %s: %w", id, ErrNoSession)
		}
		next := *cur
		if err := fn(&next); err != nil {
			b.mu.Unlock()
			return Session{}, fmt.Errorf("session %s: %w", id, err)
		}
		prev := cur.Rev
		next.Rev = prev + 1
		b.mu.Unlock()
		err := b.st.UpdateSession(ctx, next, prev)
		if errors.Is(err, ErrConflict) && attempt < 8 {
			if err := b.refresh(ctx, id); err != nil {
				return Session{}, err
			}
			continue
		}
		if err != nil {
			if errors.Is(err, ErrNoSession) {
				b.mu.Lock()
				b.removeLocked(id)
				b.mu.Unlock()
			}
			return Session{}, fmt.Errorf("session %s: %w", id, err)
		}
		b.mu.Lock()
		b.replaceLocked(next)
		b.mu.Unlock()
		return next, nil
	}
}

// refresh reloads one session from the store after a conflict.
func (b *Broker) refresh(ctx context.Context, id string) error {
	if sh, ok := b.st.(Shared); ok {
		s, err := sh.GetSession(ctx, id)
		b.mu.Lock()
		defer b.mu.Unlock()
		switch {
		case errors.Is(err, ErrNoSession):
			b.removeLocked(id)
			return nil
		case err != nil:
			return fmt.Errorf("reloading session %s: %w", id, err)
		}
		b.replaceLocked(s)
		return nil
	}
	snap, err := b.st.Load(ctx)
	if err != nil {
		return fmt.Errorf("reloading session %s: %w", id, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range snap.Sessions {
		if s.ID == id {
			b.replaceLocked(s)
			return nil
		}
	}
	b.removeLocked(id)
	return nil
}

// Connected records that the client of session id attached through via (a gateway's name,
// or "direct"): pending or disconnected → connected (connected stays connected, now via via).
func (b *Broker) Connected(ctx context.Context, id, via string) (Session, error) {
	now := b.now()
	return b.mutate(ctx, id, func(s *Session) error {
		if s.State != StateConnected {
			s.Changed = now
		}
		s.State, s.Expires, s.Via = StateConnected, time.Time{}, via
		return nil
	})
}

// ErrNotCarrier refuses a disconnect from what no longer carries the session.
var ErrNotCarrier = errors.New("the session is carried elsewhere now")

// Disconnected records that the client of session id went away from via: connected →
// disconnected, kept for the group's disconnect_timeout. A disconnect from a gateway that no
// longer carries the session (its client moved to another one, whose connect came first) is
// refused with ErrNotCarrier; via "" applies whatever carries it.
func (b *Broker) Disconnected(ctx context.Context, id, via string) (Session, error) {
	now := b.now()
	return b.mutate(ctx, id, func(s *Session) error {
		if s.State != StateConnected {
			return fmt.Errorf("%w: %s → disconnected", ErrBadTransition, s.State)
		}
		if via != "" && s.Via != "" && via != s.Via {
			return fmt.Errorf("%w: %s, not %s", ErrNotCarrier, s.Via, via)
		}
		s.State, s.Changed = StateDisconnected, now
		s.Expires = now.Add(b.disconnectTimeout(s).D())
		return nil
	})
}

func (b *Broker) disconnectTimeout(s *Session) configs.Duration {
	if g := b.m.groups[s.Group]; g != nil {
		return g.disconnectTimeout
	}
	return configs.Duration(time.Hour)
}

// Logoff ends session id and frees its slot. It returns the ended session.
func (b *Broker) Logoff(ctx context.Context, id string) (Session, error) {
	b.mu.Lock()
	cur, ok := b.sessions[id]
	b.mu.Unlock()
	if !ok {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNoSession)
	}
	return b.end(ctx, cur.ID)
}

func (b *Broker) end(ctx context.Context, id string) (Session, error) {
	b.mu.Lock()
	cur, ok := b.sessions[id]
	if !ok {
		b.mu.Unlock()
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNoSession)
	}
	out := *cur
	b.ending[id] = true
	b.mu.Unlock()
	err := b.st.DeleteSession(ctx, id)
	b.mu.Lock()
	delete(b.ending, id)
	if err != nil && !errors.Is(err, ErrNoSession) {
		b.mu.Unlock()
		return Session{}, fmt.Errorf("ending session %s: %w", id, err)
	}
	_, removed := b.removeLocked(id)
	b.mu.Unlock()
	if !removed && errors.Is(err, ErrNoSession) {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNoSession) // ended elsewhere first
	}
	out.State, out.Changed, out.Expires = StateEnded, b.now(), time.Time{}
	return out, nil
}

// RunExpiry runs Expire at every tick until ctx ends, telling ended of each session it ended
// and failed of a store failure (the next tick tries again). A broker over a Shared store
// need not run it: the store expires sessions itself. It returns nil when ctx ends.
func (b *Broker) RunExpiry(ctx context.Context, tick <-chan time.Time, ended func(Session), failed func(error)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			out, err := b.Expire(ctx)
			if err != nil && ctx.Err() == nil {
				failed(err)
			}
			for _, s := range out {
				ended(s)
			}
		}
	}
}

// Shared reports whether the broker follows a store shared with other nodes, which expires
// sessions by itself: Expire need not run.
func (b *Broker) Shared() bool { return b.shared }

// apply installs a change of a Shared store in the view. Changes this broker made itself
// come back too and find the view already up to date.
func (b *Broker) apply(c Change) {
	b.mu.Lock() // New holds it until the snapshot is applied
	defer b.mu.Unlock()
	b.applyLocked(c)
}

func (b *Broker) applyLocked(c Change) {
	switch {
	case c.Session != nil:
		s := *c.Session
		if _, ok := b.creating[s.ID]; ok {
			return // the launch creating it adds it
		}
		if _, ok := b.sessions[s.ID]; ok {
			b.replaceLocked(s)
			return
		}
		if !s.live() {
			return
		}
		b.addLocked(&s)
		if mx := b.m.machines[s.Machine]; mx != nil {
			mx.update(func() {
				mx.sessions++
				if s.State == StatePending {
					mx.pending++
				}
			})
		}
	case c.Ended != "":
		if _, ok := b.creating[c.Ended]; ok {
			b.creating[c.Ended] = true
			return
		}
		s, ok := b.removeLocked(c.Ended)
		if ok && b.onEnd != nil && !b.ending[c.Ended] {
			out := *s
			out.State, out.Changed, out.Expires = StateEnded, b.now(), time.Time{}
			go b.onEnd(out) // outside mu: it may call the broker
		}
	case c.Machine != nil:
		if mx := b.m.machines[c.Machine.Name]; mx != nil {
			// Health's verdict on a machine is this node's own probes' (SetDown): another
			// node's view of the machine does not overrule it.
			mx.update(func() {
				down := mx.down
				b.applyState(mx, *c.Machine)
				mx.down = down
			})
		}
	}
}

// Expire ends every pending session that never connected within pending_timeout and every
// disconnected session past its group's disconnect_timeout, and returns them.
func (b *Broker) Expire(ctx context.Context) ([]Session, error) {
	now := b.now()
	b.mu.Lock()
	var due []string
	for id, s := range b.sessions {
		if (s.State == StatePending || s.State == StateDisconnected) && !s.Expires.IsZero() && !now.Before(s.Expires) {
			due = append(due, id)
		}
	}
	b.mu.Unlock()
	slices.Sort(due)
	var ended []Session
	for _, id := range due {
		s, err := b.end(ctx, id)
		if errors.Is(err, ErrNoSession) {
			continue
		}
		if err != nil {
			return ended, err
		}
		ended = append(ended, s)
	}
	return ended, nil
}

// ReportLoad records the CPU and memory load (percent, 0..100) reported by a machine's agent.
func (b *Broker) ReportLoad(ctx context.Context, name string, cpu, memory int) error {
	return b.setMachine(ctx, name, func(mx *machine) {
		mx.cpu, mx.mem, mx.reportedAt = cpu, memory, b.now()
		mx.loadZone, mx.loadHidden = b.zone, false // reported here: known in this zone
	})
}

// SetMaintenance puts a machine in maintenance (drain: reconnects only) or takes it out.
func (b *Broker) SetMaintenance(ctx context.Context, name string, on bool) error {
	return b.setMachine(ctx, name, func(mx *machine) { mx.maintenance = on })
}

// SetDown records the health verdict of a machine; a down machine is not available. Over a
// Shared store the verdict stays this node's: other nodes' brokers follow their own probes.
func (b *Broker) SetDown(ctx context.Context, name string, down bool) error {
	return b.setMachine(ctx, name, func(mx *machine) { mx.down = down })
}

func (b *Broker) setMachine(ctx context.Context, name string, fn func(*machine)) error {
	b.stateMu.Lock()
	defer b.stateMu.Unlock()
	b.mu.Lock()
	mx := b.m.machines[name]
	if mx == nil {
		b.mu.Unlock()
		return fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}
	mx.update(func() { fn(mx) })
	mx.reported = true
	maint := mx.maintenance
	// Reported stays the last load report's: a maintenance or health change is no report,
	// and the store writes a load only when a newer report brings it.
	ms := MachineState{Name: name, CPU: mx.cpu, Memory: mx.mem, Down: mx.down, Maintenance: &maint,
		Reported: mx.reportedAt, LoadZone: mx.loadZone}
	b.mu.Unlock()
	if err := b.st.PutMachine(ctx, ms); err != nil {
		return fmt.Errorf("storing machine %q: %w", name, err)
	}
	return nil
}

// SetSecureGateway switches a group's secure gateway mode at run time (not persisted): new
// launches follow it, running sessions keep their mode.
func (b *Broker) SetSecureGateway(groupName string, on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.m.groups[groupName]
	if g == nil {
		return fmt.Errorf("group %q is not defined", groupName)
	}
	g.secureGateway = on
	return nil
}
