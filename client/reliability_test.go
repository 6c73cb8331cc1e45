package client

import (
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

var errFakePathChange = errors.New("the path changed")

// hashingServer is a desktop server that sends each connection n pseudo-random bytes and
// hashes what it sends and what it reads, so that a test compares both ends of a stream.
type hashingServer struct {
	ln   net.Listener
	n    int
	sums chan [2][32]byte // sent, received: one per connection
}

func startHashingServer(t *testing.T, n int) *hashingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hashingServer{ln: ln, n: n, sums: make(chan [2][32]byte, 4)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return h
}

func (h *hashingServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	sent := make(chan [32]byte, 1)
	go func() {
		hw := sha256.New()
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 32<<10)
		for left := h.n; left > 0; {
			b := buf[:min(left, len(buf))]
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if _, err := c.Write(b); err != nil {
				break
			}
			hw.Write(b)
			left -= len(b)
		}
		c.(*net.TCPConn).CloseWrite()
		var s [32]byte
		copy(s[:], hw.Sum(nil))
		sent <- s
	}()
	hr := sha256.New()
	n, _ := io.Copy(hr, c)
	var got [32]byte
	copy(got[:], hr.Sum(nil))
	if s := <-sent; n > 0 { // not an agent's check that the server answers
		h.sums <- [2][32]byte{s, got}
	}
}

// A gateway that dies while a viewer downloads costs the viewer nothing: its connection stays
// open, the stream moves to the next gateway, and every byte arrives once, in order, both
// ways.
func TestADesktopStreamOutlivesItsGateway(t *testing.T) {
	for _, mode := range []string{ModeGateway, ModeDirect} {
		t.Run(mode, func(t *testing.T) {
			const down, up = 24 << 20, 3 << 20
			srv := startHashingServer(t, down)
			s := newSiteWith(t, &agent.Desktop{Protocol: "vnc", Network: "tcp", Address: srv.ln.Addr().String()})
			s.startGateway("gw-a", gwA)
			s.startGateway("gw-b", gwB)
			ev := newEvents()
			sess := s.open(t, s.descriptor("s-rel-"+mode, mode, "gw-a", "gw-b"), ev, nil)
			ev.wait(t, EventUp)
			addr, err := sess.Expose("127.0.0.1:0", s.port)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			upSum := make(chan [32]byte, 1)
			go func() {
				rng := rand.New(rand.NewPCG(3, 4))
				hw := sha256.New()
				buf := make([]byte, 16<<10)
				for left := up; left > 0; left -= len(buf) {
					for i := range buf {
						buf[i] = byte(rng.Uint32())
					}
					c.Write(buf)
					hw.Write(buf)
				}
				var s [32]byte
				copy(s[:], hw.Sum(nil))
				upSum <- s
			}()
			hr := sha256.New()
			if _, err := io.CopyN(hr, c, down/4); err != nil {
				t.Fatalf("reading the first quarter: %v", err)
			}
			// The path breaks mid-stream: the gateway shuts down, or in direct mode the
			// stream's channel is cut as a path change would.
			if mode == ModeGateway {
				s.stops["gw-a"]()
			} else {
				sess.mu.Lock()
				l := sess.link
				sess.mu.Unlock()
				sess.fail(l, errFakePathChange)
			}
			back := ev.wait(t, EventBack)
			if !back.SameSession {
				t.Fatalf("back %+v, want the same session", back)
			}
			n, err := io.Copy(hr, c)
			if err != nil || n != down-down/4 {
				t.Fatalf("after the break the viewer read %d more bytes (%v), want %d and the end", n, err, down-down/4)
			}
			// The viewer's end: everything it wrote, then its end of the stream.
			want := <-upSum
			c.(*net.TCPConn).CloseWrite()
			var sums [2][32]byte
			select {
			case sums = <-srv.sums:
			case <-time.After(30 * time.Second):
				t.Fatal("the desktop server never saw the end of the stream")
			}
			var got [32]byte
			copy(got[:], hr.Sum(nil))
			if got != sums[0] {
				t.Error("the viewer received other bytes than the desktop server sent")
			}
			if sums[1] != want {
				t.Error("the desktop server received other bytes than the viewer sent")
			}
		})
	}
}

// A viewer typing on the builtin desktop through a gateway that shuts down keeps its
// connection: the desktop then shows the next gateway as the session's path, every key typed
// once and in order, and the same session.
func TestAViewerKeepsItsDesktopWhenItsGatewayGoes(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-watch", ModeGateway, "gw-a", "gw-b"), ev, nil)
	ev.wait(t, EventUp)
	w, err := sess.Watch(ctxT(t), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	testkit.WaitFor(t, "the desktop to show the path through gw-a", func() bool { return w.Stats().Line("path ") == "gw-a" })
	s.stops["gw-a"]()
	ev.wait(t, EventBack)
	testkit.WaitFor(t, "the desktop to show the path through gw-b", func() bool { return w.Stats().Line("path ") == "gw-b" })
	if err := w.CheckKeys(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Err != nil || st.Line("session ") != "s-watch" || st.KeysOutOfOrder != 0 {
		t.Fatalf("viewer: %+v; want its connection open on session s-watch", st)
	}
	t.Logf("viewer: %d updates, %d keys, longest stall %v", st.Updates, st.Keys, st.LongestStall)
}

// heldOn returns the current link's hold, if any.
func (s *Session) heldOn() *heldChannel {
	s.mu.Lock()
	l := s.link
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hold
}

// A session whose desktop has only a TCP channel, with no viewer connected, holds one idle
// channel at its gateway: the gateway counts it, so the session reads connected between
// viewers (before, it had no channel there and read disconnected, to expire after the
// disconnect timeout), and when the gateway goes the client learns it from that channel and
// comes back through the next at once, with no viewer to notice a break.
func TestATCPOnlySessionHoldsItsGatewayBetweenViewers(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	ev := newEvents()
	o := Options{Descriptor: s.descriptor("s-tcp", ModeGateway, "gw-a", "gw-b"), RootCAs: s.pool,
		Channels: []Channel{{Port: s.port, Proto: "tcp"}}, Logger: quiet, OnEvent: ev.on}
	sess, err := Open(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	if up := ev.wait(t, EventUp); up.Via != "gw-a" {
		t.Fatalf("up via %s, want gw-a", up.Via)
	}
	testkit.WaitFor(t, "gw-a to hold the session's idle channel", func() bool { return s.gws["gw-a"].Channels() == 1 })
	s.stops["gw-a"]()
	if back := ev.wait(t, EventBack); back.Via != "gw-b" || !back.SameSession {
		t.Fatalf("back %+v, want through gw-b, the same session", back)
	}
	testkit.WaitFor(t, "gw-b to hold the session's idle channel", func() bool { return s.gws["gw-b"].Channels() == 1 })
	// A viewer's stream keeps the session connected while it lasts: the idle channel goes
	// (a session holds no more channels for it), and comes back when the viewer leaves.
	c, err := sess.Attach(ctxT(t), s.port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rfb.NewClient(c); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the idle channel to go while the viewer's stream rides the link", func() bool {
		return s.gws["gw-b"].Channels() == 1 && sess.heldOn() == nil
	})
	c.Close()
	testkit.WaitFor(t, "the idle channel to come back once the viewer left", func() bool {
		return s.gws["gw-b"].Channels() == 1 && sess.heldOn() != nil
	})
}

// TestALateBreakOfAnOldTransportCutsNothing: a stream tells of its transport's break on a
// goroutine of its own, so on a busy machine the word may come after the session has
// resumed the stream on its next link. That late word must not cut the link the stream
// rides now.
func TestALateBreakOfAnOldTransportCutsNothing(t *testing.T) {
	s := newSite(t)
	s.startGateway("gw-a", gwA)
	s.startGateway("gw-b", gwB)
	ev := newEvents()
	sess := s.open(t, s.descriptor("s-late", ModeGateway, "gw-a", "gw-b"), ev, nil)
	ev.wait(t, EventUp)
	c, err := sess.Attach(ctxT(t), s.port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess.mu.Lock()
	l := sess.link
	var cs *cstream
	for x := range sess.streams {
		cs = x
	}
	sess.mu.Unlock()
	if cs == nil || l == nil {
		t.Fatal("no stream on a link")
	}
	sess.streamBroke(cs, errors.New("the transport the stream rode before"))
	if l.down.Load() {
		t.Fatal("a late break of a transport the stream had left cut the link it rides")
	}
}
