package rfb

import (
	"image"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Hextile round trip, against the image sent: images of one, two and many colours, of
// sizes that are and are not multiples of a tile, rectangles anywhere in them. Text on flat
// colour (the builtin desktop's) takes a small part of Raw's bytes.
func TestHextileRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	palette := [][4]byte{{0x20, 0x30, 0x40, 0xff}, {0xf0, 0xf0, 0xe0, 0xff}, {0xff, 0, 0, 0xff}, {0, 0xff, 0, 0xff}}
	for _, tc := range []struct {
		name    string
		w, h    int
		colours int
		noise   float64 // share of pixels not the first colour
	}{
		{"one colour", 64, 48, 1, 0},
		{"text on flat colour", 100, 37, 2, 0.08},
		{"two colours, half and half", 33, 17, 2, 0.5},
		{"three colours", 40, 40, 3, 0.2},
		{"four colours, dense", 50, 20, 4, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.w, tc.h, "hextile")
			r.next(t)
			r.next(t)
			img := image.NewRGBA(image.Rect(0, 0, tc.w, tc.h))
			for y := range tc.h {
				for x := range tc.w {
					c := palette[0]
					if rng.Float64() < tc.noise {
						c = palette[1+rng.IntN(max(tc.colours-1, 1))]
					}
					copy(img.Pix[img.PixOffset(x, y):], c[:])
				}
			}
			rects := []image.Rectangle{img.Bounds(), image.Rect(3, 5, tc.w-1, tc.h-2)}
			for _, rect := range rects {
				m := r.write(t, func(s *ServerConn) error { return s.WriteUpdate(img, rect) })
				if len(m.Rects) != 1 || m.Rects[0].Encoding != EncodingHextile {
					t.Fatalf("update %+v, want one Hextile rectangle", m.Rects)
				}
				if tc.name == "text on flat colour" && rect == img.Bounds() && m.Bytes > int64(tc.w*tc.h*4/3) {
					t.Errorf("text on flat colour took %d bytes, Raw %d", m.Bytes, tc.w*tc.h*4)
				}
			}
			if got := r.c.Framebuffer(); !reflect.DeepEqual(got.Pix, img.Pix) {
				t.Error("the framebuffer differs from the image sent")
			}
		})
	}
}
