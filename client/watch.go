package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// Watcher is a VNC viewer on the session's desktop, as a user's would be: it keeps one
// desktop stream open, asks for updates as fast as they come, types a key now and then, and
// records what it sees — how long the picture stood still at most, and, on the builtin
// desktop, what the desktop draws. Drills and tests use it to see a failure as a user does.
type Watcher struct {
	c      net.Conn
	v      *rfb.Client
	cancel context.CancelFunc
	done   chan struct{}
	keys   string // typed in turn, cyclically
	now    func() time.Time

	mu    sync.Mutex // guards st, typed, last
	st    WatchStats
	typed []byte
	last  time.Time // the last update
}

// WatchStats are what a Watcher saw.
type WatchStats struct {
	Updates      int64         // framebuffer updates received
	Bytes        int64         // their bytes
	LongestStall time.Duration // the longest time between two updates
	Keys         int           // keys typed
	Lines        []string      // what the builtin desktop drew last (machine, session, path...)
	// KeysOutOfOrder counts the times the builtin desktop's keys line showed the keys typed
	// with one missing, doubled or out of order: a byte lost or duplicated on the way up.
	KeysOutOfOrder int
	Err            error // why the viewer's connection ended; nil while it is open
}

// watchKeys are the keys a Watcher types, in turn: the builtin desktop shows the last ones,
// so a key lost, doubled or reordered on the way shows.
const watchKeys = "0123456789abcdefghijklmnopqrstuvwxyz"

// Watch opens a viewer on the session's desktop (a stream of its own) that types a key every
// keyEvery (0: none) until Close. Its VNC handshake ends by ctx's deadline, or in 10 s
// without one.
func (s *Session) Watch(ctx context.Context, keyEvery time.Duration) (*Watcher, error) {
	dk := s.Desktop()
	if dk.Speaks() != "vnc" {
		return nil, fmt.Errorf("watching a %s desktop: only VNC desktops can be watched", dk.Protocol)
	}
	c, err := s.Attach(ctx, dk.Channel.Port)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	c.SetDeadline(deadline)
	v, err := rfb.NewClient(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the desktop's VNC handshake: %w", err)
	}
	c.SetDeadline(time.Time{})
	wctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{c: c, v: v, cancel: cancel, done: make(chan struct{}), keys: watchKeys, now: s.now, last: s.now()}
	if err := v.RequestAll(false); err != nil {
		c.Close()
		cancel()
		return nil, err
	}
	go w.read()
	if keyEvery > 0 {
		go w.type_(wctx, keyEvery)
	}
	return w, nil
}

// read takes the desktop's updates and asks for the next, until the connection ends.
func (w *Watcher) read() {
	defer close(w.done)
	var lastText time.Time
	for {
		m, err := w.v.ReadMessage()
		if err != nil {
			w.mu.Lock()
			w.st.Err = err
			w.mu.Unlock()
			return
		}
		if m.Type != rfb.MsgFramebufferUpdate {
			continue
		}
		now := w.now()
		w.mu.Lock()
		w.st.Updates++
		w.st.Bytes += m.Bytes
		w.st.LongestStall = max(w.st.LongestStall, now.Sub(w.last))
		w.last = now
		w.mu.Unlock()
		if now.Sub(lastText) > 200*time.Millisecond && strings.HasPrefix(w.v.Name(), "frontdoor ") {
			lines := desktop.ReadText(w.v.Framebuffer())
			w.mu.Lock()
			w.st.Lines = lines
			if !inTurn(WatchStats{Lines: lines}.Line("keys: ")) {
				w.st.KeysOutOfOrder++
			}
			w.mu.Unlock()
			lastText = now
		}
		if err := w.v.RequestAll(true); err != nil {
			w.mu.Lock()
			w.st.Err = err
			w.mu.Unlock()
			return
		}
	}
}

// type_ types the next key every period.
func (w *Watcher) type_(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-t.C:
		}
		k := w.keys[i%len(w.keys)]
		w.mu.Lock()
		w.typed = append(w.typed, k)
		w.st.Keys++
		w.mu.Unlock()
		if w.v.Key(uint32(k), true) != nil || w.v.Key(uint32(k), false) != nil {
			return
		}
	}
}

// Stats returns what the viewer saw so far. The current stall counts too: a picture that
// stands still now is a stall already.
func (w *Watcher) Stats() WatchStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	if st.Err == nil {
		st.LongestStall = max(st.LongestStall, w.now().Sub(w.last))
	}
	st.Lines = append([]string(nil), st.Lines...)
	return st
}

// ResetStall starts counting the longest stall afresh (after a viewer's start-up, say).
func (w *Watcher) ResetStall() {
	w.mu.Lock()
	w.st.LongestStall = 0
	w.mu.Unlock()
}

// Line returns the builtin desktop's line that starts with prefix ("session ", "path "),
// without the prefix, or "".
func (st WatchStats) Line(prefix string) string {
	for _, l := range st.Lines {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return ""
}

// inTurn reports whether shown holds watchKeys in their cyclic order, none missing or
// doubled.
func inTurn(shown string) bool {
	for i := 1; i < len(shown); i++ {
		a := strings.IndexByte(watchKeys, shown[i-1])
		if a < 0 || watchKeys[(a+1)%len(watchKeys)] != shown[i] {
			return false
		}
	}
	return true
}

// ErrKeysDiffer is returned by CheckKeys when the desktop shows other keys than were typed.
var ErrKeysDiffer = errors.New("the desktop shows other keys than were typed")

// CheckKeys waits (within ctx) until the builtin desktop's keys line shows the last keys
// typed, in order: every key reached the desktop once. It stops typing first.
func (w *Watcher) CheckKeys(ctx context.Context) error {
	w.cancel()
	var got string
	for {
		w.mu.Lock()
		typed, lines, err := string(w.typed), w.st.Lines, w.st.Err
		w.mu.Unlock()
		got = WatchStats{Lines: lines}.Line("keys: ")
		if err != nil {
			return fmt.Errorf("the viewer's connection ended: %w", err)
		}
		if typed == "" {
			return nil
		}
		if got != "" && strings.HasSuffix(typed, got) && len(got) >= min(len(typed), 20) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: typed ...%q, shown %q", ErrKeysDiffer, typed[max(0, len(typed)-len(got)-5):], got)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close closes the viewer's connection and waits for its reader.
func (w *Watcher) Close() error {
	w.cancel()
	err := w.c.Close()
	<-w.done
	return err
}
