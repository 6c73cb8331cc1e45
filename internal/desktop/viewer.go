package desktop

import (
	"image"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// Rows of the screen's text grid.
const (
	rowTitle = iota
	_
	rowMachine
	rowZone
	rowUser
	rowSession
	rowPath
	rowClock
	rowKeys
	rowClip
	numRows
)

// maxKeys is how many of the last characters typed the screen shows.
const maxKeys = 40

// viewer is the screen as one viewer sees it: the framebuffer, what is drawn on each row and
// what the viewer has not been sent yet. It is used only by the serving loop.
type viewer struct {
	sc   *rfb.ServerConn
	info func() Info
	d    *Desktop
	fb   *image.RGBA
	lay  layout

	drawn  [numRows]string // text on each row of fb
	dirty  [numRows]bool   // rows drawn since they were last sent
	unsent bool            // the viewer has not yet been sent the whole screen
	// told: the viewer, which speaks ExtendedDesktopSize, was told the size and that it may
	// ask for another; resized holds the answer to its last SetDesktopSize until sent.
	told      bool
	resized   *resizeAnswer
	want      image.Point // the size last asked for, not drawn yet; zero: none
	resizedAt time.Time   // when a size was last drawn
	keys      []rune      // the last characters typed, at most maxKeys
	clip      string      // the viewer's clipboard as it last sent it (at most maxKeys runes)
	// copied is a line to put on the viewer's clipboard (a Return typed copies the keys
	// typed before it); "" when none.
	copied string
	tick   bool // a second passed since the last flush

	// The request waiting for an answer, if waiting.
	waiting     bool
	incremental bool
	area        image.Rectangle // within fb
}

func newViewer(d *Desktop, sc *rfb.ServerConn, info func() Info) *viewer {
	v := &viewer{sc: sc, info: info, d: d, fb: image.NewRGBA(image.Rect(0, 0, d.width, d.height)), unsent: true}
	v.lay = layoutFor(d.width, d.height)
	v.lay.background(v.fb)
	return v
}

// resizeAnswer is the answer to a viewer's SetDesktopSize.
type resizeAnswer struct{ status uint16 }

// Bounds of a size a viewer may ask for: a desktop of 8 MiB of pixels at most (a 4K screen),
// each side within the desktop's own bounds. A new size is drawn at most every resizeEvery:
// each costs a new framebuffer and a whole screen, and a viewer asks as its window is dragged.
const (
	minSide     = 64
	maxPixels   = 3840 * 2160
	resizeEvery = 250 * time.Millisecond
)

// askResize takes a viewer's SetDesktopSize: refused at once when out of bounds, else kept
// (the last one asked wins) until resize draws it. A viewer that was not told it may ask is
// not heard.
func (v *viewer) askResize(m rfb.SetDesktopSize) {
	if !v.told {
		return
	}
	w, h := int(m.Width), int(m.Height)
	if len(m.Screens) == 0 || w < minSide || h < minSide || w > maxSide || h > maxSide || w*h > maxPixels {
		v.want, v.resized = image.Point{}, &resizeAnswer{status: rfb.ResizeInvalid}
		return
	}
	v.want = image.Pt(w, h)
}

// resize draws the size a viewer asked for, unless one was drawn less than resizeEvery ago,
// and notes the answer.
func (v *viewer) resize() {
	if v.want == (image.Point{}) {
		return
	}
	now := v.d.now()
	if v.want != v.fb.Rect.Size() {
		if !v.resizedAt.IsZero() && now.Sub(v.resizedAt) < resizeEvery {
			return // later: a tick flushes it
		}
		v.fb = image.NewRGBA(image.Rectangle{Max: v.want})
		v.lay = layoutFor(v.want.X, v.want.Y)
		v.lay.background(v.fb)
		v.drawn = [numRows]string{}
		v.unsent = true
		if v.waiting {
			v.area = v.fb.Rect
		}
		v.resizedAt = now
	}
	v.want, v.resized = image.Point{}, &resizeAnswer{status: rfb.ResizeOK}
}

// handle takes a request or key press from the viewer.
func (v *viewer) handle(m rfb.ClientMessage) {
	switch m := m.(type) {
	case rfb.FramebufferUpdateRequest:
		area := m.Rect().Intersect(v.fb.Rect)
		if !v.waiting {
			v.waiting, v.incremental, v.area = true, m.Incremental, area
			return
		}
		// Requests that arrive while one waits are answered together, by one update.
		v.incremental = v.incremental && m.Incremental
		v.area = v.area.Union(area)
	case rfb.SetDesktopSize:
		v.askResize(m)
	case rfb.ClientCutText:
		text := []rune(strings.Join(strings.Fields(m.Text), " "))
		v.clip = string(text[:min(len(text), maxKeys)])
	case rfb.KeyEvent:
		if !m.Down {
			return
		}
		switch k := m.Key; {
		case k >= 0x20 && k <= 0x7e:
			v.keys = append(v.keys, rune(k))
		case k == keyReturn || k == keyKPEnter:
			// The line before the Return goes on the viewer's clipboard.
			line := string(v.keys)
			if i := strings.LastIndex(line, string(returnMark)); i >= 0 {
				line = line[i+len(string(returnMark)):]
			}
			if line != "" {
				v.copied = line
			}
			v.keys = append(v.keys, returnMark)
		case k == keyBackSpace && len(v.keys) > 0:
			v.keys = v.keys[:len(v.keys)-1]
		}
		if len(v.keys) > maxKeys {
			v.keys = append(v.keys[:0], v.keys[len(v.keys)-maxKeys:]...)
		}
	}
}

// Keysyms the keys line understands (X11 keysymdef.h).
const (
	keyBackSpace = 0xff08
	keyReturn    = 0xff0d
	keyKPEnter   = 0xff8d
)

// flush answers the waiting request, if any: a non-incremental one at once with its whole
// area, an incremental one with the rows that changed, or, once a second has passed with
// nothing changed, with the clock row alone, so that viewers keep hearing from the desktop.
func (v *viewer) flush() error {
	heartbeat := v.tick
	v.tick = false
	if err := v.tellSize(); err != nil {
		return err
	}
	if !v.waiting {
		return nil
	}
	if v.copied != "" { // with an answer only, as every message the desktop sends
		text := v.copied
		v.copied = ""
		if err := v.sc.WriteCutText(text); err != nil {
			return err
		}
	}
	v.draw()
	area := v.area
	var rects []image.Rectangle
	switch {
	case !v.incremental || v.unsent:
		rects = []image.Rectangle{area}
	default:
		for row := range numRows {
			if v.dirty[row] {
				rects = appendNonEmpty(rects, v.lay.row(row).Intersect(area))
			}
		}
		if len(rects) == 0 && !heartbeat {
			return nil // wait for a change or a second
		}
		if len(rects) == 0 {
			rects = appendNonEmpty(rects, v.lay.row(rowClock).Intersect(area))
		}
	}
	if area == v.fb.Rect {
		v.unsent = false
	}
	for row := range numRows {
		if v.lay.row(row).In(area) {
			v.dirty[row] = false
		}
	}
	v.waiting = false
	return v.sc.WriteUpdate(v.fb, rects...)
}

// tellSize tells a viewer that speaks ExtendedDesktopSize the framebuffer's size, once, so
// that it may ask for another, and answers its SetDesktopSize; in answer to a request only.
func (v *viewer) tellSize() error {
	if !v.waiting {
		return nil
	}
	v.resize()
	switch {
	case v.resized != nil:
		st := v.resized.status
		v.resized, v.told = nil, true
		return v.sc.WriteExtendedDesktopSize(rfb.ResizeByViewer, st, v.fb.Rect.Dx(), v.fb.Rect.Dy())
	case !v.told && v.sc.ExtendedDesktopSize():
		v.told = true
		return v.sc.WriteExtendedDesktopSize(rfb.ResizeByServer, rfb.ResizeOK, v.fb.Rect.Dx(), v.fb.Rect.Dy())
	}
	return nil
}

func appendNonEmpty(rs []image.Rectangle, r image.Rectangle) []image.Rectangle {
	if r.Empty() {
		return rs
	}
	return append(rs, r)
}

// draw brings every row of the framebuffer up to date, marking the rows it changes.
func (v *viewer) draw() {
	info := v.info()
	path := info.Path
	if path == "" {
		path = "direct"
	}
	lines := [numRows]string{
		rowTitle:   "frontdoor desktop",
		rowMachine: "machine " + info.Machine,
		rowZone:    "zone " + info.Zone,
		rowUser:    "user " + info.User,
		rowSession: "session " + info.Session,
		rowPath:    "path " + path,
		rowClock:   "time " + v.d.now().Format("15:04:05"),
		rowKeys:    "keys: " + string(v.keys),
		rowClip:    "clipboard: " + v.clip,
	}
	for row, text := range lines {
		if text != v.drawn[row] {
			v.lay.text(v.fb, v.d.font, row, text)
			v.drawn[row] = text
			v.dirty[row] = true
		}
	}
}
