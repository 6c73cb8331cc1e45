//go:build linux

package sockaddr

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFrom(t *testing.T) {
	fam, sa, err := From(netip.MustParseAddrPort("[::ffff:192.0.2.7]:443"))
	if s4, ok := sa.(*unix.SockaddrInet4); err != nil || fam != unix.AF_INET || !ok || s4.Addr != [4]byte{192, 0, 2, 7} || s4.Port != 443 {
		t.Fatalf("IPv4-mapped: %d %#v %v", fam, sa, err)
	}
	fam, sa, err = From(netip.MustParseAddrPort("[fe80::1%7]:4172"))
	if s6, ok := sa.(*unix.SockaddrInet6); err != nil || fam != unix.AF_INET6 || !ok || s6.ZoneId != 7 || s6.Port != 4172 {
		t.Fatalf("zoned IPv6: %d %#v %v", fam, sa, err)
	}
	if _, _, err := From(netip.MustParseAddrPort("[fe80::1%no-such-if0]:1")); err == nil {
		t.Fatal("an unknown interface gave no error")
	}
}
