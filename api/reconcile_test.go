package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
)

// sessionsBroker is a Broker that holds sessions and records disconnects.
type sessionsBroker struct {
	Broker // the rest is not called here
	mu     sync.Mutex
	ss     []broker.Session
	gone   []string
}

func (b *sessionsBroker) SessionsOn(machine string) []broker.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []broker.Session
	for _, s := range b.ss {
		if s.Machine == machine {
			out = append(out, s)
		}
	}
	return out
}
func (b *sessionsBroker) ReportLoad(context.Context, string, int, int) error { return nil }
func (b *sessionsBroker) Disconnected(_ context.Context, id, _ string) (broker.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = append(b.gone, id)
	return broker.Session{}, nil
}

// A heartbeat that lists the machine's connected sessions makes the site mark disconnected a
// session it has held connected there for longer than the grace without a channel (its node
// died without a word); a session the machine carries, one just connected, one of another
// machine and one of an agent that tells nothing are left alone.
func TestHeartbeatReconcilesSessionsWithoutAChannel(t *testing.T) {
	key := []byte("agent-key")
	cfg := &configs.Config{Machines: []configs.Machine{{Name: "vda-1", Zone: "hq"}, {Name: "vda-2", Zone: "hq"}}}
	old := time.Now().Add(-time.Minute)
	b := &sessionsBroker{ss: []broker.Session{
		{ID: "orphan", Machine: "vda-1", State: broker.StateConnected, Changed: old},
		{ID: "carried", Machine: "vda-1", State: broker.StateConnected, Changed: old},
		{ID: "fresh", Machine: "vda-1", State: broker.StateConnected, Changed: time.Now()},
		{ID: "pending", Machine: "vda-1", State: broker.StatePending, Changed: old},
		{ID: "elsewhere", Machine: "vda-2", State: broker.StateConnected, Changed: old},
	}}
	a := NewAgents(AgentsOptions{Config: cfg, Broker: b, Key: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	beat := func(body string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/agent/heartbeat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+AgentToken(key, "vda-1"))
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("heartbeat: %d %s", rec.Code, rec.Body.String())
		}
	}
	beat(`{"machine": "vda-1", "sessions": 1}`) // tells nothing of its sessions
	if len(b.gone) != 0 {
		t.Fatalf("an agent that tells nothing: %v marked disconnected", b.gone)
	}
	beat(`{"machine": "vda-1", "sessions": 1, "connected": ["carried"]}`)
	if len(b.gone) != 1 || b.gone[0] != "orphan" {
		t.Fatalf("marked disconnected: %v, want the orphan alone", b.gone)
	}
}
