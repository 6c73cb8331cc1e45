//go:build linux

package health

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// fullBacklog returns a TCP listener that never accepts and whose accept queue is full, so
// the kernel drops new SYNs: a powered-off host as far as a connect can tell.
func fullBacklog(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue: connects succeed until it is full, then time out.
	for i := range 8 {
		c, err := net.DialTimeout("tcp", ap.String(), 200*time.Millisecond)
		if err != nil {
			if i == 0 {
				t.Fatalf("first connect to the backlog listener: %v", err)
			}
			return ap
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the accept queue never filled")
	return ap
}
