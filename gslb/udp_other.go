//go:build !(linux && (amd64 || arm64))

package gslb

import (
	"net/netip"
)

// rawUDP is Linux-only (udp_linux.go); elsewhere every loop uses a socket of the net package
// and the batch workers of golang.org/x/net.
type rawUDP struct{ local netip.AddrPort }

func listenRawUDP(string) (*rawUDP, error) { return nil, nil }

func (r *rawUDP) Local() netip.AddrPort       { return r.local }
func (r *rawUDP) Close() error                { return nil }
func (u *udpLoop) rawWorkers() []func() error { return nil }
