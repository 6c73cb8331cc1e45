package connlimit

import (
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fakeConn is a connection from a given address that remembers whether it was closed.
type fakeConn struct {
	net.Conn // nil: only the methods below are called
	remote   net.Addr
	closed   atomic.Bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }

// fakeListener hands out the connections sent on conns; accepts counts its Accept calls.
type fakeListener struct {
	conns    chan net.Conn
	done     chan struct{}
	accepts  atomic.Int32
	closed   atomic.Bool
	entering chan struct{} // told of each Accept call, if not nil
}

func newFake() *fakeListener {
	return &fakeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.accepts.Add(1)
	if f.entering != nil {
		f.entering <- struct{}{}
	}
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *fakeListener) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		close(f.done)
	}
	return nil
}

func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }

func from(s string) *fakeConn {
	return &fakeConn{remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(s), 40000))}
}

// offer sends cs one by one to an Accept of l until it returns, and returns what it returned.
func offer(t *testing.T, l *Listener, f *fakeListener, cs ...*fakeConn) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			errc <- err
			return
		}
		got <- c
	}()
	for _, c := range cs {
		select {
		case f.conns <- c:
		case c := <-got:
			return c
		case err := <-errc:
			t.Fatalf("Accept: %v", err)
		}
	}
	select {
	case c := <-got:
		return c
	case err := <-errc:
		t.Fatalf("Accept: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Accept returned nothing")
	}
	return nil
}

// accept hands c to l and returns what Accept returned for it (c must be taken).
func accept(t *testing.T, l *Listener, f *fakeListener, c *fakeConn) net.Conn {
	t.Helper()
	got := offer(t, l, f, c)
	if got.(*conn).Conn != c {
		t.Fatalf("Accept returned %v, want the connection from %v", got.RemoteAddr(), c.remote)
	}
	if c.closed.Load() {
		t.Fatalf("the connection from %v was closed", c.remote)
	}
	return got
}

// refusedThenTaken offers refused (each must be closed at accept) then taken, which Accept
// must return.
func refusedThenTaken(t *testing.T, l *Listener, f *fakeListener, refused []*fakeConn, taken *fakeConn) net.Conn {
	t.Helper()
	got := offer(t, l, f, append(refused, taken)...)
	for _, c := range refused {
		if !c.closed.Load() {
			t.Errorf("the connection from %v past its source's bound was not closed", c.remote)
		}
	}
	if got.(*conn).Conn != taken {
		t.Fatalf("Accept returned the connection from %v, want %v", got.RemoteAddr(), taken.remote)
	}
	return got
}

// A source holds at most PerSource connections: the next is closed at accept and the
// listener goes on to the next source's; closing one gives its place back. An IPv6 source
// is its /64, an IPv4-mapped address its IPv4 address; exempt sources are not bounded.
func TestPerSourceBound(t *testing.T) {
	cases := []struct {
		name string
		// two connections from first fill its bound; the third from same is refused;
		// other is a source of its own.
		first, same, other string
	}{
		{"an IPv4 address", "192.0.2.1", "192.0.2.1", "192.0.2.2"},
		{"an IPv6 /64", "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:3::1"},
		{"an IPv4-mapped address as its IPv4 address", "::ffff:192.0.2.1", "192.0.2.1", "::ffff:192.0.2.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			l := New(f, Options{Max: 100, PerSource: 2})
			defer l.Close()
			a := accept(t, l, f, from(c.first))
			accept(t, l, f, from(c.same))
			refusedThenTaken(t, l, f, []*fakeConn{from(c.same), from(c.first)}, from(c.other))
			if st := l.Stats(); st.Open != 3 || st.Refused != 2 || st.Accepted != 3 {
				t.Errorf("stats %+v, want 3 open, 3 accepted, 2 refused", st)
			}
			a.Close()
			a.Close() // a second close gives nothing back twice
			accept(t, l, f, from(c.same))
			refusedThenTaken(t, l, f, []*fakeConn{from(c.first)}, from(c.other))
			if st := l.Stats(); st.Open != 4 {
				t.Errorf("open %d, want 4", st.Open)
			}
		})
	}
	t.Run("an exempt source", func(t *testing.T) {
		f := newFake()
		l := New(f, Options{Max: 100, PerSource: 1, Exempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
		defer l.Close()
		for range 5 {
			accept(t, l, f, from("10.1.2.3"))
		}
		accept(t, l, f, from("192.0.2.1"))
		refusedThenTaken(t, l, f, []*fakeConn{from("192.0.2.1")}, from("10.1.2.3"))
	})
	t.Run("no bound without PerSource", func(t *testing.T) {
		f := newFake()
		l := New(f, Options{Max: 100})
		defer l.Close()
		for range 5 {
			accept(t, l, f, from("192.0.2.1"))
		}
	})
}

// Once Max connections are open, a new one takes the place of the one that has waited
// longest for a request; a connection in a request is never closed; kept alive between two
// requests, it waits again, from then on. With every connection in a request, Accept waits
// for one to close or to wait again.
func TestFullListenerShedsTheOldestWaiting(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 3, PerSource: 10})
	defer l.Close()
	srv := &tls.Config{}
	a0, b0, c0 := from("192.0.2.1"), from("192.0.2.2"), from("192.0.2.3")
	a, b, c := accept(t, l, f, a0), accept(t, l, f, b0), accept(t, l, f, c0)
	// The server sees a and b through TLS, as http.Server does.
	l.ConnState(tls.Server(a, srv), http.StateNew)
	l.ConnState(tls.Server(a, srv), http.StateActive)
	l.ConnState(tls.Server(b, srv), http.StateActive)
	l.ConnState(tls.Server(b, srv), http.StateIdle) // b now waits, newer than c

	d0 := from("192.0.2.4")
	d := accept(t, l, f, d0)
	if !c0.closed.Load() || a0.closed.Load() || b0.closed.Load() {
		t.Fatalf("closed: a %v b %v c %v; want only c (the oldest waiting)", a0.closed.Load(), b0.closed.Load(), c0.closed.Load())
	}
	c.Close() // the server's own close of the shed one gives nothing back twice
	accept(t, l, f, from("192.0.2.5"))
	if !b0.closed.Load() {
		t.Fatal("b, kept alive and waiting, was not shed next")
	}
	if st := l.Stats(); st.Open != 3 || st.Shed != 2 {
		t.Fatalf("stats %+v, want 3 open, 2 shed", st)
	}

	// Now every connection is in a request: Accept must not take another.
	l.ConnState(d, http.StateActive)
	l.ConnState(l.waitingFront(t), http.StateActive)
	if st := l.Stats(); st.Waiting != 0 {
		t.Fatalf("waiting %d after every connection entered a request", st.Waiting)
	}
	f.entering = make(chan struct{}, 1)
	before := f.accepts.Load()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			got <- c
		}
	}()
	select {
	case <-f.entering:
		t.Fatal("Accept took a connection while the listener was full of requests")
	case <-time.After(50 * time.Millisecond):
	}
	a.Close() // a's request ended and it closed: room for one
	<-f.entering
	if f.accepts.Load() != before+1 {
		t.Fatalf("accepts %d, want %d", f.accepts.Load(), before+1)
	}
	g0 := from("192.0.2.6")
	f.conns <- g0
	if c := <-got; c.(*conn).Conn != g0 {
		t.Fatalf("Accept returned %v, want g", c.RemoteAddr())
	}
}

// waitingFront returns the oldest waiting connection (for tests).
func (l *Listener) waitingFront(t *testing.T) net.Conn {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting.Len() == 0 {
		t.Fatal("no connection waits")
	}
	return l.waiting.Front().Value.(*conn)
}

// Close ends an Accept that waits for room, and one that waits for a connection.
func TestCloseEndsAccept(t *testing.T) {
	for _, full := range []bool{true, false} {
		f := newFake()
		l := New(f, Options{Max: 1})
		if full {
			c := accept(t, l, f, from("192.0.2.1"))
			l.ConnState(c, http.StateActive)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			errc <- err
		}()
		l.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Errorf("full %v: Accept after Close: %v, want net.ErrClosed", full, err)
		}
	}
}

// Random accepts, closes and state changes keep the counts of a naive model: open, per
// source, waiting; never more than Max open, never more than PerSource a source.
func TestMatchesNaiveModel(t *testing.T) {
	const max, per = 8, 3
	rng := rand.New(rand.NewPCG(1, 2))
	f := newFake()
	l := New(f, Options{Max: max, PerSource: per})
	defer l.Close()
	type entry struct {
		c       net.Conn
		src     string
		waiting bool
		since   int // when it began to wait, in steps
	}
	var open []*entry
	sources := []string{"192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2", "2001:db8:0:1::1"}
	key := func(s string) string {
		if s[0] == '2' {
			p, _ := netip.MustParseAddr(s).Prefix(64)
			return p.String()
		}
		return s
	}
	for i := range 2000 {
		switch op := rng.IntN(4); {
		case op == 0 && len(open) > 0:
			k := rng.IntN(len(open))
			open[k].c.Close()
			open = append(open[:k], open[k+1:]...)
		case op == 1 && len(open) > 0:
			e := open[rng.IntN(len(open))]
			st := http.StateActive
			if rng.IntN(2) == 0 {
				st = http.StateIdle
			}
			l.ConnState(e.c, st)
			e.waiting, e.since = st == http.StateIdle, i
		default:
			s := sources[rng.IntN(len(sources))]
			n, waiting := 0, 0
			for _, e := range open {
				if key(e.src) == key(s) {
					n++
				}
				if e.waiting {
					waiting++
				}
			}
			if n >= per || (len(open) >= max && waiting == 0) {
				continue // refused, or Accept would wait: covered by the tests above
			}
			fc := from(s)
			c := accept(t, l, f, fc)
			if len(open) >= max {
				// The one that has waited longest must have been shed, and only it.
				oldest := -1
				for k, e := range open {
					if e.waiting && (oldest < 0 || e.since < open[oldest].since) {
						oldest = k
					}
				}
				for k, e := range open {
					if shed := e.c.(*conn).Conn.(*fakeConn).closed.Load(); shed != (k == oldest) {
						t.Fatalf("step %d: connection %d (waiting %v since %d) shed %v; the oldest waiting is %d", i, k, e.waiting, e.since, shed, oldest)
					}
				}
				open = append(open[:oldest], open[oldest+1:]...)
			}
			open = append(open, &entry{c: c, src: s, waiting: true, since: i})
		}
		st := l.Stats()
		waiting := 0
		for _, e := range open {
			if e.waiting {
				waiting++
			}
		}
		if st.Open != len(open) || st.Waiting != waiting || st.Open > max {
			t.Fatalf("step %d: stats %+v, model %d open, %d waiting", i, st, len(open), waiting)
		}
	}
	if st := l.Stats(); st.Shed < 50 {
		t.Fatalf("only %d connections shed in the run: the model hardly ran full (%+v)", st.Shed, st)
	}
	t.Logf("%+v", l.Stats())
}

// Register exports the counts.
func TestRegister(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 10, PerSource: 1})
	defer l.Close()
	reg := prometheus.NewRegistry()
	if err := l.Register(reg, prometheus.Labels{"listener": "launch"}); err != nil {
		t.Fatal(err)
	}
	accept(t, l, f, from("192.0.2.1"))
	refusedThenTaken(t, l, f, []*fakeConn{from("192.0.2.1")}, from("192.0.2.2"))
	if n, err := testutil.GatherAndCount(reg, "frontdoor_listener_connections_open", "frontdoor_listener_connections_refused_total"); err != nil || n != 2 {
		t.Fatalf("gathered %d series, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP frontdoor_listener_connections_refused_total Connections closed at accept because their source held as many as it may.
# TYPE frontdoor_listener_connections_refused_total counter
frontdoor_listener_connections_refused_total{listener="launch"} 1
`), "frontdoor_listener_connections_refused_total"); err != nil {
		t.Fatal(err)
	}
}

// pipeConn is one end of a net.Pipe that says it comes from remote.
type pipeConn struct {
	net.Conn
	remote net.Addr
}

func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

// gatedPair accepts a connection from src through l and returns it with the client's end.
func gatedPair(t *testing.T, l *Listener, f *fakeListener, src string) (server net.Conn, client net.Conn) {
	t.Helper()
	s, c := net.Pipe()
	t.Cleanup(func() { s.Close(); c.Close() })
	remote := net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 40000))
	got := make(chan net.Conn, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- nc
	}()
	f.conns <- &pipeConn{Conn: s, remote: remote}
	return <-got, c
}

// readAsync reads once from c and reports the result on the channel.
func readAsync(c net.Conn) chan error {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 512)
		_, err := c.Read(buf)
		done <- err
	}()
	return done
}

// A source past BusySource has its connections' first work gated: the first read that
// returns bytes waits for a slot, the first write gives it back; other sources' connections
// never wait; a connection that sends nothing takes no slot; a wait past BusyWait fails.
func TestBusySourceGatesFirstWork(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 100, PerSource: 100, BusySource: 1, BusySlots: 1, BusyWait: 300 * time.Millisecond})
	defer l.Close()
	first, firstC := gatedPair(t, l, f, "192.0.2.1")    // the source's first: not gated
	silent, _ := gatedPair(t, l, f, "192.0.2.1")        // gated, sends nothing
	a, aC := gatedPair(t, l, f, "192.0.2.1")            // gated
	b, bC := gatedPair(t, l, f, "192.0.2.1")            // gated
	other, otherC := gatedPair(t, l, f, "198.51.100.1") // another source's first
	if st := l.Stats(); st.Gated != 3 {
		t.Fatalf("%d connections gated, want 3", st.Gated)
	}
	_ = silent
	send := func(c net.Conn) { go c.Write([]byte("hello")) }

	send(aC)
	if err := <-readAsync(a); err != nil {
		t.Fatalf("the first gated read, with the slot free: %v", err)
	}
	send(bC)
	bRead := readAsync(b)
	select {
	case err := <-bRead:
		t.Fatalf("a second gated read returned (%v) while the first holds the slot", err)
	case <-time.After(50 * time.Millisecond):
	}
	send(firstC)
	send(otherC)
	for name, c := range map[string]net.Conn{"the source's first connection": first, "another source's": other} {
		select {
		case err := <-readAsync(c):
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s waited for the slot", name)
		}
	}
	go func() { buf := make([]byte, 16); aC.Read(buf) }()
	a.Write([]byte("answer")) // gives the slot back
	if err := <-bRead; err != nil {
		t.Fatalf("the second gated read once the slot was free: %v", err)
	}

	c, cC := gatedPair(t, l, f, "192.0.2.1") // gated, while b holds the slot
	send(cC)
	start := time.Now()
	if err := <-readAsync(c); !errors.Is(err, errBusyWait) {
		t.Fatalf("a gated read with the slot held past BusyWait: %v, want %v", err, errBusyWait)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("it failed after %v, before BusyWait", d)
	}
	b.Close() // gives the slot back too
	d, dC := gatedPair(t, l, f, "192.0.2.1")
	send(dC)
	if err := <-readAsync(d); err != nil {
		t.Fatalf("a gated read after the holder closed: %v", err)
	}
}

// A gated connection whose first TLS record arrives in pieces takes its slot only with the
// last piece: a client that stalls halfway through its ClientHello holds no slot.
func TestBusySourceWaitsForTheWholeFirstRecord(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 100, PerSource: 100, BusySource: 1, BusySlots: 1, BusyWait: 5 * time.Second})
	defer l.Close()
	gatedPair(t, l, f, "192.0.2.1") // the source's first: not gated
	stalled, stalledC := gatedPair(t, l, f, "192.0.2.1")
	other, otherC := gatedPair(t, l, f, "192.0.2.1")
	record := append([]byte{22, 3, 1, 0, 100}, make([]byte, 100)...)
	go stalledC.Write(record[:40]) // the header and part of the body, then nothing
	buf := make([]byte, 200)
	if n, err := stalled.Read(buf); err != nil || n != 40 {
		t.Fatalf("the stalled connection's first piece: %d, %v", n, err)
	}
	go otherC.Write(record) // a whole record: it needs the slot the stalled one does not hold
	select {
	case err := <-readAsync(other):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a whole first record waited behind a connection that sent part of its own")
	}
	go stalledC.Write(record[40:]) // the rest: now it waits for the slot other holds
	rest := readAsync(stalled)
	select {
	case err := <-rest:
		t.Fatalf("the rest of the stalled record was returned (%v) while the slot is held", err)
	case <-time.After(50 * time.Millisecond):
	}
	go func() { b := make([]byte, 16); otherC.Read(b) }()
	other.Write([]byte("server hello"))
	if err := <-rest; err != nil {
		t.Fatalf("the rest once the slot was free: %v", err)
	}
}

// A gated connection that reads again before it writes gives its slot back: a client that
// sends a tiny first record and then stalls holds nothing while its server waits.
func TestBusySourceSlotGoesBackAtTheNextRead(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 100, PerSource: 100, BusySource: 1, BusySlots: 1, BusyWait: 5 * time.Second})
	defer l.Close()
	gatedPair(t, l, f, "192.0.2.1") // the source's first: not gated
	tiny, tinyC := gatedPair(t, l, f, "192.0.2.1")
	other, otherC := gatedPair(t, l, f, "192.0.2.1")
	go tinyC.Write([]byte{22, 3, 1, 0, 1, 1}) // a whole record of one byte
	if err := <-readAsync(tiny); err != nil {
		t.Fatal(err)
	}
	readAsync(tiny) // its server reads on; the client stalls
	go otherC.Write(append([]byte{22, 3, 1, 0, 10}, make([]byte, 10)...))
	select {
	case err := <-readAsync(other):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("a whole record waited for the slot of a connection whose server reads on")
	}
}

// With BusyShare, the gated connections' first work takes at most that share of the time:
// the next slot's work waits until the work before it is paid for, and fails with
// errBusyWait when its turn is past BusyWait (on a node of one CPU a source's flood of full
// handshakes took the CPU whole, one slot at a time).
func TestBusyShareBoundsTheGatedWork(t *testing.T) {
	f := newFake()
	l := New(f, Options{Max: 100, PerSource: 100, BusySource: 1, BusySlots: 1, BusyWait: 300 * time.Millisecond, BusyShare: 0.1})
	defer l.Close()
	gatedPair(t, l, f, "192.0.2.1") // the source's first: not gated
	a, aC := gatedPair(t, l, f, "192.0.2.1")
	b, bC := gatedPair(t, l, f, "192.0.2.1")
	go aC.Write([]byte("hello"))
	if err := <-readAsync(a); err != nil {
		t.Fatalf("the first gated read: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // its work: 50 ms, paid for at a tenth 500 ms after it began
	go func() { buf := make([]byte, 16); aC.Read(buf) }()
	a.Write([]byte("answer"))
	go bC.Write([]byte("hello"))
	if err := <-readAsync(b); !errors.Is(err, errBusyWait) {
		t.Fatalf("a gated read whose turn is past BusyWait: %v, want %v", err, errBusyWait)
	}
	c, cC := gatedPair(t, l, f, "192.0.2.1")
	time.Sleep(600 * time.Millisecond) // the work is paid for
	go cC.Write([]byte("hello"))
	if err := <-readAsync(c); err != nil {
		t.Fatalf("a gated read once the work before it is paid for: %v", err)
	}
}
