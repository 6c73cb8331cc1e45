package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// journalEntry is one session's change in an outage: its state after the outage (nil: ended).
type journalEntry struct {
	Created bool            `json:"created,omitempty"` // the outage created it
	Session *broker.Session `json:"session,omitempty"`
	Machine string          `json:"machine"`
	Slot    int             `json:"slot"`
	Ended   time.Time       `json:"ended,omitzero"`
}

// journal is what an outage changed, to write back.
type journal struct {
	Sessions   map[string]*journalEntry `json:"sessions"`
	Revoked    map[string][2]time.Time  `json:"revoked"`    // session -> before, until
	Superseded map[string]supersede     `json:"superseded"` // session -> mark, until
	Used       map[string]time.Time     `json:"used"`       // "<ticket id>/<channel>" -> until
	Flags      map[string]machineFlags  `json:"flags"`      // machine -> its flags
}

type supersede struct {
	Mark  uint64    `json:"mark"`
	Until time.Time `json:"until"`
}

func newJournal() *journal {
	return &journal{Sessions: map[string]*journalEntry{}, Revoked: map[string][2]time.Time{},
		Superseded: map[string]supersede{}, Used: map[string]time.Time{}, Flags: map[string]machineFlags{}}
}

func (j *journal) size() int {
	return len(j.Sessions) + len(j.Revoked) + len(j.Superseded) + len(j.Used) + len(j.Flags)
}

// takeJournal swaps the outage's journal for an empty one and returns it.
func (st *Store) takeJournal() *journal {
	st.mu.Lock()
	defer st.mu.Unlock()
	j := st.out.journal
	if j == nil {
		j = newJournal()
	}
	st.out.journal = newJournal()
	return j
}

// mergeJournal puts back what a failed write-back left of j, under what was journaled since.
func (st *Store) mergeJournal(j *journal) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.out.journal == nil {
		st.out.journal = newJournal()
	}
	cur := st.out.journal
	keepNewer(cur.Sessions, j.Sessions)
	keepNewer(cur.Revoked, j.Revoked)
	keepNewer(cur.Superseded, j.Superseded)
	keepNewer(cur.Used, j.Used)
	keepNewer(cur.Flags, j.Flags)
}

// keepNewer copies into dst the entries of old that dst does not have.
func keepNewer[K comparable, V any](dst, old map[K]V) {
	for k, v := range old {
		if _, newer := dst[k]; !newer {
			dst[k] = v
		}
	}
}

// conflict records a reconciliation conflict.
func (st *Store) conflict(c Conflict) {
	c.At = st.now()
	st.met.conflicts.Inc()
	st.log.Warn("outage write-back: conflict", "machine", c.Machine, "session", c.Session, "what", c.What)
	st.mu.Lock()
	st.out.conflicts = append(st.out.conflicts, c)
	if n := len(st.out.conflicts); n > 100 {
		st.out.conflicts = slices.Delete(st.out.conflicts, 0, n-100)
	}
	st.mu.Unlock()
}

// writeBack writes an outage's journal to etcd by the reconciliation rules of the package
// doc. What it wrote is removed from j, so that a retry skips it.
//
// Sessions are written machine by machine (a machine's slots are chosen in order), up to
// writeBackParallel machines at once.
func (st *Store) writeBack(ctx context.Context, j *journal) error {
	byMachine := map[string][]string{}
	for id, e := range j.Sessions {
		byMachine[e.Machine] = append(byMachine[e.Machine], id)
	}
	var mu sync.Mutex // guards j.Sessions and errs
	var errs []error
	sem := make(chan struct{}, writeBackParallel)
	var wg sync.WaitGroup
	for _, ids := range byMachine {
		slices.Sort(ids)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, id := range ids {
				mu.Lock()
				e := j.Sessions[id]
				mu.Unlock()
				if err := st.writeBackSession(ctx, id, e); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				delete(j.Sessions, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Straight to etcd: the outage-aware Revoke and Supersede would journal them again,
	// and in the last pass wait for the outage's gate, which it holds.
	for s, r := range j.Revoked {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := st.Ledger().revoke(wctx, s, r[0], r[1])
		cancel()
		if err != nil {
			return err
		}
		delete(j.Revoked, s)
	}
	for s, m := range j.Superseded {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		err := st.Ledger().supersede(wctx, s, m.Mark, m.Until)
		cancel()
		if err != nil {
			return err
		}
		delete(j.Superseded, s)
	}
	for k, until := range j.Used {
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		lease, err := st.leaseUntil(wctx, until)
		if err == nil {
			id, ch, _ := strings.Cut(k, "/") // "<ticket id>/<channel>", whose channel has a slash
			key := st.key("tickets", "used", id, ch)
			var r *clientv3.TxnResponse
			r, err = st.cli.Txn(wctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, "", leaseOpt(lease)...)).Commit()
			if err == nil && !r.Succeeded {
				st.conflict(Conflict{What: "launch ticket channel " + k + " was admitted elsewhere too"})
			}
		}
		cancel()
		if err != nil {
			return err
		}
		delete(j.Used, k)
	}
	for m, f := range j.Flags {
		b, _ := json.Marshal(f)
		wctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		_, err := st.cli.Put(wctx, st.key("machines", m, "flags"), string(b))
		cancel()
		if err != nil {
			return err
		}
		delete(j.Flags, m)
	}
	return nil
}
