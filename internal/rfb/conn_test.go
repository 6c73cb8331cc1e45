package rfb

import (
	"errors"
	"image"
	"image/color"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// rig is a ServerConn and a Client joined by net.Pipe; the server's messages arrive on msgs.
type rig struct {
	s    *ServerConn
	c    *Client
	msgs chan ClientMessage
	errc chan error
}

func newRig(t *testing.T, w, h int, name string) *rig {
	t.Helper()
	sc, cc := net.Pipe()
	deadline := time.Now().Add(10 * time.Second)
	sc.SetDeadline(deadline)
	cc.SetDeadline(deadline)
	r := &rig{msgs: make(chan ClientMessage, 64), errc: make(chan error, 1)}
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := ServerHandshake(sc, w, h, name)
		r.s = s
		close(ready)
		if err != nil {
			r.errc <- err
			return
		}
		for {
			m, err := s.ReadMessage()
			if err != nil {
				r.errc <- err
				return
			}
			r.msgs <- m
		}
	}()
	t.Cleanup(func() {
		sc.Close()
		cc.Close()
		wg.Wait()
	})
	c, err := NewClient(cc)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	<-ready
	r.c = c
	return r
}

// next returns the next message the server read.
func (r *rig) next(t *testing.T) ClientMessage {
	t.Helper()
	select {
	case m := <-r.msgs:
		return m
	case err := <-r.errc:
		t.Fatalf("server ReadMessage: %v", err)
	}
	return nil
}

// write runs a server write while the client reads one message, and returns that message.
func (r *rig) write(t *testing.T, f func(*ServerConn) error) Message {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f(r.s) }()
	m, err := r.c.ReadMessage()
	if err != nil {
		t.Fatalf("client ReadMessage: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server write: %v", err)
	}
	return m
}

func TestHandshakeBothEnds(t *testing.T) {
	r := newRig(t, 320, 200, "test desktop")
	if r.c.Name() != "test desktop" || r.c.Width() != 320 || r.c.Height() != 200 {
		t.Errorf("client saw %q %dx%d, want %q 320x200", r.c.Name(), r.c.Width(), r.c.Height(), "test desktop")
	}
	if got := r.c.ServerFormat(); got != StandardFormat() {
		t.Errorf("ServerFormat() = %v, want %v", got, StandardFormat())
	}
	if got := r.next(t); got != (SetPixelFormat{StandardFormat()}) {
		t.Errorf("first message = %#v, want SetPixelFormat of the standard format", got)
	}
	want := SetEncodings{[]int32{EncodingHextile, EncodingRaw, EncodingCopyRect, EncodingDesktopSize}}
	if got := r.next(t); !reflect.DeepEqual(got, want) {
		t.Errorf("second message = %#v, want %#v", got, want)
	}
}

func TestClientInput(t *testing.T) {
	r := newRig(t, 64, 64, "input")
	r.next(t)
	r.next(t)
	steps := []struct {
		name string
		send func() error
		want []ClientMessage
	}{
		{"an incremental request names its area", func() error { return r.c.Request(true, 1, 2, 3, 4) },
			[]ClientMessage{FramebufferUpdateRequest{Incremental: true, X: 1, Y: 2, Width: 3, Height: 4}}},
		{"a whole-screen request covers the framebuffer", func() error { return r.c.RequestAll(false) },
			[]ClientMessage{FramebufferUpdateRequest{Width: 64, Height: 64}}},
		{"typing presses and releases each key", func() error { return r.c.Type("a\n") },
			[]ClientMessage{KeyEvent{true, 'a'}, KeyEvent{false, 'a'}, KeyEvent{true, KeyReturn}, KeyEvent{false, KeyReturn}}},
		{"a pointer event carries buttons and position", func() error { return r.c.Pointer(1, 10, 20) },
			[]ClientMessage{PointerEvent{1, 10, 20}}},
		{"cut text travels as ISO 8859-1", func() error { return r.c.CutText("café ☕") },
			[]ClientMessage{ClientCutText{"café ?"}}},
	}
	for _, s := range steps {
		if err := s.send(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, want := range s.want {
			if got := r.next(t); got != want {
				t.Errorf("%s: got %#v, want %#v", s.name, got, want)
			}
		}
	}
}

func TestUpdatesReachTheFramebuffer(t *testing.T) {
	r := newRig(t, 8, 6, "updates")
	r.next(t)
	r.next(t)
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff
	}
	m := r.write(t, func(s *ServerConn) error {
		return s.WriteUpdate(img, image.Rect(0, 0, 8, 3), image.Rect(0, 3, 8, 6), image.Rectangle{})
	})
	// Every pixel differs: each rectangle is one raw Hextile tile, a byte more than Raw.
	if want := 4 + 2*12 + 2 + 8*6*4; m.Type != MsgFramebufferUpdate || len(m.Rects) != 2 || m.Bytes != int64(want) {
		t.Fatalf("got %v with %d rects, %d bytes; want a FramebufferUpdate of 2 rects, %d bytes", m.Type, len(m.Rects), m.Bytes, want)
	}
	if got := r.c.Framebuffer(); !reflect.DeepEqual(got.Pix, img.Pix) {
		t.Errorf("framebuffer differs from the image sent")
	}

	if err := r.s.WriteUpdate(img, image.Rect(4, 4, 9, 6)); err == nil {
		t.Errorf("WriteUpdate outside the image succeeded")
	}
}

func TestServerTakesTheClientsPixelFormat(t *testing.T) {
	r := newRig(t, 8, 8, "colours")
	r.next(t)
	r.next(t)
	setFormat := func(pf PixelFormat) {
		msg := make([]byte, 20)
		pf.put(msg[4:])
		if err := r.c.write(msg); err != nil {
			t.Fatal(err)
		}
	}
	rgb565 := PixelFormat{BitsPerPixel: 16, Depth: 16, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}
	setFormat(rgb565)
	r.next(t)
	if got := r.s.PixelFormat(); got != rgb565 {
		t.Errorf("server pixel format = %v, want %v", got, rgb565)
	}
	colourMap := StandardFormat()
	colourMap.TrueColour = false
	setFormat(colourMap)
	if err := <-r.errc; !errors.Is(err, ErrColourMap) {
		t.Errorf("ReadMessage = %v, want %v", err, ErrColourMap)
	}
}

func TestDesktopSizeAndCopyRect(t *testing.T) {
	r := newRig(t, 4, 4, "resize")
	r.next(t)
	r.next(t)
	m := r.write(t, func(s *ServerConn) error { return s.WriteDesktopSize(6, 5) })
	if len(m.Rects) != 1 || m.Rects[0].Encoding != EncodingDesktopSize || r.c.Width() != 6 || r.c.Height() != 5 {
		t.Fatalf("after DesktopSize: %+v, client %dx%d; want 6x5", m, r.c.Width(), r.c.Height())
	}
	img := image.NewRGBA(image.Rect(0, 0, 6, 5))
	img.SetRGBA(0, 0, color.RGBA{1, 2, 3, 255})
	r.write(t, func(s *ServerConn) error { return s.WriteUpdate(img, img.Rect) })
	// A CopyRect from (0,0) to (5,4), written by hand as the server side has no encoder for it.
	m = r.write(t, func(s *ServerConn) error {
		s.w.Write([]byte{0, 0, 0, 1, 0, 5, 0, 4, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0})
		return s.w.Flush()
	})
	if want := (Rect{Bounds: image.Rect(5, 4, 6, 5), Encoding: EncodingCopyRect}); len(m.Rects) != 1 || m.Rects[0] != want {
		t.Errorf("CopyRect update = %+v, want one %+v", m.Rects, want)
	}
	if got := r.c.Framebuffer().RGBAAt(5, 4); got != (color.RGBA{1, 2, 3, 255}) {
		t.Errorf("pixel after CopyRect = %v, want {1 2 3 255}", got)
	}
}

func TestDesktopSizeNeedsTheEncoding(t *testing.T) {
	s := &ServerConn{enc: newEncoder(StandardFormat())}
	if err := s.WriteDesktopSize(10, 10); !errors.Is(err, ErrNoDesktopSize) {
		t.Errorf("WriteDesktopSize = %v, want %v", err, ErrNoDesktopSize)
	}
}
