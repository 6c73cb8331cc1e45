//go:build linux && (amd64 || arm64)

package rawio

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

func TestPutRawFromRawRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		ap     netip.AddrPort
		family int
		want   netip.AddrPort
	}{
		{netip.MustParseAddrPort("192.0.2.7:4172"), unix.AF_INET, netip.MustParseAddrPort("192.0.2.7:4172")},
		{netip.MustParseAddrPort("[2001:db8::7]:65535"), unix.AF_INET6, netip.MustParseAddrPort("[2001:db8::7]:65535")},
		{netip.MustParseAddrPort("192.0.2.7:1"), unix.AF_INET6, netip.MustParseAddrPort("[::ffff:192.0.2.7]:1")},
	} {
		var sa unix.RawSockaddrInet6
		n := PutRaw(&sa, tt.ap, tt.family)
		got, ok := FromRaw(&sa)
		if !ok || got != tt.want {
			t.Errorf("PutRaw(%v) then FromRaw = %v, %v; want %v", tt.ap, got, ok, tt.want)
		}
		if want := uint32(unix.SizeofSockaddrInet4); tt.family == unix.AF_INET && n != want {
			t.Errorf("length %d for IPv4, want %d", n, want)
		}
	}
}

func TestRawKeepsTheZone(t *testing.T) {
	var sa unix.RawSockaddrInet6
	fam, n, err := Raw(netip.MustParseAddrPort("[fe80::1%7]:4172"), &sa)
	if err != nil || fam != unix.AF_INET6 || n != unix.SizeofSockaddrInet6 || sa.Scope_id != 7 {
		t.Fatalf("Raw of a zoned address: family %d, length %d, scope %d, %v", fam, n, sa.Scope_id, err)
	}
	if got, _ := FromRaw(&sa); got != netip.MustParseAddrPort("[fe80::1]:4172") {
		t.Fatalf("FromRaw = %v", got)
	}
	fam, _, err = Raw(netip.MustParseAddrPort("[::ffff:192.0.2.7]:443"), &sa)
	if got, _ := FromRaw(&sa); err != nil || fam != unix.AF_INET || got != netip.MustParseAddrPort("192.0.2.7:443") {
		t.Fatalf("Raw of an IPv4-mapped address: family %d, %v, %v", fam, got, err)
	}
}
