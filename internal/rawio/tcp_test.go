//go:build linux && (amd64 || arm64)

package rawio

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAcceptedSocketsInheritTheListenersOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		wantKA    int
		wantIdle  int
	}{
		{name: "without keepalive only nodelay is on", keepAlive: 0, wantKA: 0},
		{name: "with keepalive the probes start after its interval", keepAlive: 30 * time.Second, wantKA: 1, wantIdle: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ListenTCP(testPoll(t), loopback, tc.keepAlive, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(l.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, peer, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fd := s.fd
			if want := c.LocalAddr().(*net.TCPAddr).AddrPort(); peer != want {
				t.Errorf("peer %v, want %v", peer, want)
			}
			get := func(level, opt int) int {
				t.Helper()
				v, err := unix.GetsockoptInt(fd, level, opt)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			if got := get(unix.IPPROTO_TCP, unix.TCP_NODELAY); got == 0 {
				t.Errorf("TCP_NODELAY off")
			}
			if got := get(unix.SOL_SOCKET, unix.SO_KEEPALIVE); got != tc.wantKA {
				t.Errorf("SO_KEEPALIVE %d, want %d", got, tc.wantKA)
			}
			if tc.wantKA == 1 {
				if got := get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); got != tc.wantIdle {
					t.Errorf("TCP_KEEPIDLE %d, want %d", got, tc.wantIdle)
				}
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			if err != nil || flags&unix.O_NONBLOCK == 0 {
				t.Errorf("accepted socket is blocking (flags %#x, %v)", flags, err)
			}
		})
	}
}

func TestClosedListenerEndsTheAcceptWait(t *testing.T) {
	l, err := ListenTCP(testPoll(t), loopback, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.Accept()
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it wait; the test passes either way
	l.Close()
	select {
	case err := <-errc:
		if err != net.ErrClosed {
			t.Fatalf("got %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("accept still waiting after Close")
	}
}
