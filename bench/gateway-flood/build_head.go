//go:build linux && !floodbase

package main

import "github.com/frontdoor-vdi/frontdoor/gateway"

// plainUDP turns on the gateway's plain UDP ports, off by default since 59da5da (the -base
// build of the code before c42a390 has no such option: see build_base.go).
func plainUDP(o *gateway.Options) { o.PlainUDP = true }
