package xdesk

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestXvncOnUnixSocketGreets(t *testing.T) {
	need(t, "Xvnc")
	t.Parallel()
	ctx := testContext(t)
	x := startXvnc(t, ctx, XvncOptions{Width: 640, Height: 480})
	if x.Network() != "unix" || filepath.Base(x.Address()) != "vnc.sock" {
		t.Fatalf("got %s %s, want unix .../vnc.sock", x.Network(), x.Address())
	}
	if !strings.HasPrefix(x.Display(), ":") {
		t.Errorf("got display %q, want :N", x.Display())
	}
	c, greeting := greet(t, ctx, x)
	c.Close()
	if want := "RFB 003.008\n"; greeting != want {
		t.Errorf("got greeting %q, want %q", greeting, want)
	}
}

// greet connects to x and returns the connection (deadline 10 s) and x's greeting.
func greet(t *testing.T, ctx context.Context, x *Xvnc) (net.Conn, string) {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(ctx, x.Network(), x.Address())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(c, greeting); err != nil {
		c.Close()
		t.Fatalf("reading the greeting: %v", err)
	}
	return c, string(greeting)
}

func TestXvncOnTCPPortSnapshots(t *testing.T) {
	need(t, "Xvnc", "xterm", "vncsnapshot")
	t.Parallel()
	ctx := testContext(t)
	x := startXvnc(t, ctx, XvncOptions{Width: 640, Height: 480, TCPPort: AnyPort, Xterm: true})
	if host, _, err := net.SplitHostPort(x.Address()); x.Network() != "tcp" || err != nil || host != "127.0.0.1" {
		t.Fatalf("got %s %s, want tcp 127.0.0.1:PORT", x.Network(), x.Address())
	}
	out := filepath.Join(t.TempDir(), "desktop.jpg")
	if err := VNCSnapshot(ctx, x.Address(), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}) {
		t.Errorf("got %d bytes starting % x, want a JPEG (ff d8 ff)", len(b), b[:min(len(b), 3)])
	}
}

func TestXvncCloseStopsEverything(t *testing.T) {
	need(t, "Xvnc", "xterm")
	t.Parallel()
	ctx := testContext(t)
	x := startXvnc(t, ctx, XvncOptions{Xterm: true})
	if err := x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !x.server.exited() || !x.term.exited() {
		t.Errorf("after Close: Xvnc exited %v, xterm exited %v; want both", x.server.exited(), x.term.exited())
	}
	if c, err := net.Dial(x.Network(), x.Address()); err == nil {
		c.Close()
		t.Errorf("after Close, %s still accepts", x.Address())
	}
}

func TestXvncStopsWhenItsContextEnds(t *testing.T) {
	need(t, "Xvnc")
	t.Parallel()
	ctx, cancel := context.WithCancel(testContext(t))
	x := startXvnc(t, ctx, XvncOptions{})
	cancel()
	select {
	case <-x.server.done:
	case <-time.After(testWithin):
		t.Fatal("Xvnc still runs after its context ended")
	}
}

func TestStartXvncFailsWithoutDir(t *testing.T) {
	t.Parallel()
	if _, err := StartXvnc(context.Background(), XvncOptions{}); err == nil {
		t.Error("got no error, want one for the missing directory")
	}
}

// An agent checks its desktop server by connecting and closing, again and again: the Xvnc
// still offers a viewer its security types after many such checks (TigerVNC's blacklist
// would refuse it, "Too many security failures", after 5).
func TestXvncTakesAViewerAfterManyChecks(t *testing.T) {
	need(t, "Xvnc")
	t.Parallel()
	ctx := testContext(t)
	x := startXvnc(t, ctx, XvncOptions{Width: 640, Height: 480})
	for range 20 {
		// Each check waits for the greeting: a small backlog would refuse a burst.
		c, _ := greet(t, ctx, x)
		c.Close()
	}
	c, greeting := greet(t, ctx, x)
	defer c.Close()
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil {
		t.Fatal(err)
	}
	// RFB 3.8: the number of security types, then the types; 0 types is a refusal, whose
	// reason follows.
	types := make([]byte, 2)
	if _, err := io.ReadFull(c, types); err != nil {
		t.Fatalf("reading the security types: %v", err)
	}
	if greeting != "RFB 003.008\n" || types[0] != 1 || types[1] != 1 {
		t.Fatalf("after 20 checks the server greets %q and offers % x, want RFB 003.008 and one type, None (01 01)", greeting, types)
	}
}
