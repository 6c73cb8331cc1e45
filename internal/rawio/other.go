//go:build !(linux && (amd64 || arm64))

package rawio

import "net/netip"

// Supported says whether this platform has the raw layer (64-bit Linux).
const Supported = false

// Usable reports whether a UDP socket for ap would be a blocking Sock: never here.
func Usable(netip.AddrPort) bool { return false }
