package etcd

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/store/settings"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// loadAll reads every key under the prefix, at one revision, into a fresh view that replaces
// the store's: streamed (etcd's RangeStream) and decoded as it arrives, or a page at a time
// from a server without it.
func (st *Store) loadAll(ctx context.Context) error {
	fresh := &Store{o: st.o, log: st.log, view: newView()}
	var rev int64
	var all map[string]*cachedKV // for the cache file
	if st.cache != nil {
		all = map[string]*cachedKV{}
	}
	apply := func(kvs []*mvccpb.KeyValue) {
		for _, x := range kvs {
			fresh.applyLocked(kv{key: string(x.Key), value: x.Value, version: x.Version, createRev: x.CreateRevision}, false)
			if all != nil && !strings.HasPrefix(string(x.Key), st.o.Prefix+"passive/") {
				all[string(x.Key)] = &cachedKV{Value: x.Value, Version: x.Version, CreateRev: x.CreateRevision}
			}
		}
	}
	ranges := st.viewRanges()
	streamed := true
	for _, rg := range ranges {
		opts := []clientv3.OpOption{clientv3.WithRange(rg[1])}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ch, err := st.cli.GetStream(ctx, rg[0], opts...)
		if err != nil {
			streamed = false
			break
		}
		for r := range ch {
			if err := r.Err(); err != nil {
				if status.Code(err) == codes.Unimplemented && rev == 0 {
					streamed = false
					break
				}
				return err
			}
			if rev == 0 && r.RangeResponse.Header != nil {
				rev = r.RangeResponse.Header.Revision
			}
			apply(r.RangeResponse.Kvs)
		}
		if !streamed {
			break
		}
	}
	if !streamed {
		fresh.view = newView()
		if all != nil {
			clear(all)
		}
		rev = 0
		for _, rg := range ranges {
			key := rg[0]
			for {
				opts := []clientv3.OpOption{clientv3.WithRange(rg[1]), clientv3.WithLimit(5000)}
				if rev != 0 {
					opts = append(opts, clientv3.WithRev(rev))
				}
				r, err := st.cli.Get(ctx, key, opts...)
				if err != nil {
					return err
				}
				if rev == 0 {
					rev = r.Header.Revision
				}
				apply(r.Kvs)
				if !r.More || len(r.Kvs) == 0 {
					break
				}
				key = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
			}
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.view = fresh.view
	st.electionChanged = true
	st.rev = rev
	if st.cache != nil {
		st.cache.mu.Lock()
		st.cache.reset, st.cache.dirty = all, map[string]*cachedKV{}
		st.cache.mu.Unlock()
	}
	return nil
}

// kv is one key's change: a put (value, version > 0) or a delete (version 0).
type kv struct {
	key       string
	value     []byte
	version   int64
	createRev int64
}

// applyLocked installs one key's change in the view and returns the broker change it makes,
// if any, or the settings section it changed: the key's family (families) applies it.
func (st *Store) applyLocked(x kv, deleted bool) (ch broker.Change, section string) {
	rest, ok := strings.CutPrefix(x.key, st.o.Prefix)
	if !ok {
		return ch, ""
	}
	st.cacheKVLocked(x, deleted)
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	if f, ok := families[parts[0]]; ok && (f.segments == 0 || f.segments == len(parts)) {
		return f.apply(st, parts, x, deleted), ""
	}
	if st.settings[parts[0]] != nil && len(parts) == 2 {
		if deleted {
			delete(st.settings[parts[0]], parts[1])
		} else {
			st.settings[parts[0]][parts[1]] = string(x.value)
		}
		return ch, parts[0]
	}
	return ch, ""
}

// A family is the keys under one first segment of the site's prefix (the key layout in the
// package doc): how many segments its keys have, its name included (0: it checks), and how a
// change of one of them is applied to the view, with mu held, returning the broker change it
// makes. Each family's apply lives beside the operations that write its keys.
type family struct {
	segments int
	apply    func(st *Store, parts []string, x kv, deleted bool) broker.Change
}

// families are the view's key families, by first segment; the settings sections
// (settings.Sections) are the rest.
var families = map[string]family{
	"sessions":   {2, (*Store).applySession},
	"slots":      {3, (*Store).applySlot},
	"machines":   {3, (*Store).applyMachine},
	"tickets":    {0, (*Store).applyTicket},
	"leaders":    {2, (*Store).applyLeader},
	"candidates": {3, (*Store).applyCandidate},
	"health":     {2, (*Store).applyHealth},
	"passive":    {3, (*Store).applyPassive},
	"audit":      {2, (*Store).applyAudit},
	"nodes":      {2, (*Store).applyNode},
}

// watch follows the prefix from the view's revision and applies every change, in order, to
// the view and the followers, until ctx ends. A compacted revision (the watch fell too far
// behind) reloads the whole view and tells the followers what changed.
func (st *Store) watch(ctx context.Context) {
	defer close(st.done)
	for ctx.Err() == nil {
		st.waitUp(ctx) // an outage's end reloads the view; the watch goes on from there
		st.mu.Lock()
		from := st.rev + 1
		up := st.out.alive.Load().ctx
		st.mu.Unlock()
		wctx, wcancel := context.WithCancel(ctx)
		stop := context.AfterFunc(up, wcancel) // an outage ends the watch
		// No WithPrevKV: a delete is applied by its key alone, and the previous value would
		// cost the member a read of it for every delete and every watcher.
		wch := st.cli.Watch(clientv3.WithRequireLeader(wctx), st.o.Prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if wr.CompactRevision != 0 {
					st.log.Warn("etcd: the watch fell behind a compaction; reloading the site state", "compacted", wr.CompactRevision)
					st.resync(ctx)
				} else if ctx.Err() == nil && !st.outage.Load() {
					st.log.Warn("etcd: watch interrupted; resuming", "err", err)
				}
				break
			}
			if st.outage.Load() {
				break // the outage's end reloads the view
			}
			st.mu.Lock()
			var changes []broker.Change
			sections := map[string]bool{}
			for _, ev := range wr.Events {
				x := kv{key: string(ev.Kv.Key), value: ev.Kv.Value, version: ev.Kv.Version, createRev: ev.Kv.CreateRevision}
				c, sec := st.applyLocked(x, ev.Type == clientv3.EventTypeDelete)
				if c != (broker.Change{}) {
					changes = append(changes, c)
				}
				if sec != "" {
					sections[sec] = true
				}
			}
			st.met.events.Add(float64(len(wr.Events)))
			// The view is at the last event's revision (a progress notice: at its header's);
			// a watch that resumes starts after it.
			if n := len(wr.Events); n > 0 && wr.Events[n-1].Kv.ModRevision > st.rev {
				st.rev = wr.Events[n-1].Kv.ModRevision
			} else if wr.IsProgressNotify() && wr.Header.Revision > st.rev {
				st.rev = wr.Header.Revision
			}
			sets := st.settingsLocked(sections)
			revs, raw, elected := st.newRevoked, st.newRaw, st.electionChanged
			st.newRevoked, st.newRaw, st.electionChanged = nil, nil, false
			st.mu.Unlock()
			// Told outside mu, by this one goroutine, in the store's order. A follower that
			// joins meanwhile may see a change its snapshot has: followers are idempotent.
			st.dispatch(changes, sets)
			st.dispatchRevoked(revs)
			st.dispatchRaw(raw)
			if elected {
				st.dispatchElection()
			}
		}
		stop()
		wcancel()
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// settingsLocked copies the sections that changed, for dispatch.
func (st *Store) settingsLocked(sections map[string]bool) map[string]map[string]string {
	out := map[string]map[string]string{}
	for sec := range sections {
		out[sec] = maps.Clone(st.settings[sec])
	}
	return out
}

// dispatch tells the followers of changes and of the settings sections that changed. It runs
// on the watch goroutine only, without mu, so a follower may take its own locks and even
// call the store.
func (st *Store) dispatch(changes []broker.Change, sections map[string]map[string]string) {
	st.mu.Lock()
	followers := slices.Clone(st.followers)
	on := map[string][]func(map[string]string){}
	for sec := range sections {
		on[sec] = slices.Clone(st.onSettings[sec])
	}
	st.mu.Unlock()
	for _, c := range changes {
		for _, fn := range followers {
			fn(c)
		}
	}
	for sec, m := range sections {
		for _, fn := range on[sec] {
			fn(maps.Clone(m))
		}
	}
}

// revocation is one revocation the watch applied, for OnRevoked.
type revocation struct {
	session string
	before  time.Time
}

// dispatchRevoked tells the OnRevoked followers of revs, on the watch goroutine, without mu.
func (st *Store) dispatchRevoked(revs []revocation) {
	if len(revs) == 0 {
		return
	}
	st.mu.Lock()
	fns := slices.Clone(st.onRevoked)
	st.mu.Unlock()
	for _, r := range revs {
		for _, fn := range fns {
			fn(r.session, r.before)
		}
	}
}

// resync reloads the view after the watch lost its place and tells the followers the
// difference.
func (st *Store) resync(ctx context.Context) {
	st.mu.Lock()
	old := st.sessions
	oldRevoked := maps.Clone(st.revoked)
	oldMachines := map[string]broker.MachineState{}
	for n := range st.loads {
		oldMachines[n] = st.machineLocked(n)
	}
	for n := range st.flags {
		oldMachines[n] = st.machineLocked(n)
	}
	st.mu.Unlock()
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, loadTimeout)
		err := st.loadAll(lctx)
		cancel()
		if err == nil {
			break
		}
		st.log.Warn("etcd: reloading the site state", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	st.mu.Lock()
	var changes []broker.Change
	for id := range old {
		if _, ok := st.sessions[id]; !ok {
			changes = append(changes, broker.Change{Ended: id})
		}
	}
	for id, s := range st.sessions {
		if o, ok := old[id]; !ok || o.Rev != s.Rev {
			s := s
			changes = append(changes, broker.Change{Session: &s})
		}
	}
	seen := map[string]bool{}
	for n := range oldMachines {
		seen[n] = true
	}
	for n := range st.loads {
		seen[n] = true
	}
	for n := range st.flags {
		seen[n] = true
	}
	for n := range seen {
		ms := st.machineLocked(n)
		if o, ok := oldMachines[n]; !ok || !sameMachine(o, ms) {
			changes = append(changes, broker.Change{Machine: &ms})
		}
	}
	all := map[string]bool{}
	for _, sec := range settings.Sections() {
		all[sec] = true
	}
	sets := st.settingsLocked(all)
	var revs []revocation // those the lost watch did not tell
	for id, before := range st.revoked {
		if before.After(oldRevoked[id]) {
			revs = append(revs, revocation{id, before})
		}
	}
	var raw []rawEvent // every record: the lost watch may have missed any
	for name, b := range st.healthRecs {
		raw = append(raw, rawEvent{"health", name, b})
	}
	st.newRaw, st.electionChanged = nil, false
	st.mu.Unlock()
	st.dispatch(changes, sets)
	st.dispatchRevoked(revs)
	st.dispatchRaw(raw)
	st.dispatchElection()
}
