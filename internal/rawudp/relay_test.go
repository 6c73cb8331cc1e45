//go:build linux && (amd64 || arm64)

package rawudp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDialEpollRelay is the relay of a proxy's flow on real loopback sockets: a Dial'ed Conn
// sends to a backend with a Sender, an Epoll reports the backend's answers, ReadFrom reads
// them without waiting, and a Sender on a listening Conn passes them to a client.
func TestDialEpollRelay(t *testing.T) {
	backend, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	flow, err := Dial(backend.LocalAddr().(*net.UDPAddr).AddrPort(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer flow.Close()
	if !flow.Local().Addr().IsLoopback() || flow.Local().Port() == 0 {
		t.Fatalf("Dial's local address %v, want a loopback address and port", flow.Local())
	}
	ep, err := NewEpoll(8)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	const id = 1<<40 | 7 // both halves of the event's data must survive
	if err := ep.Add(flow, id); err != nil {
		t.Fatal(err)
	}

	out := NewSender(4, false) // fewer headers than datagrams: Send needs several calls
	msgs := [][]byte{[]byte("a"), []byte("bb"), []byte("ccc"), []byte("dddd"), []byte("eeeee"), []byte("ffffff")}
	if err := out.Send(flow, netip.AddrPort{}, msgs); err != nil {
		t.Fatalf("Send to the connected peer: %v", err)
	}
	buf := make([]byte, 64)
	for i, want := range msgs {
		backend.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := backend.ReadFromUDPAddrPort(buf)
		if err != nil || !bytes.Equal(buf[:n], want) || from != flow.Local() {
			t.Fatalf("backend datagram %d = %q from %v, %v; want %q from %v", i, buf[:n], from, err, want, flow.Local())
		}
		backend.WriteToUDPAddrPort(bytes.ToUpper(want), from)
	}

	var stop atomic.Bool
	in := NewReceiver(nil, 4, 16, 0)
	var got [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(got) < len(msgs) && time.Now().Before(deadline); {
		n, err := ep.Wait(&stop)
		if err != nil || n != 1 || ep.ID(0) != id {
			t.Fatalf("Wait = %d, %v, id %#x; want 1 ready Conn with id %#x", n, err, ep.ID(0), uint64(id))
		}
		k, err := in.ReadFrom(flow)
		if err != nil || k > 4 {
			t.Fatalf("ReadFrom = %d, %v; want up to 4 datagrams", k, err)
		}
		for i := range k {
			data, from, bad := in.Datagram(i)
			if bad || from != backend.LocalAddr().(*net.UDPAddr).AddrPort() {
				t.Fatalf("datagram from %v (bad %v), want from the backend", from, bad)
			}
			got = append(got, bytes.Clone(data))
		}
	}
	for i, want := range msgs {
		if i >= len(got) || !bytes.Equal(got[i], bytes.ToUpper(want)) {
			t.Fatalf("relayed %q, want the backend's answers in order", got)
		}
	}
	if k, err := in.ReadFrom(flow); k != 0 || err != nil {
		t.Fatalf("ReadFrom on an empty socket = %d, %v; want 0, nil", k, err)
	}

	// The answers leave from a listening Conn to a client, as a proxy's replies do.
	lc, client := listenAndDial(t)
	if err := out.Send(lc, client.LocalAddr().(*net.UDPAddr).AddrPort(), got); err != nil {
		t.Fatalf("Send to a named peer: %v", err)
	}
	for i, want := range got {
		client.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := client.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], want) {
			t.Fatalf("client datagram %d = %q, %v; want %q", i, buf[:n], err, want)
		}
	}

	// A backend that is gone: the ICMP port unreachable surfaces as the flow's error.
	backend.Close()
	var gotErr error
	for deadline := time.Now().Add(2 * time.Second); gotErr == nil && time.Now().Before(deadline); {
		if err := out.Send(flow, netip.AddrPort{}, msgs[:1]); err != nil {
			gotErr = err
			break
		}
		if n, err := ep.Wait(&stop); err == nil && n == 1 {
			_, gotErr = in.ReadFrom(flow)
		}
	}
	if !errors.Is(gotErr, syscall.ECONNREFUSED) {
		t.Fatalf("error after the backend closed = %v, want ECONNREFUSED", gotErr)
	}

	flow.Close()
	if _, err := in.ReadFrom(flow); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadFrom after Close = %v, want net.ErrClosed", err)
	}
	if err := out.Send(flow, netip.AddrPort{}, msgs[:1]); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Send after Close = %v, want net.ErrClosed", err)
	}
	stop.Store(true)
	if n, err := ep.Wait(&stop); n != 0 || err != nil {
		t.Fatalf("Wait after stop = %d, %v; want 0, nil", n, err)
	}
}

// TestEpollWaitEndsAtStop checks that a Wait on a quiet set returns soon after stop is set.
func TestEpollWaitEndsAtStop(t *testing.T) {
	ep, err := NewEpoll(1)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		n, err := ep.Wait(&stop)
		if n != 0 {
			err = errors.New("a Conn reported ready in an empty set")
		}
		done <- err
	}()
	time.Sleep(3 * RcvTimeout)
	stop.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after stop")
	}
}

// TestSenderKeepsDatagramBoundaries sends datagrams of mixed sizes with and without
// segmentation offload, to a named peer and to a connected one: the receiver must get each
// datagram whole and in order, whatever runs the Sender made of them.
func TestSenderKeepsDatagramBoundaries(t *testing.T) {
	var sizes []int
	sizes = append(sizes, 100, 100, 100, 50, 100, 100, 0, 200, 200, 7, 300, 1)
	for range 60 {
		sizes = append(sizes, 1200) // more bytes than one offloaded datagram may carry
	}
	for range 70 {
		sizes = append(sizes, 64) // more segments than one offloaded datagram may carry
	}
	sizes = append(sizes, 63, 64, 65)
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = bytes.Repeat([]byte{byte(i)}, n)
	}
	// The runs: one size, a shorter one ends a run, a longer one starts the next, and a run
	// stops at the byte and segment limits.
	s := NewSender(len(bufs), true)
	h, m := s.fill(bufs, nil, 0)
	if want := []int{4, 2, 1, 3, 2, 54, 7, 64, 6, 1, 1}; m != len(bufs) || !slices.Equal(s.runs[:h], want) {
		t.Errorf("runs %v carrying %d datagrams, want %v carrying %d", s.runs[:h], m, want, len(bufs))
	}
	for _, gso := range []bool{false, true} {
		for _, connected := range []bool{false, true} {
			rcv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			rcv.SetReadBuffer(4 << 20)
			to := rcv.LocalAddr().(*net.UDPAddr).AddrPort()
			var c *Conn
			if connected {
				c, err = Dial(to, 1<<20)
				to = netip.AddrPort{}
			} else {
				c, err = Listen(netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
			}
			if err != nil {
				t.Fatal(err)
			}
			s := NewSender(16, gso)
			if err := s.Send(c, to, bufs); err != nil {
				t.Fatalf("gso %v, connected %v: Send: %v", gso, connected, err)
			}
			buf := make([]byte, 70000)
			for i, want := range bufs {
				rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, err := rcv.Read(buf)
				if err != nil || !bytes.Equal(buf[:n], want) {
					t.Fatalf("gso %v, connected %v: datagram %d is %d bytes (%v), want %d bytes of %d", gso, connected, i, n, err, len(want), i)
				}
			}
			if gso && !s.GSO() {
				t.Logf("this kernel refused segmentation offload; the datagrams went one by one")
			}
			c.Close()
			rcv.Close()
		}
	}
}
