package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/store/bolt"
)

// The audit log lists entries newest first, with a limit and before a time, keeps two
// entries of one nanosecond, and survives a restart.
func TestAuditLogListsNewestFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fd.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := now()
	for i, at := range []time.Duration{0, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second} {
		if err := st.AppendAudit(ctx, t0.Add(at), "fd-1", []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	if st, err = bolt.Open(path, bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
		{"all of them, older than a later time", 100, t0.Add(time.Hour), "e4 e3 e2 e1 e0"},
		{"none older than the first", 100, t0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := st.ListAudit(ctx, c.limit, c.before)
			var vs []string
			for _, v := range got {
				vs = append(vs, string(v))
			}
			if err != nil || strings.Join(vs, " ") != c.want {
				t.Fatalf("ListAudit(%d, %v) = %q, %v; want %q", c.limit, c.before, vs, err, c.want)
			}
		})
	}
}

// TrimAudit deletes the entries older than its time (the site's retention) and no other.
func TestAuditLogTrimsPastItsRetention(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "fd.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := now()
	for i := range 5 {
		if err := st.AppendAudit(ctx, t0.Add(time.Duration(i)*time.Hour), "fd-1", []byte(fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := st.TrimAudit(ctx, t0.Add(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("TrimAudit = %d, %v; want the 2 older entries deleted", n, err)
	}
	got, _ := st.ListAudit(ctx, 100, time.Time{})
	var vs []string
	for _, v := range got {
		vs = append(vs, string(v))
	}
	if strings.Join(vs, " ") != "e4 e3 e2" {
		t.Fatalf("after the trim: %q, want e4 e3 e2", vs)
	}
	if n, err := st.TrimAudit(ctx, t0.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("the same trim again = %d, %v; want none", n, err)
	}
}
