// Package quicguard sheds a flood of new QUIC connections before it reaches quic-go. A QUIC
// listener's first line against forged Initials from spoofed addresses is the stateless Retry
// (RFC 9000 8.1.2), but each Retry still costs a token and an encrypted packet in user space:
// a flood of 100k Initials a second keeps a core busy and the established flows wait. A Guard
// counts the Initials without a token that reach quic-go (Note, from the Transport's
// VerifySourceAddress) and, past its budget, attaches a socket filter to the listener's socket
// that lets through only a random share of them (the kernel drops the rest, at no cost to the
// process); packets of established connections, and Initials that carry a token (the answer
// to a Retry), always pass. New clients may need a few more tries during a flood; the
// connections already up do not notice it. The filter is Linux's (SO_ATTACH_FILTER with
// classic BPF); elsewhere a Guard only counts.
package quicguard

import (
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Guard watches one QUIC socket. Use New, then Note from VerifySourceAddress; Close stops it.
type Guard struct {
	rc       syscall.RawConn
	onChange func(keep float64)
	budget   float64 // Initials without a token a second that quic-go sees at most
	seen     atomic.Int64
	done     chan struct{}
	stop     sync.Once
	stopped  chan struct{} // closed when run has returned
	keep     atomic.Uint64 // math.Float64bits of the share let through now; 1: no filter
}

// tick is how often a Guard looks at the rate.
const tick = 100 * time.Millisecond

// New watches the socket of rc, letting about budget Initials without a token a second reach
// quic-go; onChange (optional) is told of each new share let through, from the guard's
// goroutine.
func New(rc syscall.RawConn, budget float64, onChange func(keep float64)) *Guard {
	g := &Guard{rc: rc, budget: budget, onChange: onChange, done: make(chan struct{}), stopped: make(chan struct{})}
	g.keep.Store(math.Float64bits(1))
	go g.run()
	return g
}

// Note counts one Initial without a token that reached quic-go.
func (g *Guard) Note() { g.seen.Add(1) }

// Keep returns the share of Initials without a token let through now (1: all).
func (g *Guard) Keep() float64 { return math.Float64frombits(g.keep.Load()) }

// Close stops the guard and takes its filter off; it may be called again.
func (g *Guard) Close() {
	g.stop.Do(func() {
		close(g.done)
		<-g.stopped
		if g.Keep() < 1 {
			detach(g.rc)
		}
	})
}

func (g *Guard) run() {
	defer close(g.stopped)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
		}
		keep := g.Keep()
		rate := float64(g.seen.Swap(0)) / tick.Seconds()
		arriving := rate / keep // what the filter let through is keep of what came
		next := 1.0
		if arriving > g.budget {
			next = max(g.budget/arriving, 1.0/4096)
		}
		// Change the filter only when the share moves by more than half, or the flood ends.
		if next == keep || (next < 1 && keep < 1 && next > keep/1.5 && next < keep*1.5) {
			continue
		}
		var err error
		if next == 1 {
			err = detach(g.rc)
		} else {
			err = attach(g.rc, next)
		}
		if err == nil {
			g.keep.Store(math.Float64bits(next))
			if g.onChange != nil {
				g.onChange(next)
			}
		}
	}
}
