package acceptloop

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Listener wraps l so that an Accept that fails (but for l being closed) returns only after a
// backoff that starts at 5 ms and doubles up to Max: for the accept loops of libraries that
// retry at once (miekg/dns retries a temporary error without a pause, which at the
// open-files limit spins a CPU and starves the rest of the process).
func Listener(l net.Listener) net.Listener { return &backoff{Listener: l} }

type backoff struct {
	net.Listener
	mu   sync.Mutex // guards wait
	wait time.Duration
}

func (b *backoff) Accept() (net.Conn, error) {
	c, err := b.Listener.Accept()
	b.mu.Lock()
	if err == nil {
		b.wait = 0
		b.mu.Unlock()
		return c, nil
	}
	if errors.Is(err, net.ErrClosed) {
		b.mu.Unlock()
		return nil, err
	}
	b.wait = min(max(2*b.wait, first), Max)
	w := b.wait
	b.mu.Unlock()
	time.Sleep(w)
	return nil, err
}
