package rfb

import (
	"fmt"
	"image"
	"io"
)

// Hextile (RFC 6143 section 7.7.4) sends a rectangle as 16×16 tiles, each a background
// colour with rectangles of other colours on it, or raw pixels. A desktop of text on flat
// colour — the builtin desktop, a terminal — takes a few bytes a tile where Raw takes a
// kilobyte; every VNC viewer (TigerVNC, noVNC, vncsnapshot) decodes it.

// The subencoding bits of a Hextile tile.
const (
	hextileRaw                 = 1
	hextileBackground          = 2
	hextileForeground          = 4
	hextileAnySubrects         = 8
	hextileSubrectsColoured    = 16
	hextileTile                = 16
	hextileMaxSubrects         = 255
	hextileSubencodingsAllowed = hextileRaw | hextileBackground | hextileForeground | hextileAnySubrects | hextileSubrectsColoured
)

// appendHextile appends r of img, Hextile encoded with enc, to dst. A tile of one colour is
// its background; one of two colours the more common as background and runs of the other,
// a row high, as foreground subrectangles, unless those take more bytes than the raw tile;
// any other tile is raw.
func appendHextile(dst []byte, enc *encoder, img *image.RGBA, r image.Rectangle) []byte {
	var bg, fg [4]byte
	haveBG, haveFG := false, false
	var sub []byte
	for ty := r.Min.Y; ty < r.Max.Y; ty += hextileTile {
		for tx := r.Min.X; tx < r.Max.X; tx += hextileTile {
			t := image.Rect(tx, ty, min(tx+hextileTile, r.Max.X), min(ty+hextileTile, r.Max.Y))
			c0, c1, n0, two := tileColours(img, t)
			if !two && n0 < 0 {
				dst = appendRawTile(dst, enc, img, t)
				haveBG, haveFG = false, false
				continue
			}
			back, fore := c0, c1
			if two && n0 < t.Dx()*t.Dy()-n0 {
				back, fore = c1, c0
			}
			mask := byte(0)
			if !haveBG || back != bg {
				mask |= hextileBackground
			}
			sub = sub[:0]
			runs := 0
			if two {
				if !haveFG || fore != fg {
					mask |= hextileForeground
				}
				mask |= hextileAnySubrects
				for y := t.Min.Y; y < t.Max.Y && runs <= hextileMaxSubrects; y++ {
					for x := t.Min.X; x < t.Max.X; {
						if pixelAt(img, x, y) != fore {
							x++
							continue
						}
						start := x
						for x < t.Max.X && pixelAt(img, x, y) == fore {
							x++
						}
						sub = append(sub, byte((start-t.Min.X)<<4|(y-t.Min.Y)), byte((x-start-1)<<4))
						runs++
					}
				}
				if runs > hextileMaxSubrects || 1+2*enc.bpp+1+len(sub) >= 1+t.Dx()*t.Dy()*enc.bpp {
					dst = appendRawTile(dst, enc, img, t)
					haveBG, haveFG = false, false
					continue
				}
			}
			dst = append(dst, mask)
			if mask&hextileBackground != 0 {
				dst = enc.appendPixels(dst, back[:])
				bg, haveBG = back, true
			}
			if mask&hextileForeground != 0 {
				dst = enc.appendPixels(dst, fore[:])
				fg, haveFG = fore, true
			}
			if mask&hextileAnySubrects != 0 {
				dst = append(dst, byte(runs))
				dst = append(dst, sub...)
			}
		}
	}
	return dst
}

// appendRawTile appends tile t of img as a raw Hextile tile.
func appendRawTile(dst []byte, enc *encoder, img *image.RGBA, t image.Rectangle) []byte {
	dst = append(dst, hextileRaw)
	for y := t.Min.Y; y < t.Max.Y; y++ {
		i := img.PixOffset(t.Min.X, y)
		dst = enc.appendPixels(dst, img.Pix[i:i+4*t.Dx()])
	}
	return dst
}

// pixelAt returns the RGBA bytes of img at x, y.
func pixelAt(img *image.RGBA, x, y int) [4]byte {
	i := img.PixOffset(x, y)
	return [4]byte(img.Pix[i : i+4])
}

// tileColours returns t's colours when it has one or two: c0 with n0 pixels, c1, and whether
// there are two; n0 < 0 when there are more.
func tileColours(img *image.RGBA, t image.Rectangle) (c0, c1 [4]byte, n0 int, two bool) {
	c0 = pixelAt(img, t.Min.X, t.Min.Y)
	for y := t.Min.Y; y < t.Max.Y; y++ {
		for x := t.Min.X; x < t.Max.X; x++ {
			switch p := pixelAt(img, x, y); {
			case p == c0:
				n0++
			case !two:
				c1, two = p, true
			case p != c1:
				return c0, c1, -1, false
			}
		}
	}
	return c0, c1, n0, two
}

// readHextile reads a Hextile rectangle into the framebuffer and returns the bytes read.
func (c *Client) readHextile(r image.Rectangle) (int64, error) {
	bpp := c.dec.bpp
	var read int64
	var bg, fg [4]byte
	haveBG := false
	px := make([]byte, bpp)
	pixel := func(dst *[4]byte) error {
		if _, err := io.ReadFull(c.r, px); err != nil {
			return err
		}
		read += int64(bpp)
		c.dec.decode(dst[:], px)
		return nil
	}
	var b [2]byte
	for ty := r.Min.Y; ty < r.Max.Y; ty += hextileTile {
		for tx := r.Min.X; tx < r.Max.X; tx += hextileTile {
			t := image.Rect(tx, ty, min(tx+hextileTile, r.Max.X), min(ty+hextileTile, r.Max.Y))
			if _, err := io.ReadFull(c.r, b[:1]); err != nil {
				return read, fmt.Errorf("reading Hextile tile %v: %w", t, unexpected(err))
			}
			read++
			mask := b[0]
			if mask&^hextileSubencodingsAllowed != 0 {
				return read, fmt.Errorf("Hextile tile %v: subencoding %#x", t, mask)
			}
			if mask&hextileRaw != 0 {
				n, err := c.readRaw(t)
				read += n
				if err != nil {
					return read, err
				}
				continue // the colours carry over past it, as servers expect
			}
			if mask&hextileBackground != 0 {
				if err := pixel(&bg); err != nil {
					return read, fmt.Errorf("reading Hextile tile %v: %w", t, unexpected(err))
				}
				haveBG = true
			}
			if !haveBG {
				return read, fmt.Errorf("Hextile tile %v has no background", t)
			}
			fillRect(c.fb, t, bg)
			if mask&hextileForeground != 0 {
				if err := pixel(&fg); err != nil {
					return read, fmt.Errorf("reading Hextile tile %v: %w", t, unexpected(err))
				}
			}
			if mask&hextileAnySubrects == 0 {
				continue
			}
			if _, err := io.ReadFull(c.r, b[:1]); err != nil {
				return read, fmt.Errorf("reading Hextile tile %v: %w", t, unexpected(err))
			}
			read++
			for range int(b[0]) {
				colour := fg
				if mask&hextileSubrectsColoured != 0 {
					if err := pixel(&colour); err != nil {
						return read, fmt.Errorf("reading Hextile subrectangle: %w", unexpected(err))
					}
				}
				if _, err := io.ReadFull(c.r, b[:2]); err != nil {
					return read, fmt.Errorf("reading Hextile subrectangle: %w", unexpected(err))
				}
				read += 2
				x, y := t.Min.X+int(b[0]>>4), t.Min.Y+int(b[0]&15)
				s := image.Rect(x, y, x+int(b[1]>>4)+1, y+int(b[1]&15)+1)
				if !s.In(t) {
					return read, fmt.Errorf("Hextile subrectangle %v outside its tile %v", s, t)
				}
				fillRect(c.fb, s, colour)
			}
		}
	}
	return read, nil
}

// fillRect paints r of fb in colour (RGBA bytes).
func fillRect(fb *image.RGBA, r image.Rectangle, colour [4]byte) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		i := fb.PixOffset(r.Min.X, y)
		for x := 0; x < r.Dx(); x++ {
			copy(fb.Pix[i+4*x:i+4*x+4], colour[:])
		}
	}
}
