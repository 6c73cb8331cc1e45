//go:build linux && (amd64 || arm64)

package proxy

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// A failed poller stops the server: connections end, new ones are refused, Serve returns
// the poller's error, and no goroutine waits on for readiness that would never come.
func TestTCPPollFailureStopsTheServer(t *testing.T) {
	b := startTCP(t, echo)
	s, err := New(Config{
		Listeners: []Listener{tcpListener("l", "p")},
		Pools:     []Pool{onePool("p", b.addr())},
	}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	errc := listenAndServe(t, s)
	t.Cleanup(func() { s.Close() })
	addr := s.Addr("l")

	busy := dial(t, addr) // has moved bytes, now waits for more both ways
	busy.Write([]byte("hi\n"))
	if got := readLine(t, busy); got != "hi" {
		t.Fatalf("echo: got %q", got)
	}
	silent := dial(t, addr) // has sent nothing yet
	time.Sleep(20 * time.Millisecond)

	injected := errors.New("injected epoll failure")
	s.pollFailed(injected)

	select {
	case err := <-errc:
		if !errors.Is(err, injected) {
			t.Fatalf("Serve returned %v; want the poller's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running 10s after its poller failed")
	}
	expectClosed(t, busy)
	expectClosed(t, silent)
	expectRefused(t, addr)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs after the poller failed")
	}
}
