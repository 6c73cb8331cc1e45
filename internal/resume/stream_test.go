package resume

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// tcpPair returns both ends of a loopback TCP connection: a program's and the stream's.
func tcpPair(t *testing.T) (app, stream *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// join gives a and b a new transport between them, as a client's hello and an agent's reply
// would: each side attached with the other's position.
func join(t *testing.T, a, b *Stream) (ta, tb net.Conn) {
	t.Helper()
	ta, tb = net.Pipe()
	ra, fa := a.Position()
	rb, fb := b.Position()
	if err := a.Attach(ta, rb, fb); err != nil {
		t.Fatalf("attach a: %v", err)
	}
	if err := b.Attach(tb, ra, fa); err != nil {
		t.Fatalf("attach b: %v", err)
	}
	return ta, tb
}

// pump writes n random bytes to w, half-closes it, and returns their hash.
func pump(w *net.TCPConn, n int, hash chan<- [32]byte) {
	data := make([]byte, n)
	rand.Read(data)
	go func() {
		w.Write(data)
		w.CloseWrite()
		hash <- sha256.Sum256(data)
	}()
}

// drain reads r to its end and returns the hash of what it read.
func drain(r io.Reader, hash chan<- [32]byte, count *int) {
	go func() {
		h := sha256.New()
		n, _ := io.Copy(h, r)
		*count = int(n)
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		hash <- sum
	}()
}

func TestStreamCarriesBothWaysAcrossTransportBreaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	appA, locA := tcpPair(t)
	appB, locB := tcpPair(t)
	var endA, endB error
	var ends sync.WaitGroup
	ends.Add(2)
	a := New(NewID(), locA, Options{MaxBuffer: 256 << 10, OnEnd: func(err error) { endA = err; ends.Done() }})
	b := New(a.ID(), locB, Options{MaxBuffer: 256 << 10, OnEnd: func(err error) { endB = err; ends.Done() }})
	ta, _ := join(t, a, b)

	const n = 6 << 20
	sentAB, sentBA, gotAB, gotBA := make(chan [32]byte, 1), make(chan [32]byte, 1), make(chan [32]byte, 1), make(chan [32]byte, 1)
	var nAB, nBA int
	pump(appA, n, sentAB)
	pump(appB, n/3, sentBA)
	drain(appB, gotAB, &nAB)
	drain(appA, gotBA, &nBA)

	// Break the transport a few times while the bytes flow, from either side.
	for i := 0; i < 6; i++ {
		deadline := time.Now().Add(5 * time.Second)
		for a.Stats().Received+b.Stats().Received < uint64((i+1)*n/8) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		ta.Close()
		ta, _ = join(t, a, b)
	}
	for _, c := range []struct {
		name      string
		sent, got chan [32]byte
		count     *int
		want      int
	}{{"a to b", sentAB, gotAB, &nAB, n}, {"b to a", sentBA, gotBA, &nBA, n / 3}} {
		select {
		case want := <-c.sent:
			if got := <-c.got; got != want || *c.count != c.want {
				t.Errorf("%s: %d bytes arrived, hash match %v; want %d bytes", c.name, *c.count, got == want, c.want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: timed out", c.name)
		}
	}
	ends.Wait()
	if endA != nil || endB != nil {
		t.Errorf("ends: a %v, b %v; want clean ends", endA, endB)
	}
	st := a.Stats()
	if st.Transports != 7 {
		t.Errorf("a had %d transports, want 7", st.Transports)
	}
	t.Logf("a: %+v; b: %+v", a.Stats(), b.Stats())
}

func TestStreamWithoutTransportStopsReadingAtItsBuffer(t *testing.T) {
	defer goleak.VerifyNone(t)
	app, loc := tcpPair(t)
	s := New(NewID(), loc, Options{MaxBuffer: 64 << 10})
	defer s.Abort(nil)
	go app.Write(make([]byte, 8<<20)) // blocks once the socket buffers fill
	deadline := time.Now().Add(2 * time.Second)
	for s.Stats().Sent < 64<<10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if got := s.Stats().Sent; got != 64<<10 {
		t.Errorf("read %d bytes of its program with no transport, want the buffer's %d", got, 64<<10)
	}
}

func TestStreamEndsWhenNoTransportComesBack(t *testing.T) {
	defer goleak.VerifyNone(t)
	app, loc := tcpPair(t)
	a := New(NewID(), loc, Options{Timeout: 50 * time.Millisecond})
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
	if !errors.Is(a.Err(), ErrTimeout) {
		t.Errorf("Err = %v, want ErrTimeout", a.Err())
	}
	app.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := app.Read(make([]byte, 1)); err == nil {
		t.Error("the program's connection stays open after the stream ended")
	}
}

func TestStreamAbortResetsTheFarEnd(t *testing.T) {
	defer goleak.VerifyNone(t)
	appA, locA := tcpPair(t)
	_, locB := tcpPair(t)
	a := New(NewID(), locA, Options{})
	b := New(a.ID(), locB, Options{})
	join(t, a, b)
	b.Abort(errors.New("desktop server closed"))
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a did not end")
	}
	if !errors.Is(a.Err(), ErrReset) {
		t.Errorf("a.Err = %v, want ErrReset", a.Err())
	}
	appA.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := appA.Read(make([]byte, 1)); err == nil {
		t.Error("a's program still open")
	}
}

func TestStreamRefusesAPositionItCannotHonour(t *testing.T) {
	defer goleak.VerifyNone(t)
	_, loc := tcpPair(t)
	s := New(NewID(), loc, Options{})
	x, y := net.Pipe()
	defer y.Close()
	if err := s.Attach(x, 10, false); !errors.Is(err, ErrProtocol) {
		t.Errorf("Attach with 10 bytes received of none sent: %v, want ErrProtocol", err)
	}
	<-s.Done()
}

func TestHelloAndReplyRoundTrip(t *testing.T) {
	var b bytes.Buffer
	h := Hello{Resume: true, ID: NewID(), Received: 1 << 40, Fin: true}
	if err := WriteHello(&b, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHello(&b)
	if err != nil || got != h {
		t.Errorf("hello: got %+v, %v; want %+v", got, err, h)
	}
	r := Reply{Status: StatusUnavailable, Received: 7, Reason: "dial unix /run/vnc.sock: no such file"}
	WriteReply(&b, r)
	gr, err := ReadReply(&b)
	if err != nil || gr != r {
		t.Errorf("reply: got %+v, %v; want %+v", gr, err, r)
	}
	if gr.Err() == nil {
		t.Error("an unavailable reply has no error")
	}
	for _, h := range []Hello{{Probe: true, ID: NewID()}, {Probe: true, Hold: true, ID: NewID()}} {
		WriteHello(&b, h)
		if got, err := ReadHello(&b); err != nil || got != h {
			t.Errorf("probe hello: got %+v, %v; want %+v", got, err, h)
		}
	}
	WriteHello(&b, Hello{Hold: true, ID: NewID()}) // a hold without a probe is no hold
	if got, err := ReadHello(&b); err != nil || got.Hold || got.Probe {
		t.Errorf("a hold without a probe: got %+v, %v; want a new stream", got, err)
	}
	WriteHello(&b, Hello{ID: NewID()})
	raw := b.Bytes()
	raw[21] = 1 // a new stream that says it received something
	if _, err := ReadHello(&b); !errors.Is(err, ErrProtocol) {
		t.Errorf("new hello with bytes received: %v, want ErrProtocol", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(appendData(nil, 5, []byte("hello")))
	f.Add(appendAck(nil, 1<<20, true))
	f.Add(appendFin(nil, 99))
	f.Add(appendReset(nil, "gone"))
	f.Add([]byte{'P', 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add(appendPong(nil, 7))
	f.Add([]byte{'D', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		buf := make([]byte, MaxData)
		r := bytes.NewReader(b)
		var fr frame
		for i := 0; i < 64; i++ {
			if err := readFrame(r, buf, &fr); err != nil {
				return
			}
			if fr.typ == frameData && (len(fr.data) == 0 || len(fr.data) > MaxData) {
				t.Fatalf("data frame of %d bytes accepted", len(fr.data))
			}
		}
	})
}

func FuzzReadHello(f *testing.F) {
	var b bytes.Buffer
	WriteHello(&b, Hello{Resume: true, ID: NewID(), Received: 3})
	f.Add(b.Bytes())
	b.Reset()
	WriteReply(&b, Reply{Status: StatusRefused, Reason: "x"})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		if h, err := ReadHello(bytes.NewReader(in)); err == nil {
			var out bytes.Buffer
			WriteHello(&out, h)
			if !bytes.Equal(out.Bytes(), in[:out.Len()]) {
				t.Fatalf("hello %x read as %+v writes %x", in, h, out.Bytes())
			}
		}
		ReadReply(bytes.NewReader(in))
	})
}

// A stream whose ends both finish is over, not broken: the far end closes its transport the
// moment this end's last acknowledgement reaches it, which must not read as a break (a
// client would move its whole session to another gateway).
func TestACleanEndIsNoBreak(t *testing.T) {
	defer goleak.VerifyNone(t)
	var breaks atomic.Int32
	for i := 0; i < 100; i++ {
		appA, locA := tcpPair(t)
		appB, locB := tcpPair(t)
		ta, tb := tcpPair(t)
		var ends sync.WaitGroup
		ends.Add(2)
		o := Options{OnBreak: func(error) { breaks.Add(1) }, OnEnd: func(error) { ends.Done() }}
		a := New(NewID(), locA, o)
		b := New(a.ID(), locB, o)
		a.Attach(ta, 0, false)
		b.Attach(tb, 0, false)
		appB.Write([]byte("RFB 003.008\n"))
		buf := make([]byte, 12)
		io.ReadFull(appA, buf)
		appA.CloseWrite()
		io.Copy(io.Discard, appB)
		appB.CloseWrite()
		io.Copy(io.Discard, appA)
		ends.Wait()
	}
	if n := breaks.Load(); n != 0 {
		t.Errorf("%d clean ends read as breaks", n)
	}
}

// A ping is answered with a pong of its token, and a flood of pings is answered in part,
// the rest dropped, with the stream unharmed.
func TestPingsAreAnswered(t *testing.T) {
	app, local := tcpPair(t)
	defer app.Close()
	s := New(NewID(), local, Options{})
	defer s.Abort(nil)
	far, tr := net.Pipe()
	defer far.Close()
	if err := s.Attach(tr, 0, false); err != nil {
		t.Fatal(err)
	}
	far.SetDeadline(time.Now().Add(10 * time.Second))
	var pings []byte
	for tok := range uint64(100) {
		pings = append(pings, 'P')
		pings = binary.BigEndian.AppendUint64(pings, tok)
	}
	go far.Write(pings)
	buf := make([]byte, MaxData)
	var f frame
	pongs, last := 0, int64(-1)
	sentAfter := false
	for {
		if err := readFrame(far, buf, &f); err != nil {
			t.Fatalf("reading the far end after %d pongs: %v", pongs, err)
		}
		switch f.typ {
		case framePong:
			if int64(f.off) <= last || f.off >= 100 {
				t.Fatalf("pong %d after %d", f.off, last)
			}
			last = int64(f.off)
			if pongs++; pongs == 1 && !sentAfter {
				// The stream still carries bytes during the flood.
				sentAfter = true
				go app.Write([]byte("after"))
			}
		case frameData:
			if string(f.data) != "after" || pongs == 0 {
				t.Fatalf("data %q after %d pongs", f.data, pongs)
			}
			return
		}
	}
}
