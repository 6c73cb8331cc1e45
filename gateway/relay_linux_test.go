//go:build linux && (amd64 || arm64)

package gateway

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// Between two TCP connections relay moves every byte, in order, in the kernel, and a
// direction that waits for its next bytes holds no pipe: thousands of idle sealed channels
// cost the gateway no descriptors beyond their sockets.
func TestRelaySplicesAndAnIdleDirectionHoldsNoPipe(t *testing.T) {
	in, src := tcpPair(t)
	dst, out := tcpPair(t)
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := relay(dst, src); done <- result{n, err} }()

	data := make([]byte, 8<<20)
	rand.Read(data)
	go func() {
		for b := data; len(b) > 0; {
			k := min(len(b), 1+int(b[0])*1024) // bursts of 1 B to 256 KiB
			in.Write(b[:k])
			b = b[k:]
		}
	}()
	got := make([]byte, len(data))
	out.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(out, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("relayed bytes differ (%v)", err)
	}
	// The direction is back to waiting on its source once its last pipe is given back.
	testkit.WaitFor(t, "the waiting direction to hold no pipe", func() bool { return pipesOut.Load() == 0 })
	in.CloseWrite()
	select {
	case r := <-done:
		if r.err != nil || r.n != int64(len(data)) {
			t.Fatalf("relay returned %d, %v; want %d, nil at the source's end", r.n, r.err, len(data))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("relay did not return at the source's end")
	}
}
