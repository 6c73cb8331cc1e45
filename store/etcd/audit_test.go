package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	bbolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func values(vs [][]byte) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, " ")
}

// The audit log lists what two nodes appended newest first, with a limit and before a
// time; two entries of one node in the same nanosecond are both kept; the other node is
// told; and the log is in no view and no local host cache.
func TestAuditLogListsNewestFirst(t *testing.T) {
	c := cluster(t)
	dir := t.TempDir()
	a := openPlanned(t, c, "a", map[string]etcd.MachinePlan{"m": {Brokers: []string{"a"}, Max: 1}}, dir)
	b := open(t, c, "b")
	told := make(chan struct{}, 16)
	b.Audit().OnAudit(func() { told <- struct{}{} })
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, e := range []struct {
		st   *etcd.Store
		node string
		at   time.Duration
	}{{a, "a", 0}, {b, "b", time.Second}, {a, "a", 2 * time.Second}, {a, "a", 2 * time.Second}, {b, "b", 3 * time.Second}} {
		if err := e.st.Audit().AppendAudit(t.Context(), t0.Add(e.at), e.node, []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		limit  int
		before time.Time
		want   string
	}{
		{"all of them, newest first", 100, time.Time{}, "e4 e3 e2 e1 e0"},
		{"the newest two", 2, time.Time{}, "e4 e3"},
		{"those older than 2 s in", 100, t0.Add(2 * time.Second), "e1 e0"},
		{"the newest one older than 3 s in", 1, t0.Add(3 * time.Second), "e3"},
		{"none older than the first", 100, t0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.Audit().ListAudit(t.Context(), c.limit, c.before)
			if err != nil || values(got) != c.want {
				t.Fatalf("ListAudit(%d, %v) = %q, %v; want %q", c.limit, c.before, values(got), err, c.want)
			}
		})
	}
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("b was not told of the entries")
	}
	if r, err := etcd.Client(a).Get(t.Context(), "/frontdoor/test/audit/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 5 {
		t.Fatalf("%v keys under audit/ (%v), want 5", r.Count, err)
	}
	// a's cache followed the watch; d's was loaded whole after the entries were there.
	d := openPlanned(t, c, "d", map[string]etcd.MachinePlan{"m": {Brokers: []string{"d"}, Max: 1}}, dir)
	for _, st := range []*etcd.Store{a, d} {
		if err := etcd.FlushCache(st); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	d.Close()
	for _, n := range []string{"a", "d"} {
		noAuditCached(t, filepath.Join(dir, n+".lhc"))
	}
}

// noAuditCached fails if the local host cache file holds an audit entry (or nothing).
func noAuditCached(t *testing.T, file string) {
	t.Helper()
	db, err := bbolt.Open(file, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cached := 0
	db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, bk *bbolt.Bucket) error {
			return bk.ForEach(func(k, _ []byte) error {
				if strings.Contains(string(k), "audit/") {
					t.Errorf("the local host cache %s holds %s", file, k)
				}
				cached++
				return nil
			})
		})
	})
	if cached == 0 {
		t.Fatalf("the local host cache %s holds nothing: the check above checks nothing", file)
	}
}

// In an outage an entry is held: listed with the error that the log cannot be read, and
// written once etcd is back.
func TestAuditLogHoldsEntriesInAnOutage(t *testing.T) {
	c := cluster(t)
	a := openPlanned(t, c, "a", map[string]etcd.MachinePlan{"m": {Brokers: []string{"a"}, Max: 1}}, t.TempDir())
	t0 := time.Now()
	if err := a.Audit().AppendAudit(t.Context(), t0, "a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := c.StopMember(0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "outage mode", a.Outage().Active)
	if err := a.Audit().AppendAudit(t.Context(), t0.Add(time.Second), "a", []byte("during")); err != nil {
		t.Fatalf("an append in the outage: %v, want it held", err)
	}
	got, err := a.Audit().ListAudit(t.Context(), 10, time.Time{})
	if values(got) != "during" || !errors.Is(err, etcd.ErrOutage) {
		t.Fatalf("the list in the outage: %q, %v; want the held entry and ErrOutage", values(got), err)
	}
	if err := c.RestartMember(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the held entry written", func() bool {
		r, err := etcd.Client(a).Get(t.Context(), "/frontdoor/test/audit/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 2
	})
	got, err = a.Audit().ListAudit(t.Context(), 10, time.Time{})
	if values(got) != "during before" || err != nil {
		t.Fatalf("the list after the outage: %q, %v", values(got), err)
	}
}

// TrimAudit deletes the entries older than its time (the site's retention), whichever node
// wrote them, and no other.
func TestAuditLogTrimsPastItsRetention(t *testing.T) {
	c := cluster(t)
	a, b := open(t, c, "a"), open(t, c, "b")
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range 4 {
		st, node := a, "a"
		if i%2 == 1 {
			st, node = b, "b"
		}
		if err := st.Audit().AppendAudit(t.Context(), t0.Add(time.Duration(i)*time.Hour), node, []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := a.Audit().TrimAudit(t.Context(), t0.Add(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("TrimAudit = %d, %v; want the 2 older entries deleted", n, err)
	}
	if got, err := b.Audit().ListAudit(t.Context(), 100, time.Time{}); err != nil || values(got) != "e3 e2" {
		t.Fatalf("after the trim: %q, %v; want e3 e2", values(got), err)
	}
}
