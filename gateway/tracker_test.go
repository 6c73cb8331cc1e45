package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// slowSessions records reports in the order they complete; a Disconnected report waits for
// release, like a broker write that is slow under load.
type slowSessions struct {
	mu      sync.Mutex
	log     []string
	entered chan struct{}
	release chan struct{}
}

func (s *slowSessions) Active(string) bool { return true }

func (s *slowSessions) Connected(_ context.Context, id, gw string) { s.add("connected " + id) }

func (s *slowSessions) Disconnected(_ context.Context, id, gw string) {
	select {
	case s.entered <- struct{}{}:
		<-s.release
	default:
	}
	s.add("disconnected " + id)
}

func (s *slowSessions) add(ev string) {
	s.mu.Lock()
	s.log = append(s.log, ev)
	s.mu.Unlock()
}

func (s *slowSessions) last() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) == 0 {
		return "", 0
	}
	return s.log[len(s.log)-1], len(s.log)
}

// TestTrackerReportsInOrder: the last channel closes on one gateway and, while that report is
// still on its way, the client reopens through another. The broker must end up connected.
func TestTrackerReportsInOrder(t *testing.T) {
	// entered has room: the report blocks whether or not this test waits for it yet (with
	// none, a report that came first went on at once, and the test waited forever).
	s := &slowSessions{entered: make(chan struct{}, 1), release: make(chan struct{})}
	tr := NewTracker(s)
	tr.open("s-1", "gw-a")

	closed := make(chan struct{})
	go func() { tr.close("s-1", "gw-a"); close(closed) }()
	<-s.entered // the Disconnected report is under way

	reopened := make(chan struct{})
	go func() { tr.open("s-1", "gw-b"); close(reopened) }()
	// Give a reopen that does not wait for the report time to overtake it.
	select {
	case <-reopened:
	case <-time.After(100 * time.Millisecond):
	}
	close(s.release)
	<-closed
	<-reopened
	if ev, n := s.last(); ev != "connected s-1" || n != 3 {
		t.Fatalf("reports %v; want connected, disconnected, connected", s.log)
	}
	if n := tr.Open("s-1"); n != 1 {
		t.Fatalf("%d channels open, want 1", n)
	}
}

// TestTrackerCountsUnderContention opens and closes channels of a few sessions from many
// goroutines; afterwards every session's last report matches its count and no entry leaks.
func TestTrackerCountsUnderContention(t *testing.T) {
	s := &slowSessions{entered: make(chan struct{}), release: make(chan struct{})}
	tr := NewTracker(s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				id, gw := fmt.Sprintf("s-%d", i%3), fmt.Sprintf("gw-%d", g%2)
				tr.open(id, gw)
				tr.close(id, gw)
			}
		}()
	}
	wg.Wait()
	tr.open("s-0", "gw-0")
	tr.mu.Lock()
	n := len(tr.count)
	tr.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d sessions tracked, want 1", n)
	}
	if ev, _ := s.last(); ev != "connected s-0" {
		t.Fatalf("last report %q, want connected s-0", ev)
	}
	tr.close("s-0", "gw-0")
	if ev, _ := s.last(); ev != "disconnected s-0" {
		t.Fatalf("last report %q, want disconnected s-0", ev)
	}
}
