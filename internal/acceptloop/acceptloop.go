// Package acceptloop accepts connections from a listener in a loop that outlives transient
// failures: running out of file descriptors (EMFILE, ENFILE), a connection aborted before it
// was accepted, a timeout. A loop that returned on those would leave its socket open and
// listening while nothing accepts — a port that a TCP health check reads as up and that
// serves no one. A Loop also tells whether it can accept (Stalled), so that its server's own
// health check can read down while it cannot.
package acceptloop

import (
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// The wait after a failed accept starts at first and doubles up to Max.
const (
	first = 5 * time.Millisecond
	// Max is the longest wait between two failed accepts.
	Max = time.Second
	// Stale is how long a loop reads stalled after its last failed accept: a loop that goes
	// on failing retries within Max, and one that no longer fails (no connection waits) has
	// nothing to say either way.
	Stale = 2 * Max
)

// Loop accepts from a listener (Run) and remembers whether it can (Stalled).
type Loop struct {
	// Serve is called for each connection, in the loop's goroutine: start one per
	// connection there. Required.
	Serve func(net.Conn)
	// Failed is told of failed accepts, at most once a second. Default: nil.
	Failed func(error)

	// stalled is when an accept last failed for want of descriptors or memory, in Unix
	// nanoseconds; 0 once one succeeded since.
	stalled atomic.Int64
	now     func() time.Time // time.Now; tests set it before Run
}

// Run accepts from l and calls serve (in the calling goroutine: start one per connection
// there) for each connection until l is closed, then returns nil; any other accept error is
// told to failed (optional), at most once a second, and retried after a backoff.
func Run(l net.Listener, serve func(net.Conn), failed func(error)) error {
	return (&Loop{Serve: serve, Failed: failed}).Run(l)
}

// Run accepts from l until l is closed, then returns nil; any other accept error is told to
// Failed, at most once a second, and retried after a backoff. Run once at a time.
func (lp *Loop) Run(l net.Listener) error {
	var backoff time.Duration
	var told time.Time
	for {
		c, err := l.Accept()
		if err == nil {
			backoff = 0
			lp.stalled.Store(0)
			lp.Serve(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if exhausted(err) {
			lp.stalled.Store(lp.clock().UnixNano())
		}
		if lp.Failed != nil && time.Since(told) >= time.Second {
			lp.Failed(err)
			told = time.Now()
		}
		backoff = min(max(2*backoff, first), Max)
		time.Sleep(backoff)
	}
}

// Stalled reports whether the loop cannot accept: its last accept failed for want of
// descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM), less than Stale ago, and none
// succeeded since. Other failures (a connection aborted before it was accepted) say nothing
// of the next connection and do not count.
func (lp *Loop) Stalled() bool {
	at := lp.stalled.Load()
	return at != 0 && lp.clock().Sub(time.Unix(0, at)) < Stale
}

func (lp *Loop) clock() time.Time {
	if lp.now != nil {
		return lp.now()
	}
	return time.Now()
}
