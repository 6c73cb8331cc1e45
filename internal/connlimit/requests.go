package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connKey is the context key of a request's connection (ConnContext).
type connKey struct{}

// ConnContext remembers in ctx which of l's connections a request came on, for Handler and
// Pace: set it as the http.Server's ConnContext.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	if c, ok := nc.(*conn); ok && c.l == l {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Handler wraps the handler of the listener's server (which sets ConnContext) so that
// requests cost what a server must spend on them, not what a client chooses to hold:
//   - a source with RequestsPerSource requests in flight is answered 503 with Retry-After 1
//     (its connection closed), so that no source holds more than its share of handlers;
//   - a request's body must arrive whole within BodyTimeout, and while the handler waits
//     for it the connection counts as waiting (Pace): when the listener is full, it can be
//     closed for a new connection like one that stalls before its headers. A request sent
//     with headers and no body holds no place anybody needs;
//   - a response written before the body was read whole closes the connection after it
//     (HTTP/1), rather than reading on: a request refused (no login, throttled) costs no
//     wait for a body nobody reads.
func (l *Listener) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*conn)
		if c == nil || c.l != l {
			h.ServeHTTP(w, r)
			return
		}
		if !l.enter(c) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, "too many requests from this address at once; try again in a second", http.StatusServiceUnavailable)
			return
		}
		defer l.leave(c)
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(l.bodyTimeout))
			b := &body{ReadCloser: r.Body, rc: rc, done: l.pace(c)}
			defer b.end(false)
			r.Body = b
			if r.ProtoMajor == 1 {
				cw := &closeUnread{ResponseWriter: w, b: b}
				defer func() {
					if cw.closing {
						// The server reads what is left of a body before it closes
						// (up to 256 KiB): nothing will come that anybody reads.
						rc.SetReadDeadline(time.Now())
					}
				}()
				w = cw
			}
		}
		h.ServeHTTP(w, r)
	})
}

// enter counts a request of c in, or reports false when its source has as many in flight
// as it may.
func (l *Listener) enter(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.bounded && l.perSourceReqs > 0 && l.requests[c.src] >= l.perSourceReqs {
		l.counts.BusyRequests++
		return false
	}
	if c.bounded {
		l.requests[c.src]++
	}
	c.requests++
	l.placeLocked(c)
	return true
}

// leave counts a request of c out.
func (l *Listener) leave(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.bounded {
		if l.requests[c.src]--; l.requests[c.src] <= 0 {
			delete(l.requests, c.src)
		}
	}
	c.requests--
	l.placeLocked(c)
}

// pace counts a request of c as waiting for its body until the returned func is called
// (once; later calls do nothing).
func (l *Listener) pace(c *conn) (done func()) { return l.count(c, &c.pacing) }

// turn counts a request of c as waiting its turn until the returned func is called (once;
// later calls do nothing).
func (l *Listener) turn(c *conn) (done func()) { return l.count(c, &c.turns) }

// count adds one to n, a count of c's guarded by l.mu, and places c as it now waits, until
// the returned func takes it back.
func (l *Listener) count(c *conn, n *int) (done func()) {
	l.mu.Lock()
	*n++
	l.placeLocked(c)
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			*n--
			l.placeLocked(c)
			l.mu.Unlock()
		})
	}
}

// Pace says that the request of ctx (served through Handler) waits for something the
// server paces — a turn at a shared slot, a queue — until done is called: if all its
// connection's requests do, the connection may be closed for a new one when the listener is
// full — after every connection that waits for its client (a request, a body). gone is
// closed when the connection gives its place up (closed, or closed for a new one): the wait
// can end then, for nobody reads its answer.
// Outside Handler, done does nothing and gone is never closed.
func Pace(ctx context.Context) (done func(), gone <-chan struct{}) {
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		return func() {}, nil
	}
	return c.l.turn(c), c.gone
}

// body is a request's body under Handler: until it ends, the request counts as paced and
// its connection's read deadline is BodyTimeout away.
type body struct {
	io.ReadCloser
	rc   *http.ResponseController
	done func()
	mu   sync.Mutex // guards ended and whole
	// ended is set once the body was read to its end, failed or the handler returned;
	// whole once it was read to its end.
	ended, whole bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end(errors.Is(err, io.EOF))
	}
	return n, err
}

// end ends the paced wait for the body, once: read whole, the connection reads without a
// deadline again (the server sets its own at the next request).
func (b *body) end(whole bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended, b.whole = true, whole
	b.done()
	if whole {
		b.rc.SetReadDeadline(time.Time{})
	}
}

// unread reports whether the body has not been read whole.
func (b *body) unread() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.whole
}

// closeUnread is an HTTP/1 response writer that closes the connection after a response
// written while the request's body is unread.
type closeUnread struct {
	http.ResponseWriter
	b *body
	// wrote is set once the header is written; closing if it said Connection: close.
	wrote, closing bool
}

func (w *closeUnread) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.b.unread() {
			w.Header().Set("Connection", "close")
			w.closing = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the response (http.Flusher).
func (w *closeUnread) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the server's writer (http.ResponseController).
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }
