package desktop

import (
	"image"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadTextReadsWhatWasDrawn(t *testing.T) {
	t.Parallel()
	var ascii strings.Builder
	for r := rune(0x21); r <= 0x7e; r++ {
		ascii.WriteRune(r)
	}
	tests := []struct {
		name          string
		width, height int
		scale         int
	}{
		{"a small screen draws the font at its size", 640, 480, 1},
		{"the default screen draws it twice its size", 1024, 768, 2},
		{"a large screen draws it three times its size", 1920, 1080, 3},
	}
	f := newFont()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := layoutFor(tt.width, tt.height)
			if l.scale != tt.scale {
				t.Errorf("scale %d, want %d", l.scale, tt.scale)
			}
			img := image.NewRGBA(image.Rect(0, 0, tt.width, tt.height))
			l.background(img)
			var want []string
			rest := ascii.String()
			for row := 0; rest != ""; row += 2 {
				n := min(len(rest), l.cols)
				l.text(img, f, row, rest[:n])
				want = append(want, rest[:n])
				rest = rest[n:]
			}
			l.text(img, f, l.rows-1, "zoë typed ⏎ and a tail cut off "+strings.Repeat("x", l.cols))
			want = append(want, string([]rune("zo? typed ⏎ and a tail cut off " + strings.Repeat("x", l.cols))[:l.cols]))
			if got := ReadText(img); !reflect.DeepEqual(got, want) {
				t.Errorf("ReadText =\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestReadTextFlagsUnknownCells(t *testing.T) {
	t.Parallel()
	l := layoutFor(1024, 768)
	img := image.NewRGBA(image.Rect(0, 0, 1024, 768))
	l.background(img)
	l.text(img, newFont(), 0, "ab")
	_, _, ink := colours()
	img.SetRGBA(l.origin.X+cellW*l.scale+1, l.origin.Y, ink) // half a font pixel in 'b'
	if got, want := ReadText(img), []string{"a" + string(utf8.RuneError)}; !reflect.DeepEqual(got, want) {
		t.Errorf("ReadText = %q, want %q", got, want)
	}
}

func TestGlyphsAreDistinct(t *testing.T) {
	t.Parallel()
	f := newFont()
	if n := len(f.table()); n != len(f.ascii)+1 {
		t.Errorf("%d distinct glyphs, want %d", n, len(f.ascii)+1)
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		info Info
		want string
	}{
		{Info{Machine: "vda-1", Session: "7f3a"}, "frontdoor vda-1 session 7f3a"},
		{Info{Machine: "vda-1"}, "frontdoor vda-1"},
		{Info{Session: "7f3a"}, "frontdoor session 7f3a"},
		{Info{}, "frontdoor desktop"},
	}
	for _, tt := range tests {
		if got := Name(tt.info); got != tt.want {
			t.Errorf("Name(%+v) = %q, want %q", tt.info, got, tt.want)
		}
	}
}

func TestNewFillsDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		o            Options
		wantW, wantH int
	}{
		{"zero options give 1024x768", Options{}, 1024, 768},
		{"a size is kept", Options{Width: 800, Height: 600}, 800, 600},
		{"a huge size is cut to 8192", Options{Width: 100000, Height: 9000}, 8192, 8192},
	}
	for _, tt := range tests {
		d := New(tt.o)
		if d.width != tt.wantW || d.height != tt.wantH || d.now == nil || d.log == nil {
			t.Errorf("%s: got %dx%d, want %dx%d with a clock and a logger", tt.name, d.width, d.height, tt.wantW, tt.wantH)
		}
	}
}
