//go:build linux

package main

// The client of the established flow and the flood, each its own process.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// printLine prints "PREFIX {json}" for the orchestrator.
func printLine(prefix string, v any) {
	b, _ := json.Marshal(v)
	fmt.Printf("%s %s\n", prefix, b)
}

// mark tells the orchestrator where a phase starts or ends.
func mark(s string) { fmt.Println(s) }

// commands runs handlers for the lines read from stdin (the orchestrator) and returns at
// end of input: every child ends with its orchestrator.
func commands(handlers map[string]func()) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if h := handlers[sc.Text()]; h != nil {
			h()
		}
	}
}

// flowResult is what the client of the established flow reports.
type flowResult struct {
	Sent    int     `json:"sent"`
	Echoed  int     `json:"echoed"`
	Lost    int     `json:"lost"`  // no echo within the loss timeout
	Stale   int     `json:"stale"` // echoes of earlier datagrams, come after their timeout
	Seconds float64 `json:"seconds"`
	// Round trips in µs over every datagram sent in the window; a lost one counts as
	// infinitely late (math.Inf encoded as -1).
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
	Err    string  `json:"err,omitempty"`
}

// echoConn is the flow's client end: one datagram out, one back by a deadline.
type echoConn interface {
	send(b []byte) error
	recv(buf []byte, deadline time.Time) (int, error)
}

// udpEcho is the plain target's flow: a connected UDP socket.
type udpEcho struct{ c *net.UDPConn }

func (u udpEcho) send(b []byte) error { _, err := u.c.Write(b); return err }
func (u udpEcho) recv(buf []byte, deadline time.Time) (int, error) {
	u.c.SetReadDeadline(deadline)
	return u.c.Read(buf)
}

// runClient opens the flow with a launch ticket (waiting for ticket.UDPReady), then echoes
// as measureEcho does.
func runClient(gw netip.AddrPort, tok string, size int, interval, lossAfter, warm, dur time.Duration) flowResult {
	var r flowResult
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(clientIP, 0)), net.UDPAddrFromAddrPort(gw))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer c.Close()
	buf := make([]byte, 2048)
	open := false
	for try := 0; try < 10 && !open; try++ { // a first datagram may be lost: sent again, 10 times at most
		c.Write(ticket.Datagram(tok))
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		open = err == nil && string(buf[:n]) == ticket.UDPReady
	}
	if !open {
		r.Err = "the flow did not open: no " + ticket.UDPReady + " in 10 tries"
		return r
	}
	measureEcho(udpEcho{c}, &r, size, interval, lossAfter, warm, dur)
	return r
}

// measureEcho prints OPEN, waits for GO on stdin, then echoes size-byte datagrams over the
// open flow l one at a time, one every interval at most: warm unmeasured, then dur measured
// between START and END. A datagram not echoed within lossAfter is lost and the next one goes.
func measureEcho(l echoConn, r *flowResult, size int, interval, lossAfter, warm, dur time.Duration) {
	buf := make([]byte, 2048)
	mark("OPEN")
	gotGo := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "GO" {
				close(gotGo)
				break
			}
		}
		for sc.Scan() {
		}
		os.Exit(0) // the orchestrator is gone
	}()
	select {
	case <-gotGo:
	case <-time.After(60 * time.Second):
		r.Err = "no GO within 60s"
		return
	}

	size = max(size, 8)
	msg := make([]byte, size)
	var seq uint64
	// one sends a datagram and waits for its echo; it returns the round trip, or -1 if lost.
	one := func() time.Duration {
		seq++
		binary.LittleEndian.PutUint64(msg, seq)
		t := time.Now()
		l.send(msg)
		for {
			n, err := l.recv(buf, t.Add(lossAfter))
			if err != nil {
				return -1
			}
			if n == size && bytes.Equal(buf[:n], msg) {
				return time.Since(t)
			}
			r.Stale++
		}
	}
	run := func(d time.Duration, rec func(time.Duration)) time.Duration {
		t0 := time.Now()
		next := t0
		limit := int(d/interval) + 1 // bounded in count as well as in time
		for i := 0; i < limit && time.Since(t0) < d; i++ {
			if w := time.Until(next); w > 0 {
				time.Sleep(w)
			}
			rec(one())
			next = next.Add(interval)
			if now := time.Now(); next.Before(now) {
				next = now // no burst to catch up after a loss
			}
		}
		return time.Since(t0)
	}
	run(warm, func(time.Duration) {})
	r.Stale = 0
	rtts := make([]float64, 0, int(dur/interval)+1)
	mark("START")
	el := run(dur, func(d time.Duration) {
		if d < 0 {
			rtts = append(rtts, math.Inf(1))
			r.Lost++
			return
		}
		rtts = append(rtts, float64(d)/1e3)
	})
	mark("END")
	r.Seconds = el.Seconds()
	r.Sent = len(rtts)
	r.Echoed = r.Sent - r.Lost
	slices.Sort(rtts)
	q := func(p float64) float64 {
		if len(rtts) == 0 {
			return 0
		}
		v := rtts[min(len(rtts)-1, int(math.Ceil(p*float64(len(rtts))))-1)]
		if math.IsInf(v, 1) {
			return -1
		}
		return v
	}
	r.P50us, r.P99us, r.P999us, r.MaxUs = q(0.50), q(0.99), q(0.999), q(1)
}

// floodResult is what the flood process reports.
type floodResult struct {
	Sent    int64   `json:"sent"`
	Errors  int64   `json:"errors"`
	Seconds float64 `json:"seconds"`
	Bytes   int     `json:"bytes"`
	Err     string  `json:"err,omitempty"`
}

// runFlood sends the forged ticket's datagram to gw at rate per second for dur (and never more
// than rate×dur of them), round robin over sockets sockets of 127.0.70.1, each with its own
// source port. It paces by the clock every millisecond and answers STATS with its count.
func runFlood(gw netip.AddrPort, forged string, rate, sockets int, dur time.Duration) floodResult {
	var r floodResult
	payload := ticket.Datagram(forged)
	r.Bytes = len(payload)
	conns := make([]*net.UDPConn, 0, sockets)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range sockets {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(floodIP, 0)), net.UDPAddrFromAddrPort(gw))
		if err != nil {
			r.Err = err.Error()
			return r
		}
		conns = append(conns, c)
	}
	if len(conns) == 0 {
		r.Err = "no sockets"
		return r
	}
	var sent atomic.Int64
	go func() {
		commands(map[string]func(){"STATS": func() { printLine("STATS", map[string]int64{"sent": sent.Load()}) }})
		os.Exit(0)
	}()
	total := int64(float64(rate) * dur.Seconds())
	mark("START")
	t0 := time.Now()
	var n int64
	for n < total {
		el := time.Since(t0)
		if el >= dur {
			break
		}
		due := min(total, int64(float64(rate)*el.Seconds())+1)
		for burst := 0; n < due && burst < 2000; burst++ { // a late tick catches up by 2,000 at most
			if _, err := conns[n%int64(len(conns))].Write(payload); err != nil {
				r.Errors++
			}
			n++
			sent.Store(n)
		}
		time.Sleep(time.Millisecond)
	}
	r.Sent, r.Seconds = n, time.Since(t0).Seconds()
	mark("END")
	return r
}
