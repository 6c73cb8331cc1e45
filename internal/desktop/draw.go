package desktop

import (
	"image"
	"image/color"
	"strings"
	"unicode/utf8"

	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// colours returns the screen's colours: a backdrop, the panel's paper and the ink of the text.
// ReadText tells ink from paper by brightness, so that it also reads a screen that went
// through a lossy pixel format.
func colours() (backdrop, paper, ink color.RGBA) {
	return color.RGBA{0x1d, 0x3b, 0x53, 0xff}, color.RGBA{0x0b, 0x16, 0x22, 0xff}, color.RGBA{0xe8, 0xec, 0xf0, 0xff}
}

// isInk reports whether a pixel is bright enough to be part of a glyph.
func isInk(r, g, b uint8) bool { return int(r)+int(g)+int(b) > 3*0x80 }

// returnMark stands for Return in the keys line; it is drawn as the font's replacement glyph,
// and ReadText reads that glyph back as returnMark.
const returnMark = '⏎'

// Glyph geometry of basicfont.Face7x13: a 6×13 glyph in a 7×13 cell.
const (
	glyphW = 6
	cellW  = 7
	cellH  = 13
)

// glyph is one character's bitmap: bit x of row y is set where the glyph has ink.
type glyph [cellH]uint8

// font holds the glyphs of basicfont.Face7x13 as bitmaps.
type font struct {
	ascii       [0x7f - 0x20]glyph
	replacement glyph
}

func newFont() *font {
	f := &font{replacement: glyphOf(utf8.RuneError)}
	for r := rune(0x20); r <= 0x7e; r++ {
		f.ascii[r-0x20] = glyphOf(r)
	}
	return f
}

// of returns the glyph for r: printable ASCII as itself, returnMark as the replacement glyph
// and anything else as '?'.
func (f *font) of(r rune) glyph {
	switch {
	case r == returnMark:
		return f.replacement
	case r < 0x20 || r > 0x7e:
		r = '?'
	}
	return f.ascii[r-0x20]
}

// table maps every glyph bitmap back to the character it is drawn for.
func (f *font) table() map[glyph]rune {
	t := make(map[glyph]rune, len(f.ascii)+1)
	for i, g := range f.ascii {
		t[g] = rune(0x20 + i)
	}
	t[f.replacement] = returnMark
	return t
}

// glyphOf reads the bitmap of the font's glyph for r.
func glyphOf(r rune) glyph {
	f := basicfont.Face7x13
	_, mask, mp, _, _ := f.Glyph(fixed.P(0, f.Ascent), r)
	var g glyph
	for y := range cellH {
		for x := range glyphW {
			if _, _, _, a := mask.At(mp.X+x, mp.Y+y).RGBA(); a >= 0x8000 {
				g[y] |= 1 << x
			}
		}
	}
	return g
}

// layout places the text grid on a screen of a given size.
type layout struct {
	scale      int             // each font pixel is scale×scale screen pixels
	screen     image.Rectangle // the whole framebuffer
	panel      image.Rectangle // the dark panel behind the text
	origin     image.Point     // top left of the grid's first cell
	cols, rows int
}

// layoutFor returns the layout for a w×h screen; drawing and ReadText both derive it from the
// size alone. The font is drawn 1, 2 or 3 times its size, so that a 1024-pixel-wide screen
// holds lines of 68 characters.
func layoutFor(w, h int) layout {
	l := layout{scale: min(max(w/480, 1), 3), screen: image.Rect(0, 0, w, h)}
	cw, ch := cellW*l.scale, cellH*l.scale
	m := 8 * l.scale
	l.panel = image.Rect(m, m, w-m, h-m).Intersect(l.screen)
	l.origin = l.panel.Min.Add(image.Pt(cw, ch/2))
	l.cols = max((l.panel.Dx()-2*cw)/cw, 0)
	l.rows = max((l.panel.Dy()-ch)/ch, 0)
	return l
}

// row returns the rectangle of a text row, empty when the row does not fit.
func (l layout) row(row int) image.Rectangle {
	if row >= l.rows {
		return image.Rectangle{}
	}
	cw, ch := cellW*l.scale, cellH*l.scale
	y := l.origin.Y + row*ch
	return image.Rect(l.origin.X, y, l.origin.X+l.cols*cw, y+ch)
}

// background paints the backdrop and the panel.
func (l layout) background(img *image.RGBA) {
	backdrop, paper, _ := colours()
	fill(img, img.Rect, backdrop)
	fill(img, l.panel, paper)
}

// text draws s in f on row, replacing what was there; what does not fit is cut off.
func (l layout) text(img *image.RGBA, f *font, row int, s string) {
	r := l.row(row)
	if r.Empty() {
		return
	}
	_, paper, ink := colours()
	fill(img, r, paper)
	col := 0
	for _, c := range s {
		if col == l.cols {
			break
		}
		g := f.of(c)
		x0 := r.Min.X + col*cellW*l.scale
		for y := range cellH {
			for x := range glyphW {
				if g[y]&(1<<x) != 0 {
					fill(img, image.Rect(x0+x*l.scale, r.Min.Y+y*l.scale, x0+(x+1)*l.scale, r.Min.Y+(y+1)*l.scale), ink)
				}
			}
		}
		col++
	}
}

// fill paints r, clipped to img, in c.
func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// ReadText returns the text lines drawn on a framebuffer the desktop drew, top to bottom,
// without trailing spaces and leaving out empty rows. It recognises each cell of the known
// grid exactly against the font's own bitmaps: a Return typed reads as '⏎' and a cell that
// holds no glyph as utf8.RuneError.
func ReadText(img *image.RGBA) []string {
	b := img.Bounds()
	l := layoutFor(b.Dx(), b.Dy())
	table := newFont().table()
	var lines []string
	var line strings.Builder
	for row := range l.rows {
		line.Reset()
		for col := range l.cols {
			line.WriteRune(l.readCell(img, table, row, col))
		}
		if s := strings.TrimRight(line.String(), " "); s != "" {
			lines = append(lines, s)
		}
	}
	return lines
}

// readCell recognises the character in one cell of the grid.
func (l layout) readCell(img *image.RGBA, table map[glyph]rune, row, col int) rune {
	r := l.row(row)
	x0, y0 := img.Rect.Min.X+r.Min.X+col*cellW*l.scale, img.Rect.Min.Y+r.Min.Y
	var g glyph
	for y := range cellH {
		for x := range cellW {
			ink, ok := l.readDot(img, x0+x*l.scale, y0+y*l.scale)
			switch {
			case !ok || ink && x == glyphW:
				return utf8.RuneError
			case ink:
				g[y] |= 1 << x
			}
		}
	}
	if c, ok := table[g]; ok {
		return c
	}
	return utf8.RuneError
}

// readDot reads one font pixel, scale×scale screen pixels at x, y; ok is false when they
// disagree.
func (l layout) readDot(img *image.RGBA, x, y int) (ink, ok bool) {
	for dy := range l.scale {
		for dx := range l.scale {
			p := img.RGBAAt(x+dx, y+dy)
			i := isInk(p.R, p.G, p.B)
			if dx == 0 && dy == 0 {
				ink = i
			} else if i != ink {
				return false, false
			}
		}
	}
	return ink, true
}
