//go:build linux

// Package sockaddr turns a netip.AddrPort into the address a socket system call takes, for
// the sockets the project makes itself instead of through package net.
package sockaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

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
