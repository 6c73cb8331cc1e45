package desktop

import (
	"context"
	"errors"
	"image"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
	"github.com/frontdoor-vdi/frontdoor/internal/testclock"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// handTicker is a ticker that ticks when the test sends on it.
type handTicker chan time.Time

func (h handTicker) C() <-chan time.Time { return h }
func (h handTicker) Stop()               {}

// infoBox holds the Info a test changes while the desktop reads it.
type infoBox struct {
	mu   sync.Mutex // guards info
	info Info
}

func (b *infoBox) get() Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.info
}

func (b *infoBox) setPath(p string) {
	b.mu.Lock()
	b.info.Path = p
	b.mu.Unlock()
}

// rig is a Desktop serving one rfb.Client over net.Pipe, with a hand clock and ticker.
type rig struct {
	d      *Desktop
	c      *rfb.Client
	conn   net.Conn
	clock  *testclock.Clock
	tick   handTicker
	info   *infoBox
	cancel context.CancelFunc
	served chan error
}

func start(t *testing.T) *rig {
	t.Helper()
	return startWith(t, rfb.ClientOptions{})
}

// startWith is start with a client of options o.
func startWith(t *testing.T, o rfb.ClientOptions) *rig {
	t.Helper()
	sc, cc := net.Pipe()
	cc.SetDeadline(time.Now().Add(20 * time.Second))
	r := &rig{
		clock:  testclock.New(time.Date(2026, 3, 4, 12, 4, 5, 0, time.UTC)),
		tick:   make(handTicker),
		info:   &infoBox{info: Info{Machine: "vda-1", Zone: "london", User: "alice", Session: "7f3a9c0d", Path: "gw-london-1"}},
		served: make(chan error, 1),
		conn:   cc,
	}
	r.d = New(Options{Now: r.clock.Now})
	r.d.newTicker = func(time.Duration) ticker { return r.tick }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.served <- r.d.Serve(ctx, sc, r.info.get) }()
	t.Cleanup(func() {
		cancel()
		cc.Close()
		select {
		case <-r.served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	c, err := rfb.NewClientWith(cc, o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	r.c = c
	return r
}

// update requests the whole screen and returns the update and the text on the screen after it.
func (r *rig) update(t *testing.T, incremental bool) (rfb.Message, []string) {
	t.Helper()
	if err := r.c.RequestAll(incremental); err != nil {
		t.Fatalf("RequestAll: %v", err)
	}
	return r.read(t)
}

func (r *rig) read(t *testing.T) (rfb.Message, []string) {
	t.Helper()
	m, err := r.c.ReadMessage()
	for err == nil && m.Type == rfb.MsgServerCutText {
		m, err = r.c.ReadMessage() // the desktop's clipboard (r.c.LastCutText)
	}
	if err != nil {
		t.Fatalf("ReadMessage: %v", err)
	}
	if m.Type != rfb.MsgFramebufferUpdate {
		t.Fatalf("got %v, want a FramebufferUpdate", m.Type)
	}
	return m, ReadText(r.c.Framebuffer())
}

func (r *rig) rowRect(row int) image.Rectangle {
	return layoutFor(r.c.Width(), r.c.Height()).row(row)
}

func TestFirstUpdateShowsTheSession(t *testing.T) {
	t.Parallel()
	r := start(t)
	if got, want := r.c.Name(), "frontdoor vda-1 session 7f3a9c0d"; got != want {
		t.Errorf("desktop name %q, want %q", got, want)
	}
	if r.c.Width() != 1024 || r.c.Height() != 768 {
		t.Errorf("size %dx%d, want the default 1024x768", r.c.Width(), r.c.Height())
	}
	m, lines := r.update(t, false)
	if want := []rfb.Rect{{Bounds: image.Rect(0, 0, 1024, 768), Encoding: rfb.EncodingHextile}}; !reflect.DeepEqual(m.Rects, want) {
		t.Errorf("rects %v, want %v", m.Rects, want)
	}
	// Text on flat colour, Hextile encoded: a small part of Raw's 3 MiB.
	if raw := int64(1024 * 768 * 4); m.Bytes > raw/20 {
		t.Errorf("the first frame took %d bytes, want under a twentieth of Raw's %d", m.Bytes, raw)
	}
	want := []string{"frontdoor desktop", "machine vda-1", "zone london", "user alice",
		"session 7f3a9c0d", "path gw-london-1", "time 12:04:05", "keys:", "clipboard:"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("screen reads\n%q\nwant\n%q", lines, want)
	}
}

func TestTypedKeysShowInTheNextIncrementalUpdate(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	if err := r.c.Type("hello\bp\n!"); err != nil {
		t.Fatal(err)
	}
	m, lines := r.update(t, true)
	if want := []rfb.Rect{{Bounds: r.rowRect(rowKeys), Encoding: rfb.EncodingHextile}}; !reflect.DeepEqual(m.Rects, want) {
		t.Errorf("rects %v, want only the keys row %v", m.Rects, want)
	}
	if got, want := lineOf(lines, "keys:"), "keys: hellp⏎!"; got != want {
		t.Errorf("keys line %q, want %q", got, want)
	}
	// The Return put the line before it on the viewer's clipboard.
	if got := r.c.LastCutText(); got != "hellp" {
		t.Errorf("the viewer's clipboard %q, want the line typed before the Return, %q", got, "hellp")
	}
}

// lineOf returns the line of lines that starts with prefix, or "".
func lineOf(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// The viewer's clipboard shows on the desktop, on one line, cut to what the line holds.
func TestViewersClipboardShows(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	if err := r.c.CutText("from\nthe viewer"); err != nil {
		t.Fatal(err)
	}
	m, lines := r.update(t, true)
	if want := []rfb.Rect{{Bounds: r.rowRect(rowClip), Encoding: rfb.EncodingHextile}}; !reflect.DeepEqual(m.Rects, want) {
		t.Errorf("rects %v, want only the clipboard row %v", m.Rects, want)
	}
	if got := lineOf(lines, "clipboard:"); got != "clipboard: from the viewer" {
		t.Errorf("clipboard line %q", got)
	}
}

func TestKeysLineKeepsTheLastCharacters(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	typed := "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	if err := r.c.Type(typed); err != nil {
		t.Fatal(err)
	}
	_, lines := r.update(t, true)
	if got, want := lineOf(lines, "keys:"), "keys: "+typed[len(typed)-maxKeys:]; got != want {
		t.Errorf("keys line %q, want %q", got, want)
	}
}

func TestPathChangeShowsInAnIncrementalUpdate(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	r.info.setPath("gw-paris-2")
	m, lines := r.update(t, true)
	if want := []rfb.Rect{{Bounds: r.rowRect(rowPath), Encoding: rfb.EncodingHextile}}; !reflect.DeepEqual(m.Rects, want) {
		t.Errorf("rects %v, want only the path row %v", m.Rects, want)
	}
	if got, want := lines[5], "path gw-paris-2"; got != want {
		t.Errorf("path line %q, want %q", got, want)
	}
	r.info.setPath("")
	if _, lines := r.update(t, true); lines[5] != "path direct" {
		t.Errorf("path line %q, want %q", lines[5], "path direct")
	}
}

func TestIncrementalRequestWaitsForAChange(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	if err := r.c.RequestAll(true); err != nil {
		t.Fatal(err)
	}
	// Nothing changed, so the desktop must hold the request until the key below arrives.
	if err := r.c.Type("x"); err != nil {
		t.Fatal(err)
	}
	m, lines := r.read(t)
	if len(m.Rects) != 1 || lineOf(lines, "keys:") != "keys: x" {
		t.Errorf("first update after the request: %v reading %q; want the keys row reading %q", m.Rects, lines, "keys: x")
	}
}

func TestClockTicks(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	tests := []struct {
		name    string
		advance time.Duration
		want    string
	}{
		{"with the time unchanged a tick still answers with the clock row", 0, "time 12:04:05"},
		{"a second later the clock row shows the new time", time.Second, "time 12:04:06"},
	}
	for _, tt := range tests {
		r.clock.Advance(tt.advance)
		if err := r.c.RequestAll(true); err != nil {
			t.Fatal(err)
		}
		type result struct {
			m   rfb.Message
			err error
		}
		got := make(chan result, 1)
		go func() {
			m, err := r.c.ReadMessage()
			got <- result{m, err}
		}()
		var res result
	ticking:
		for {
			select {
			case r.tick <- r.clock.Now():
			case res = <-got:
				break ticking
			}
		}
		if res.err != nil {
			t.Fatalf("%s: ReadMessage: %v", tt.name, res.err)
		}
		want := []rfb.Rect{{Bounds: r.rowRect(rowClock), Encoding: rfb.EncodingHextile}}
		if lines := ReadText(r.c.Framebuffer()); !reflect.DeepEqual(res.m.Rects, want) || lines[6] != tt.want {
			t.Errorf("%s: rects %v reading %q; want %v reading %q", tt.name, res.m.Rects, lines[6], want, tt.want)
		}
	}
}

func TestPartialRequestGetsItsArea(t *testing.T) {
	t.Parallel()
	r := start(t)
	if err := r.c.Request(false, 10, 20, 30, 40); err != nil {
		t.Fatal(err)
	}
	m, _ := r.read(t)
	if want := []rfb.Rect{{Bounds: image.Rect(10, 20, 40, 60), Encoding: rfb.EncodingHextile}}; !reflect.DeepEqual(m.Rects, want) {
		t.Errorf("rects %v, want %v", m.Rects, want)
	}
	// The viewer has not seen the whole screen, so an incremental request gets all of it.
	if m, _ := r.update(t, true); len(m.Rects) != 1 || m.Rects[0].Bounds != image.Rect(0, 0, 1024, 768) {
		t.Errorf("rects %v, want the whole screen", m.Rects)
	}
}

func TestViewerLeavingEndsServe(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	r.conn.Close()
	if err := <-r.served; err != nil {
		t.Errorf("Serve = %v, want nil when the viewer leaves", err)
	}
	r.served <- nil // for the cleanup
}

func TestCancelEndsServe(t *testing.T) {
	t.Parallel()
	r := start(t)
	r.update(t, false)
	if err := r.c.RequestAll(true); err != nil { // a request left waiting
		t.Fatal(err)
	}
	r.cancel()
	if err := <-r.served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want %v", err, context.Canceled)
	}
	r.served <- nil
}

func TestCancelDuringHandshakeEndsServe(t *testing.T) {
	t.Parallel()
	sc, cc := net.Pipe()
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(Options{}).Serve(ctx, sc, nil) }()
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want %v", err, context.Canceled)
	}
}

// A viewer that speaks ExtendedDesktopSize (noVNC resizing to its window) is told the size
// with its first update, and the desktop takes the size it asks for: the next update is the
// whole screen at that size, drawn for it; a size out of bounds is refused and nothing changes.
func TestViewerResizesTheDesktop(t *testing.T) {
	t.Parallel()
	r := startWith(t, rfb.ClientOptions{Resize: true})
	m, _ := r.update(t, false)
	if want := []rfb.Rect{{Bounds: image.Rect(0, 0, 1024, 768), Encoding: rfb.EncodingExtendedDesktopSize}}; !reflect.DeepEqual(m.Rects, want) {
		t.Fatalf("first message %v, want the size told: %v", m.Rects, want)
	}
	m, lines := r.read(t)
	if len(m.Rects) != 1 || m.Rects[0].Bounds != image.Rect(0, 0, 1024, 768) || !slices.Contains(lines, "session 7f3a9c0d") {
		t.Fatalf("then %v reading %q, want the whole screen", m.Rects, lines)
	}

	if err := r.c.SetDesktopSize(800, 600); err != nil {
		t.Fatal(err)
	}
	m, lines = r.update(t, true)
	want := rfb.Rect{Bounds: image.Rect(0, 0, 800, 600), Encoding: rfb.EncodingExtendedDesktopSize, Reason: rfb.ResizeByViewer, Status: rfb.ResizeOK}
	if len(m.Rects) != 1 || m.Rects[0] != want {
		t.Fatalf("after SetDesktopSize 800x600: %v, want %v", m.Rects, want)
	}
	m, lines = r.read(t)
	if r.c.Width() != 800 || r.c.Height() != 600 || len(m.Rects) != 1 || m.Rects[0].Bounds != image.Rect(0, 0, 800, 600) {
		t.Fatalf("after the resize: %dx%d, update %v; want the whole 800x600 screen", r.c.Width(), r.c.Height(), m.Rects)
	}
	if !slices.Contains(lines, "session 7f3a9c0d") || !slices.Contains(lines, "user alice") {
		t.Errorf("the 800x600 screen reads %q", lines)
	}

	// Sizes asked for one after the other: the last one is drawn.
	r.c.SetDesktopSize(900, 700)
	r.c.SetDesktopSize(1000, 700)
	r.clock.Advance(resizeEvery)
	m, _ = r.update(t, true)
	if want := (rfb.Rect{Bounds: image.Rect(0, 0, 1000, 700), Encoding: rfb.EncodingExtendedDesktopSize, Reason: rfb.ResizeByViewer, Status: rfb.ResizeOK}); len(m.Rects) != 1 || m.Rects[0] != want {
		t.Fatalf("after two SetDesktopSize: %v, want %v", m.Rects, want)
	}
	if m, _ = r.read(t); r.c.Width() != 1000 || m.Rects[0].Bounds != image.Rect(0, 0, 1000, 700) {
		t.Fatalf("then %v at %dx%d", m.Rects, r.c.Width(), r.c.Height())
	}

	for _, size := range [][2]int{{10, 600}, {8000, 8000}} {
		if err := r.c.SetDesktopSize(size[0], size[1]); err != nil {
			t.Fatal(err)
		}
		m, _ = r.update(t, true)
		want := rfb.Rect{Bounds: image.Rect(0, 0, 1000, 700), Encoding: rfb.EncodingExtendedDesktopSize, Reason: rfb.ResizeByViewer, Status: rfb.ResizeInvalid}
		if len(m.Rects) != 1 || m.Rects[0] != want {
			t.Fatalf("SetDesktopSize %v: %v, want it refused: %v", size, m.Rects, want)
		}
		if r.c.Width() != 1000 || r.c.Height() != 700 {
			t.Fatalf("after a refused SetDesktopSize %v: %dx%d", size, r.c.Width(), r.c.Height())
		}
	}
}

// A new size is drawn at most every resizeEvery (a window dragged asks many times a second,
// and each size costs a framebuffer and a whole screen), the same size costs nothing, and a
// viewer that was never told it may resize is not heard.
func TestResizesArePaced(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2026, 3, 4, 12, 4, 5, 0, time.UTC))
	v := newViewer(New(Options{Now: clock.Now}), nil, func() Info { return Info{} })
	one := []rfb.Screen{{Width: 1, Height: 1}}
	ask := func(w, h int) {
		v.askResize(rfb.SetDesktopSize{Width: uint16(w), Height: uint16(h), Screens: one})
		v.resize()
	}
	ask(800, 600)
	if v.fb.Rect.Size() != image.Pt(1024, 768) || v.resized != nil {
		t.Fatalf("a viewer not told it may resize was heard: %v", v.fb.Rect)
	}
	v.told = true
	ask(800, 600)
	if v.fb.Rect.Size() != image.Pt(800, 600) || v.resized == nil || v.resized.status != rfb.ResizeOK {
		t.Fatalf("first resize: %v %+v", v.fb.Rect, v.resized)
	}
	v.resized = nil
	fb := v.fb
	ask(800, 600)
	if v.fb != fb || v.resized == nil || v.resized.status != rfb.ResizeOK {
		t.Fatalf("the same size again: a new framebuffer (%v) or no answer (%+v)", v.fb != fb, v.resized)
	}
	v.resized = nil
	ask(900, 700)
	if v.fb.Rect.Size() != image.Pt(800, 600) || v.resized != nil {
		t.Fatalf("a second size at once was drawn: %v", v.fb.Rect)
	}
	clock.Advance(resizeEvery)
	v.resize()
	if v.fb.Rect.Size() != image.Pt(900, 700) || v.resized == nil {
		t.Fatalf("after resizeEvery: %v %+v", v.fb.Rect, v.resized)
	}
	v.resized = nil
	v.askResize(rfb.SetDesktopSize{Width: 640, Height: 480})
	if v.resized == nil || v.resized.status != rfb.ResizeInvalid {
		t.Fatalf("a SetDesktopSize without a screen: %+v, want it refused", v.resized)
	}
}

// A viewer that asks for Raw alone gets Raw: every pixel of the frame, 4 bytes each.
func TestAViewerOfRawAloneGetsRaw(t *testing.T) {
	t.Parallel()
	r := startWith(t, rfb.ClientOptions{Raw: true})
	m, lines := r.update(t, false)
	if raw := int64(1024 * 768 * 4); m.Bytes < raw {
		t.Errorf("the frame took %d bytes, want Raw's %d at least", m.Bytes, raw)
	}
	for _, rc := range m.Rects {
		if rc.Encoding != rfb.EncodingRaw {
			t.Errorf("a rectangle in encoding %d", rc.Encoding)
		}
	}
	if lineOf(lines, "session") == "" {
		t.Errorf("the frame reads %q", lines)
	}
}
