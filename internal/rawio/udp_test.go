//go:build linux && (amd64 || arm64)

package rawio

import (
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenAndDial returns a Conn on loopback and a client socket connected to it; both are
// closed when the test ends.
func listenAndDial(t *testing.T) (*Sock, *net.UDPConn) {
	t.Helper()
	c, err := ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(c.Local()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl
}

// TestBatchEcho reads a batch from a Conn and answers each datagram to its sender with one
// sendmmsg, on real loopback sockets.
func TestBatchEcho(t *testing.T) {
	c, cl := listenAndDial(t)
	const n = 8
	for i := range n {
		cl.Write([]byte{byte(i)})
	}
	var (
		bufs  [n][16]byte
		names [n]unix.RawSockaddrInet6
		iovs  [n]syscall.Iovec
		hdrs  [n]Mmsghdr
	)
	for i := range hdrs {
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&names[i]))
		hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.Iovlen = 1
	}
	got := 0
	for got < n {
		var k int
		var errno syscall.Errno
		c.RawConn().Control(func(fd uintptr) { k, errno = Recvmmsg(fd, hdrs[got:], unix.MSG_WAITFORONE) })
		if errno != 0 {
			t.Fatalf("recvmmsg: %v", errno)
		}
		got += k
	}
	for i := range n {
		if p, ok := FromRaw(&names[i]); !ok || p != netip.MustParseAddrPort(cl.LocalAddr().String()) {
			t.Fatalf("datagram %d from %v, want %v", i, p, cl.LocalAddr())
		}
		iovs[i].SetLen(int(hdrs[i].N))
	}
	var sent int
	c.RawConn().Control(func(fd uintptr) { sent, _ = Sendmmsg(fd, hdrs[:], unix.MSG_DONTWAIT) })
	if sent != n {
		t.Fatalf("sendmmsg sent %d, want %d", sent, n)
	}
	b := make([]byte, 16)
	for i := range n {
		if k, err := cl.Read(b); err != nil || k != 1 || b[0] != byte(i) {
			t.Fatalf("echo %d: %v %v", i, b[:k], err)
		}
	}
}

// TestReceiverReadsBurstsAndStops reads bursts through a Receiver that pauses after partial
// batches, including a burst larger than a batch and an oversized datagram, and returns from
// Next once stop is set.
func TestReceiverReadsBurstsAndStops(t *testing.T) {
	c, cl := listenAndDial(t)
	r := NewReceiver(c, 4, 8, time.Millisecond)
	var stop atomic.Bool
	next := 0
	for burst := range 3 {
		for range 6 {
			cl.Write([]byte{byte(next)})
			next++
		}
		cl.Write(make([]byte, 9)) // one byte over the Receiver's size
		for got, bad := 0, 0; got+bad < 7; {
			n, err := r.Next(&stop)
			if err != nil || n == 0 {
				t.Fatalf("burst %d: Next = %d, %v", burst, n, err)
			}
			for i := range n {
				data, from, over := r.Datagram(i)
				if over {
					bad++
					continue
				}
				if want := byte(burst*6 + got); len(data) != 1 || data[0] != want || from != netip.MustParseAddrPort(cl.LocalAddr().String()) {
					t.Fatalf("datagram %v from %v, want [%d] from %v", data, from, want, cl.LocalAddr())
				}
				got++
			}
		}
	}
	// A Next waiting for a datagram returns once stop is set (within the receive timeout).
	done := make(chan struct{})
	go func() {
		r.Next(&stop)
		close(done)
	}()
	time.Sleep(30 * time.Millisecond)
	stop.Store(true)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after stop")
	}
}

// TestReceiverReturnsAfterClose: a Next waiting in the kernel returns 0, nil after the Conn is
// closed without stop being set, and so does every later Next.
func TestReceiverReturnsAfterClose(t *testing.T) {
	c, err := ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReceiver(c, 4, 64, 0)
	var stop atomic.Bool
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.Next(&stop)
		done <- result{n, err}
	}()
	time.Sleep(30 * time.Millisecond)
	c.Close()
	select {
	case got := <-done:
		if got.n != 0 || got.err != nil {
			t.Fatalf("Next after Close = %d, %v; want 0, nil", got.n, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after Close")
	}
	if n, err := r.Next(&stop); n != 0 || err != nil {
		t.Fatalf("a later Next = %d, %v; want 0, nil", n, err)
	}
}
