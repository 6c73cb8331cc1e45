//go:build linux && floodbase

package main

// The plain target's -base build (-tags floodbase), against the gateway code before c42a390:
// its gateway.Options have no PlainUDP (its UDP ports relay plain UDP, to an agent whose UDP
// display ports echo plain UDP), and it has no QUIC port of this form, so the QUIC target is
// not in it (quic.go and initial.go are left out).

import (
	"errors"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/gateway"
)

func plainUDP(*gateway.Options) {}

const quicTarget = false

var errNoQUIC = errors.New("the QUIC target is not in this build (floodbase)")

func runQUICGateway(dir, profile string) error { return errNoQUIC }

func runQUICClient(dir string, gw netip.AddrPort, port uint16, tok string, size int, interval, lossAfter, warm, dur time.Duration) {
	printLine("RESULT", flowResult{Err: errNoQUIC.Error()})
}

type quicFloodResult struct {
	Err string `json:"err,omitempty"`
}

func runQUICFlood(gw netip.AddrPort, rate int, dur time.Duration) quicFloodResult {
	return quicFloodResult{Err: errNoQUIC.Error()}
}

func dropSink() (string, func(), error) { return "", nil, errNoQUIC }
