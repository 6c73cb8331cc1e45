package agent

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestRegisteredInThePrimaryZoneItStays follows seed 001: a satellite VDA whose own zone's
// controller fails registers in the primary zone, and stays there when its own zone's
// controller is back, until it restarts (a new Reporter).
func TestRegisteredInThePrimaryZoneItStays(t *testing.T) {
	var ownDown atomic.Bool
	var ownHits, primHits atomic.Int64
	own := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ownDown.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		ownHits.Add(1)
	}))
	defer own.Close()
	prim := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { primHits.Add(1) }))
	defer prim.Close()
	pool := x509.NewCertPool()
	pool.AddCert(own.Certificate())
	pool.AddCert(prim.Certificate())
	doors := []FrontDoor{{Node: "fd-east", Zone: "east", URL: own.URL}, {Node: "fd-hq", Zone: "hq", URL: prim.URL}}
	newRep := func() *Reporter {
		return NewReporter("m-east", "token", doors, &tls.Config{RootCAs: pool}, slog.New(slog.DiscardHandler))
	}
	r := newRep()
	beat := func() {
		t.Helper()
		if err := r.Heartbeat(t.Context(), 0, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	beat()
	if r.Current().Node != "fd-east" || ownHits.Load() != 1 {
		t.Fatalf("first registration with %s, want its own zone's fd-east", r.Current().Node)
	}
	ownDown.Store(true)
	beat()
	if r.Current().Node != "fd-hq" {
		t.Fatalf("own zone down: registered with %s, want the primary zone's fd-hq", r.Current().Node)
	}
	ownDown.Store(false)
	before := ownHits.Load()
	for range 3 {
		beat()
	}
	if r.Current().Node != "fd-hq" || ownHits.Load() != before {
		t.Fatalf("own zone back: registered with %s (%d reports there), want to stay in the primary zone", r.Current().Node, ownHits.Load()-before)
	}
	r = newRep() // the machine restarts
	beat()
	if r.Current().Node != "fd-east" {
		t.Fatalf("after a restart: registered with %s, want its own zone's fd-east again", r.Current().Node)
	}
}
