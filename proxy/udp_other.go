//go:build !(linux && (amd64 || arm64))

package proxy

import (
	"net/netip"

	"golang.org/x/net/ipv4"
)

// rawSocket is Linux-only (udp_linux.go); elsewhere UDP listeners use the net package.
type rawSocket struct{}

func listenRaw(netip.AddrPort, int) (*rawSocket, error) { return nil, nil }

func (*rawSocket) Local() netip.AddrPort                    { return netip.AddrPort{} }
func (*rawSocket) Close() error                             { return nil }
func (*Server) rawReadLoop(*listener)                       {}
func (*udpListener) sendRaw(netip.AddrPort, []ipv4.Message) {}
