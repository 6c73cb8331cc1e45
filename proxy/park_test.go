//go:build linux && (amd64 || arm64)

package proxy

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testbuf"
)

func TestQuietConnectionsParkWithoutGoroutinesAndResume(t *testing.T) {
	be := startTCP(t, echo)
	var logs testbuf.Buffer
	l := tcpListener("l", "p")
	l.IdleTimeout = 300 * time.Millisecond
	s, err := New(Config{Listeners: []Listener{l}, Pools: []Pool{onePool("p", be.addr())}},
		Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	parked := make(chan struct{}, 16)
	s.parkAfter = 20 * time.Millisecond
	s.onPark = func() { parked <- struct{}{} }
	serveTest(t, s)
	c := dial(t, s.Addr("l"))
	for round := range 3 {
		// Both directions go quiet and park (their goroutines end)...
		for range 2 {
			select {
			case <-parked:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: a quiet direction did not park", round)
			}
		}
		// ...and bytes start them again.
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("round %d: echo %q, %v", round, buf, err)
		}
	}
	<-parked
	<-parked
	// Parked connections are ended by the expiry pass once idle for the timeout.
	time.Sleep(l.IdleTimeout)
	s.expire()
	expectClosed(t, c)
	s.Close()
	if line := logs.String(); !strings.Contains(line, "reason=idle") {
		t.Fatalf("access log %q lacks reason=idle", line)
	}
}
