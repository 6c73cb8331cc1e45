//go:build !(linux && (amd64 || arm64))

// Package rawudp is a blocking UDP socket outside the Go poller for one worker, on 64-bit
// Linux only; elsewhere callers use sockets of the net package.
package rawudp

import "net/netip"

// Supported says whether this platform has blocking workers (64-bit Linux).
const Supported = false

// Usable reports whether a socket for ap would be a blocking one: never here.
func Usable(netip.AddrPort) bool { return false }
