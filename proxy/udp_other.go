//go:build !(linux && (amd64 || arm64))

package proxy

import (
	"net/netip"
)

// rawSocket, rawEpoll and rawSender are Linux-only (udp_linux.go); elsewhere UDP listeners
// and flows use the net package.
type (
	rawSocket struct{}
	rawEpoll  struct{}
	rawSender struct{}
)

func listenRaw(netip.AddrPort, int) (*rawSocket, error) { return nil, nil }
func dialRaw(netip.AddrPort, int) (*rawSocket, error)   { return nil, nil }
func newRawEpoll(int) (*rawEpoll, error)                { return nil, nil }
func newRawSender(int) *rawSender                       { return nil }

func (*rawSocket) Local() netip.AddrPort                           { return netip.AddrPort{} }
func (*rawSocket) Close() error                                    { return nil }
func (*rawEpoll) Add(*rawSocket, uint64) error                     { return nil }
func (*rawEpoll) Remove(*rawSocket) error                          { return nil }
func (*rawEpoll) Close() error                                     { return nil }
func (*rawSender) Send(*rawSocket, netip.AddrPort, [][]byte) error { return nil }
func (*Server) rawReadLoop(*listener)                              {}
