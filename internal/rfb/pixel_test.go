package rfb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"testing"
)

func TestPixelConversion(t *testing.T) {
	t.Parallel()
	c := color.RGBA{0x12, 0x34, 0x56, 0xff}
	tests := []struct {
		name string
		pf   PixelFormat
		want []byte
	}{
		{"standard 32-bit little-endian reads blue green red", StandardFormat(), []byte{0x56, 0x34, 0x12, 0}},
		{"32-bit big-endian reads padding red green blue",
			PixelFormat{BitsPerPixel: 32, Depth: 24, BigEndian: true, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255, RedShift: 16, GreenShift: 8}, []byte{0, 0x12, 0x34, 0x56}},
		{"32-bit with red at bit 0 reads red green blue",
			PixelFormat{BitsPerPixel: 32, Depth: 24, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255, GreenShift: 8, BlueShift: 16}, []byte{0x12, 0x34, 0x56, 0}},
		{"32-bit with 10-bit channels",
			PixelFormat{BitsPerPixel: 32, Depth: 30, TrueColour: true, RedMax: 1023, GreenMax: 1023, BlueMax: 1023, RedShift: 20, GreenShift: 10}, le32(72<<20 | 209<<10 | 345)},
		{"16-bit RGB565 little-endian",
			PixelFormat{BitsPerPixel: 16, Depth: 16, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}, []byte{0xaa, 0x11}},
		{"16-bit RGB565 big-endian",
			PixelFormat{BitsPerPixel: 16, Depth: 16, BigEndian: true, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}, []byte{0x11, 0xaa}},
		{"16-bit RGB555",
			PixelFormat{BitsPerPixel: 16, Depth: 15, TrueColour: true, RedMax: 31, GreenMax: 31, BlueMax: 31, RedShift: 10, GreenShift: 5}, []byte{0xca, 0x08}},
		{"8-bit BGR233",
			PixelFormat{BitsPerPixel: 8, Depth: 8, TrueColour: true, RedMax: 7, GreenMax: 7, BlueMax: 3, GreenShift: 3, BlueShift: 6}, []byte{0x48}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.pf.Validate(); err != nil {
				t.Fatalf("Validate(%v) = %v", tt.pf, err)
			}
			got := newEncoder(tt.pf).appendPixels(nil, []byte{c.R, c.G, c.B, c.A})
			if !bytes.Equal(got, tt.want) {
				t.Errorf("%v: got % x, want % x", tt.pf, got, tt.want)
			}
		})
	}
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func TestPixelFormatValidate(t *testing.T) {
	t.Parallel()
	ok := StandardFormat()
	tests := []struct {
		name string
		edit func(*PixelFormat)
		ok   bool
	}{
		{"the standard format is valid", func(*PixelFormat) {}, true},
		{"24 bits per pixel is refused", func(p *PixelFormat) { p.BitsPerPixel = 24 }, false},
		{"a colour map is refused", func(p *PixelFormat) { p.TrueColour = false }, false},
		{"a zero channel maximum is refused", func(p *PixelFormat) { p.GreenMax = 0 }, false},
		{"a shift past the pixel is refused", func(p *PixelFormat) { p.BitsPerPixel, p.RedShift = 8, 8 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pf := ok
			tt.edit(&pf)
			if err := pf.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate(%v) = %v, want ok %v", pf, err, tt.ok)
			}
		})
	}
}

// naivePixel converts one colour the slow, obvious way, as a reference for the encoder.
func naivePixel(pf PixelFormat, c color.RGBA) []byte {
	ch := func(v uint8, max uint16, shift uint8) uint64 {
		return uint64(math.Round(float64(v)*float64(max)/255)) << shift
	}
	v := ch(c.R, pf.RedMax, pf.RedShift) | ch(c.G, pf.GreenMax, pf.GreenShift) | ch(c.B, pf.BlueMax, pf.BlueShift)
	n := int(pf.BitsPerPixel) / 8
	out := make([]byte, n)
	for i := range n {
		b := byte(v >> (8 * i))
		if pf.BigEndian {
			out[n-1-i] = b
		} else {
			out[i] = b
		}
	}
	return out
}

func randomFormat(rng *rand.Rand) PixelFormat {
	bpp := []uint8{8, 16, 32}[rng.IntN(3)]
	max := func() uint16 {
		if rng.IntN(4) == 0 {
			return uint16(1 + rng.IntN(0xffff))
		}
		return uint16(1<<(1+rng.IntN(8)) - 1)
	}
	shift := func() uint8 {
		if bpp == 32 && rng.IntN(2) == 0 {
			return uint8(8 * rng.IntN(4))
		}
		return uint8(rng.IntN(int(bpp)))
	}
	pf := PixelFormat{BitsPerPixel: bpp, Depth: bpp, BigEndian: rng.IntN(2) == 0, TrueColour: true,
		RedMax: max(), GreenMax: max(), BlueMax: max(), RedShift: shift(), GreenShift: shift(), BlueShift: shift()}
	if rng.IntN(3) == 0 {
		pf = StandardFormat()
		pf.BigEndian = rng.IntN(2) == 0
		pf.RedShift, pf.GreenShift, pf.BlueShift = 0, 8, 24
	}
	return pf
}

func randomImage(rng *rand.Rand, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32())
	}
	return img
}

// TestRawEncoderMatchesNaive compares whole Raw updates against ones built pixel by pixel with
// naivePixel, over random formats, images and rectangles.
func TestRawEncoderMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		pf := randomFormat(rng)
		img := randomImage(rng, 1+rng.IntN(40), 1+rng.IntN(40))
		var rects []image.Rectangle
		for range rng.IntN(4) {
			x0, y0 := rng.IntN(img.Rect.Dx()+1), rng.IntN(img.Rect.Dy()+1)
			rects = append(rects, image.Rect(x0, y0, x0+rng.IntN(img.Rect.Dx()-x0+1), y0+rng.IntN(img.Rect.Dy()-y0+1)))
		}
		var got bytes.Buffer
		s := &ServerConn{w: bufio.NewWriter(&got), enc: newEncoder(pf)}
		if err := s.WriteUpdate(img, rects...); err != nil {
			t.Fatalf("case %d: WriteUpdate: %v", i, err)
		}
		want := []byte{0, 0, 0, 0}
		n := 0
		for _, r := range rects {
			if r.Empty() {
				continue
			}
			n++
			want = append(want, rectHeader(r, EncodingRaw)...)
			for y := r.Min.Y; y < r.Max.Y; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					want = append(want, naivePixel(pf, img.RGBAAt(x, y))...)
				}
			}
		}
		binary.BigEndian.PutUint16(want[2:], uint16(n))
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("case %d, format %v, rects %v:\ngot  % x\nwant % x", i, pf, rects, got.Bytes(), want)
		}
	}
}

// TestDecodeInvertsEncode checks that the client's decoder reads back what the server's encoder
// wrote, exactly for 8-bit channels and to within one step of the channel otherwise.
func TestDecodeInvertsEncode(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		pf := randomFormat(rng)
		if pf.Validate() != nil || overlapping(pf) {
			continue
		}
		img := randomImage(rng, 16, 1)
		wire := newEncoder(pf).appendPixels(nil, img.Pix)
		got := make([]byte, len(img.Pix))
		newDecoder(pf).decode(got, wire)
		maxes := [3]uint16{pf.RedMax, pf.GreenMax, pf.BlueMax}
		for p := range 16 {
			for ch := range 3 {
				in, out := int(img.Pix[4*p+ch]), int(got[4*p+ch])
				if tol := 255/int(maxes[ch])/2 + 1; maxes[ch] < 255 && abs(in-out) > tol || maxes[ch] >= 255 && in != out {
					t.Fatalf("case %d, format %v, pixel %d channel %d: got %d, want %d", i, pf, p, ch, out, in)
				}
			}
			if got[4*p+3] != 0xff {
				t.Fatalf("case %d: alpha %d, want 255", i, got[4*p+3])
			}
		}
	}
}

// overlapping reports whether pf's channels share or lose bits, which no decoder can undo.
func overlapping(pf PixelFormat) bool {
	var used uint64
	for _, c := range [][2]int{{int(pf.RedMax), int(pf.RedShift)}, {int(pf.GreenMax), int(pf.GreenShift)}, {int(pf.BlueMax), int(pf.BlueShift)}} {
		if c[0]&(c[0]+1) != 0 {
			return true
		}
		bits := uint64(c[0]) << c[1]
		if used&bits != 0 || bits>>pf.BitsPerPixel != 0 {
			return true
		}
		used |= bits
	}
	return false
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
