package connlimit

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// serve starts a TLS server of h behind a Listener with o on 127.0.0.1, wired as a program
// wires it (ConnState, ConnContext, Handler), and returns it and its listener.
func serve(t *testing.T, o Options, h http.Handler) (*httptest.Server, *Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, o)
	srv := httptest.NewUnstartedServer(l.Handler(h))
	srv.Listener = l
	srv.Config.ConnState = l.ConnState
	srv.Config.ConnContext = l.ConnContext
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, l
}

// dialFrom opens a TLS connection to srv from the loopback address src.
func dialFrom(t *testing.T, srv *httptest.Server, src string) *tls.Conn {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := tls.DialWithDialer(d, "tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bodyless sends a POST's headers with a Content-Length of 100 and no body.
func bodyless(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

// clientFrom is an HTTP client whose connections come from the loopback address src.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
}

// readsBody is a handler that reads the body whole and answers how many bytes it got, or
// 400 with the read's error.
var readsBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d bytes", len(b))
})

// The attack of the review's H1: requests whose headers arrive and whose body never does
// held every place of the listener for the server's whole ReadTimeout, and Accept blocked.
// While their handlers wait for a body, their connections count as waiting: a new client
// takes the place of the oldest of them.
func TestBodylessRequestsHoldNoPlace(t *testing.T) {
	srv, l := serve(t, Options{Max: 8, BodyTimeout: time.Minute}, readsBody)
	for i := range 8 {
		c := dialFrom(t, srv, fmt.Sprintf("127.0.3.%d", i+1))
		bodyless(t, c)
	}
	testkit.WaitFor(t, "the bodyless requests to wait for their bodies", func() bool {
		st := l.Stats()
		return st.Open == 8 && st.Waiting == 8
	})
	resp, err := clientFrom("127.0.4.1").Post(srv.URL, "application/json", strings.NewReader(`{"user":"honest"}`))
	if err != nil {
		t.Fatalf("an honest request while the listener is full of bodyless ones: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "17 bytes" {
		t.Fatalf("honest request: %d %q, want 200 \"17 bytes\"", resp.StatusCode, got)
	}
	if st := l.Stats(); st.Shed == 0 {
		t.Fatalf("stats %+v: want a bodyless request's connection shed for the honest one", st)
	}
}

// A body that does not arrive within BodyTimeout fails the handler's read, and the
// connection closes: its place is given back without waiting for anything else.
func TestBodyTimeout(t *testing.T) {
	srv, l := serve(t, Options{Max: 8, BodyTimeout: 100 * time.Millisecond}, readsBody)
	c := dialFrom(t, srv, "127.0.3.1")
	bodyless(t, c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to a request whose body never came: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "timeout") {
		t.Fatalf("answer %d %q, want 400 with the read's timeout", resp.StatusCode, got)
	}
	testkit.WaitFor(t, "the connection to be closed", func() bool { return l.Stats().Open == 0 })
}

// A request refused before its body is read (no login) is answered at once and its
// connection closed, rather than read on for a body nobody wants.
func TestAnswerBeforeTheBodyCloses(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "authentication required", http.StatusUnauthorized)
	})
	srv, _ := serve(t, Options{Max: 8, BodyTimeout: time.Hour}, refuse)
	c := dialFrom(t, srv, "127.0.3.1")
	bodyless(t, c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("answer %d, close %v: want 401 and the connection closed", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the answer the connection read %v, want EOF (closed, no wait for the body)", err)
	}
}

// RequestsPerSource bounds the requests one source has in flight; another source is not
// bounded by it, and a finished request frees its share.
func TestRequestsPerSource(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	})
	srv, l := serve(t, Options{Max: 64, RequestsPerSource: 2}, h)
	get := func(src string) chan int {
		out := make(chan int, 1)
		go func() {
			resp, err := clientFrom(src).Get(srv.URL)
			if err != nil {
				out <- -1
				return
			}
			resp.Body.Close()
			out <- resp.StatusCode
		}()
		return out
	}
	a, b := get("127.0.3.1"), get("127.0.3.1")
	<-entered
	<-entered
	if code := <-get("127.0.3.1"); code != http.StatusServiceUnavailable {
		t.Fatalf("a third request in flight from one source: %d, want 503", code)
	}
	other := get("127.0.3.2")
	<-entered
	close(release)
	for _, c := range []chan int{a, b, other} {
		if code := <-c; code != http.StatusOK {
			t.Fatalf("a request within the bounds: %d, want 200", code)
		}
	}
	if code := <-get("127.0.3.1"); code != http.StatusOK {
		t.Fatalf("after the source's requests ended: %d, want 200", code)
	}
	if st := l.Stats(); st.BusyRequests != 1 {
		t.Fatalf("stats %+v, want one busy request", st)
	}
}

// A request that waits its turn (Pace) holds no place: when the listener is full, its
// connection is closed for a new one and the waiter is told (gone).
func TestPacedRequestsHoldNoPlace(t *testing.T) {
	told, queued := make(chan struct{}, 8), make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/queue" {
			io.WriteString(w, "ok")
			return
		}
		done, gone := Pace(r.Context())
		defer done()
		queued <- struct{}{}
		select {
		case <-gone:
			told <- struct{}{}
		case <-r.Context().Done():
		}
	})
	srv, l := serve(t, Options{Max: 4}, h)
	for i := range 4 {
		c := dialFrom(t, srv, fmt.Sprintf("127.0.3.%d", i+1))
		io.WriteString(c, "GET /queue HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	for range 4 {
		<-queued
	}
	if st := l.Stats(); st.Open != 4 || st.Waiting != 4 {
		t.Fatalf("stats %+v, want 4 open, all queued", st)
	}
	resp, err := clientFrom("127.0.4.1").Get(srv.URL + "/now")
	if err != nil {
		t.Fatalf("a request while the listener is full of queued ones: %v", err)
	}
	resp.Body.Close()
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued request whose connection was closed was not told")
	}
}

// When the listener is full, a connection that waits for its client (its request, its
// body) gives its place before one whose request waits its turn at the server (a queued
// login): the queued one loses more.
func TestQueuedRequestsGoAfterStalledOnes(t *testing.T) {
	queued := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done, gone := Pace(r.Context())
		defer done()
		queued <- struct{}{}
		select {
		case <-gone:
		case <-r.Context().Done():
		}
	})
	srv, l := serve(t, Options{Max: 2}, h)
	q := dialFrom(t, srv, "127.0.3.1")
	io.WriteString(q, "GET /queue HTTP/1.1\r\nHost: x\r\n\r\n")
	<-queued
	stalled := dialFrom(t, srv, "127.0.3.2") // handshake done, no request
	testkit.WaitFor(t, "both to wait", func() bool { return l.Stats().Waiting == 2 })
	dialFrom(t, srv, "127.0.3.3") // takes a place: the stalled one's
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the stalled connection read %v, want it closed first", err)
	}
	q.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := q.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the queued connection read %v: closed before the stalled one", err)
	}
}

// Pace outside a Handler's request does nothing.
func TestPaceOutsideHandler(t *testing.T) {
	done, gone := Pace(t.Context())
	done()
	if gone != nil {
		t.Fatal("gone is not nil outside a Handler")
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
