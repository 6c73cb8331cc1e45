//go:build linux && (amd64 || arm64)

package rawio

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	flow, err := DialUDP(backend.LocalAddr().(*net.UDPAddr).AddrPort(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer flow.Close()
	if !flow.Local().Addr().IsLoopback() || flow.Local().Port() == 0 {
		t.Fatalf("Dial's local address %v, want a loopback address and port", flow.Local())
	}
	ep, err := NewWorkerPoll(8)
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
	ep, err := NewWorkerPoll(1)
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
	// Senders of 16 and of all the datagrams: several calls, and runs as long as allowed.
	for _, tc := range []struct {
		gso bool
		n   int
	}{{false, 16}, {true, 16}, {true, len(bufs)}} {
		gso := tc.gso
		for _, connected := range []bool{false, true} {
			rcv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			rcv.SetReadBuffer(4 << 20)
			to := rcv.LocalAddr().(*net.UDPAddr).AddrPort()
			var c *Sock
			if connected {
				c, err = DialUDP(to, 1<<20)
				to = netip.AddrPort{}
			} else {
				c, err = ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
			}
			if err != nil {
				t.Fatal(err)
			}
			s := NewSender(tc.n, gso)
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
			// Loopback allows every run: a refusal here would be a malformed request.
			if gso && s.GSO() != gsoMaxBytes {
				t.Errorf("gso %v, connected %v: offload turned down to datagrams of %d bytes", gso, connected, s.GSO())
			}
			c.Close()
			rcv.Close()
		}
	}
}

// TestSenderOverASmallMTU: in a network namespace whose loopback has an MTU of 1500, a run of
// datagrams too large for one segment each is refused by the kernel; the Sender sends them
// again one by one (the kernel fragments them), so every one arrives whole, and it keeps
// making runs of datagrams that fit.
func TestSenderOverASmallMTU(t *testing.T) {
	errs := make(chan error, 1)
	go func() {
		// The thread stays in the namespace and ends with this goroutine.
		runtime.LockOSThread()
		errs <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("%w: %w", errNoNamespace, err)
			}
			if err := loopbackUp(1500); err != nil {
				return err
			}
			rcv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				return err
			}
			defer rcv.Close()
			rcv.SetReadBuffer(1 << 20)
			c, err := ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
			if err != nil {
				return err
			}
			defer c.Close()
			s := NewSender(64, true)
			to := rcv.LocalAddr().(*net.UDPAddr).AddrPort()
			buf := make([]byte, 4096)
			for _, size := range []int{2000, 1400} {
				bufs := make([][]byte, 8)
				for i := range bufs {
					bufs[i] = bytes.Repeat([]byte{byte(i)}, size)
				}
				if err := s.Send(c, to, bufs); err != nil {
					return fmt.Errorf("Send of %d-byte datagrams: %w", size, err)
				}
				for i, want := range bufs {
					rcv.SetReadDeadline(time.Now().Add(2 * time.Second))
					n, err := rcv.Read(buf)
					if err != nil || !bytes.Equal(buf[:n], want) {
						return fmt.Errorf("%d-byte datagram %d arrived as %d bytes (%v)", size, i, n, err)
					}
				}
			}
			if s.GSO() != 1999 {
				return fmt.Errorf("offload kept for datagrams up to %d bytes, want 1999 (below the refused 2000)", s.GSO())
			}
			return nil
		}()
	}()
	if err := <-errs; errors.Is(err, errNoNamespace) {
		t.Skipf("this test needs a network namespace of its own (CAP_SYS_ADMIN): %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

var errNoNamespace = errors.New("no network namespace")

// loopbackUp sets the MTU of this thread's network namespace's loopback and brings it up.
func loopbackUp(mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("setting lo's MTU: %w", err)
	}
	ifr, _ = unix.NewIfreq("lo")
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}
