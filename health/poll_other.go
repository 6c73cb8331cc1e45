//go:build !linux

package health

import (
	"net/netip"
	"time"
)

// havePoller says whether NetProber runs tcp, hello and udp probes on a poller: only on
// Linux. Elsewhere every probe runs on package net.
const havePoller = false

type pollKind uint8

const (
	pollTCP pollKind = iota
	pollHello
	pollUDP
)

type poller struct{}

type pollOp struct{}

func (e *poller) start(pollKind, netip.AddrPort, []byte, []byte, time.Time, func(error)) *pollOp {
	panic("health: no poller on this system")
}

func (e *poller) cancel(*pollOp, error) {}
