// Package acceptloop accepts connections from a listener in a loop that outlives transient
// failures: running out of file descriptors (EMFILE, ENFILE), a connection aborted before it
// was accepted, a timeout. A loop that returned on those would leave its socket open and
// listening while nothing accepts — a port that a TCP health check reads as up and that
// serves no one.
package acceptloop

import (
	"errors"
	"net"
	"time"
)

// The wait after a failed accept starts at first and doubles up to Max.
const (
	first = 5 * time.Millisecond
	// Max is the longest wait between two failed accepts.
	Max = time.Second
)

// Run accepts from l and calls serve (in the calling goroutine: start one per connection
// there) for each connection until l is closed, then returns nil; any other accept error is
// told to failed (optional), at most once a second, and retried after a backoff.
func Run(l net.Listener, serve func(net.Conn), failed func(error)) error {
	var backoff time.Duration
	var told time.Time
	for {
		c, err := l.Accept()
		if err == nil {
			backoff = 0
			serve(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if failed != nil && time.Since(told) >= time.Second {
			failed(err)
			told = time.Now()
		}
		backoff = min(max(2*backoff, first), Max)
		time.Sleep(backoff)
	}
}
