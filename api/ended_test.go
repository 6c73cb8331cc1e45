package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// GET /v1/agent/ended tells a machine's agent of its sessions that ended: at once when there
// are some after the position it asks from, else when the next one ends; never another
// machine's, and nothing without the machine's token.
func TestEndedFeedTellsTheMachineOfItsSessions(t *testing.T) {
	key := []byte("agent-key-for-the-test")
	cfg := &configs.Config{Machines: []configs.Machine{{Name: "vda-1", Zone: "hq"}, {Name: "vda-2", Zone: "hq"}}}
	a := NewAgents(AgentsOptions{Config: cfg, Key: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	get := func(query, token string) (int, EndedNews) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/agent/ended?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		var n EndedNews
		json.Unmarshal(rec.Body.Bytes(), &n)
		return rec.Code, n
	}
	tok := AgentToken(key, "vda-1")
	if code, _ := get("machine=vda-1", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401", code)
	}
	code, start := get("machine=vda-1", tok)
	if code != http.StatusOK || len(start.Sessions) != 0 {
		t.Fatalf("the position: %d %+v", code, start)
	}
	a.Ended("s-2", "vda-2")
	a.Ended("s-1", "vda-1")
	_, n := get("machine=vda-1&after=0", tok)
	if len(n.Sessions) != 1 || n.Sessions[0] != "s-1" || n.Seq != 2 {
		t.Fatalf("after 0: %+v, want s-1 alone at seq 2", n)
	}
	// Nothing new: the request waits for the next end of this machine's.
	done := make(chan EndedNews, 1)
	go func() { _, n := get("machine=vda-1&after=2", tok); done <- n }()
	a.Ended("s-3", "vda-2") // another machine's: the wait goes on
	a.Ended("s-4", "vda-1")
	select {
	case n := <-done:
		if len(n.Sessions) != 1 || n.Sessions[0] != "s-4" || n.Seq != 4 {
			t.Fatalf("the wait: %+v, want s-4 at seq 4", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end when the machine's session ended")
	}
	// A position past the feed's (the front door restarted) says that ends may be lost.
	if _, n := get("machine=vda-1&after=99", tok); !n.Lost {
		t.Fatalf("after a position the feed never had: %+v, want lost", n)
	}
	// A machine's agent away for longer than the feed keeps is told that ends were lost;
	// another machine's ends never crowd its own out.
	for i := range 2 * endedKeep {
		a.Ended(fmt.Sprint("gone-", i), "vda-1")
	}
	if _, n := get("machine=vda-1&after=4", tok); !n.Lost || len(n.Sessions) < endedKeep || n.Sessions[len(n.Sessions)-1] != fmt.Sprint("gone-", 2*endedKeep-1) {
		t.Fatalf("after a long absence: lost %v, %d sessions; want lost and at least the last %d", n.Lost, len(n.Sessions), endedKeep)
	}
	if _, n := get("machine=vda-2&after=0", AgentToken(key, "vda-2")); n.Lost || len(n.Sessions) != 2 {
		t.Fatalf("vda-2 after vda-1's many ends: %+v, want its two, none lost", n)
	}
	if code, _ := get("machine=vda-1&after=x", tok); code != http.StatusBadRequest {
		t.Fatalf("a bad position: %d, want 400", code)
	}
}
