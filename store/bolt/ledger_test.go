package bolt_test

import (
	"encoding/binary"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
)

// The ledger of a site of one node is in its bolt file: a use, a revocation and a supersede
// mark outlive a restart (finding L4 of the security review: they were in memory, so a
// restart reopened logged-off sessions' tickets and let a used launch ticket and one-time
// code be used again). A later revocation or mark only widens the one there; entries expire.
func TestLedgerOutlivesARestart(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "fd.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := st.Ledger(clk.Now)
	id := [16]byte{1, 2, 3}
	hour := clk.Now().Add(time.Hour)
	if fresh, err := l.Use(id, "8443/tcp", hour); err != nil || !fresh {
		t.Fatalf("a first use: %v, %v", fresh, err)
	}
	if fresh, _ := l.Use(id, "8443/tcp", hour); fresh {
		t.Fatal("a second use of a ticket's channel is fresh")
	}
	if fresh, _ := l.Use(id, "4172/udp", hour); !fresh {
		t.Fatal("the ticket's use of another channel is not fresh")
	}
	issued := clk.Now()
	if err := l.Revoke("s-1", issued, hour); err != nil {
		t.Fatal(err)
	}
	if err := l.Revoke("s-1", issued.Add(-time.Minute), hour.Add(-time.Minute)); err != nil { // narrower: widens nothing
		t.Fatal(err)
	}
	if err := l.Supersede("s-1", 7, hour); err != nil {
		t.Fatal(err)
	}
	l.Supersede("s-1", 5, hour)
	st.Close()

	if st, err = bolt.Open(path, bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l = st.Ledger(clk.Now)
	if fresh, _ := l.Use(id, "8443/tcp", hour); fresh {
		t.Fatal("after a restart a used ticket is fresh again")
	}
	if before, err := l.Revoked("s-1"); err != nil || !before.Equal(issued) {
		t.Fatalf("after a restart s-1 is revoked before %v, %v; want %v", before, err, issued)
	}
	if mark, err := l.Superseded("s-1"); err != nil || mark != 7 {
		t.Fatalf("after a restart s-1's mark is %d, %v; want 7", mark, err)
	}
	if before, _ := l.Revoked("s-2"); !before.IsZero() {
		t.Fatalf("s-2, never revoked, is revoked before %v", before)
	}
	clk.Advance(2 * time.Hour)
	if before, _ := l.Revoked("s-1"); !before.IsZero() {
		t.Fatal("a revocation outlived its until")
	}
	if fresh, _ := l.Use(id, "8443/tcp", clk.Now().Add(time.Hour)); !fresh {
		t.Fatal("a use outlived its until")
	}
}

// BenchmarkLedgerUse measures a channel admission's write to the ledger of a one-node site
// (each use fsynced, lone writes batched after at most a millisecond), one at a time and
// from many goroutines at once. `go test ./store/bolt -run '^$' -bench LedgerUse`.
func BenchmarkLedgerUse(b *testing.B) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "fd.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l := st.Ledger(nil)
	until := time.Now().Add(time.Hour)
	var n atomic.Uint64
	use := func() {
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], n.Add(1))
		if fresh, err := l.Use(id, "8443/tcp", until); err != nil || !fresh {
			b.Fatal(fresh, err)
		}
	}
	b.Run("one at a time", func(b *testing.B) {
		for b.Loop() {
			use()
		}
	})
	b.Run("64 at once", func(b *testing.B) {
		b.SetParallelism(32) // 64 goroutines on 2 CPUs
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				use()
			}
		})
	})
}
