//go:build linux && (amd64 || arm64)

package rawio

// Conversions between netip.AddrPort and the addresses socket system calls take and return.

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// From returns the socket family and address of ap. An IPv4-mapped IPv6 address is IPv4;
// an IPv6 zone names an interface (or is its index).
func From(ap netip.AddrPort) (int, unix.Sockaddr, error) {
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Addr: ip.As4(), Port: int(ap.Port())}, nil
	}
	sa := &unix.SockaddrInet6{Addr: ip.As16(), Port: int(ap.Port())}
	if z := ip.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		} else if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else {
			return 0, nil, fmt.Errorf("address %s: %w", ap, err)
		}
	}
	return unix.AF_INET6, sa, nil
}

// Raw writes ap into sa as the raw address of a system call, in ap's family (an IPv4-mapped
// address is IPv4; a zone names an interface or is its index), and returns the family and the
// length to give the kernel.
func Raw(ap netip.AddrPort, sa *unix.RawSockaddrInet6) (int, uint32, error) {
	family, usa, err := From(ap)
	if err != nil {
		return 0, 0, err
	}
	n := PutRaw(sa, ap, family)
	if a, ok := usa.(*unix.SockaddrInet6); ok {
		sa.Scope_id = a.ZoneId
	}
	return family, n, nil
}

// PutRaw writes ap into sa in the given family (an IPv4 address in AF_INET6 becomes
// IPv4-mapped) and returns the length to give the kernel. It does not allocate, for the
// per-datagram path; it leaves an IPv6 zone out.
func PutRaw(sa *unix.RawSockaddrInet6, ap netip.AddrPort, family int) uint32 {
	if family == unix.AF_INET {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().Unmap().As4()}
		putPort(&sa4.Port, ap.Port())
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	putPort(&sa.Port, ap.Port())
	return unix.SizeofSockaddrInet6
}

// FromRaw decodes the AF_INET or AF_INET6 address in sa (storage the kernel filled; an
// IPv4-mapped address stays mapped). ok is false for other families.
func FromRaw(sa *unix.RawSockaddrInet6) (ap netip.AddrPort, ok bool) {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port(&sa4.Port)), true
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port(&sa.Port)), true
	}
	return netip.AddrPort{}, false
}

// AddrPort decodes an IPv4 or IPv6 address that a call such as Getsockname returned (an
// IPv4-mapped address stays mapped); other families give the zero AddrPort.
func AddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// Unmap returns ap with an IPv4-mapped address as IPv4.
func Unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}

func port(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}
