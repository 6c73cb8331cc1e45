package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// ends records what Follow tells.
type ends struct {
	mu    sync.Mutex
	ended []string
	held  []string
}

func (e *ends) End(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, s)
}
func (e *ends) RevokeBefore(string, time.Time) {}
func (e *ends) Held() []string                 { e.mu.Lock(); defer e.mu.Unlock(); return slices.Clone(e.held) }
func (e *ends) got() []string                  { e.mu.Lock(); defer e.mu.Unlock(); return slices.Clone(e.ended) }

// An agent that finds another front door's feed than it read last (it failed over) cannot
// trust its position there: it asks which sessions live and ends the others it holds.
func TestFollowReconcilesWhenTheFeedChanges(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/agent/ended":
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			feed := "door-a"
			if n > 1 {
				feed = "door-b" // the agent's requests now reach another front door
			}
			if n > 3 {
				<-r.Context().Done() // nothing more to tell
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"feed": feed, "seq": 7, "sessions": []string{}})
		case "/v1/agent/live":
			json.NewEncoder(w).Encode(map[string][]string{"sessions": {"s-live"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	rep := NewReporter("vda-1", "tok", []FrontDoor{{Node: "fd", URL: srv.URL}}, tc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e := &ends{held: []string{"s-live", "s-gone"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rep.Follow(ctx, e) }()
	for !slices.Contains(e.got(), "s-gone") {
		if ctx.Err() != nil {
			t.Fatalf("the agent did not end the session the site no longer holds; ended %v", e.got())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if slices.Contains(e.got(), "s-live") {
		t.Fatalf("the agent ended a live session: %v", e.got())
	}
}
