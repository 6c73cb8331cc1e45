package rfb

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// PixelFormat is how an RFB peer lays out one pixel on the wire (RFC 6143 section 7.4).
type PixelFormat struct {
	// BitsPerPixel is 8, 16 or 32.
	BitsPerPixel uint8
	// Depth is the number of useful bits in a pixel; informational here.
	Depth uint8
	// BigEndian is true when multi-byte pixels are sent most significant byte first.
	BigEndian bool
	// TrueColour is true when pixels hold red, green and blue values; false (a colour map)
	// is not supported.
	TrueColour bool
	// RedMax, GreenMax and BlueMax are the largest value of each channel, 2^n - 1.
	RedMax, GreenMax, BlueMax uint16
	// RedShift, GreenShift and BlueShift are how far each channel is shifted left in a pixel.
	RedShift, GreenShift, BlueShift uint8
}

// StandardFormat returns the pixel format both ends of this package prefer: 32 bits per
// pixel, depth 24, true colour, little-endian, red at bit 16, green at 8 and blue at 0, so
// that a pixel's bytes on the wire read blue, green, red, padding.
func StandardFormat() PixelFormat {
	return PixelFormat{
		BitsPerPixel: 32, Depth: 24, TrueColour: true,
		RedMax: 255, GreenMax: 255, BlueMax: 255,
		RedShift: 16, GreenShift: 8, BlueShift: 0,
	}
}

// Validate reports whether the format can be converted to and from: 8, 16 or 32 bits per
// pixel, true colour, and every channel non-empty and shifted within the pixel.
func (pf PixelFormat) Validate() error {
	switch pf.BitsPerPixel {
	case 8, 16, 32:
	default:
		return fmt.Errorf("%d bits per pixel: want 8, 16 or 32", pf.BitsPerPixel)
	}
	if !pf.TrueColour {
		return ErrColourMap
	}
	if pf.RedMax == 0 || pf.GreenMax == 0 || pf.BlueMax == 0 {
		return fmt.Errorf("channel maximum of zero in %v", pf)
	}
	if pf.RedShift >= pf.BitsPerPixel || pf.GreenShift >= pf.BitsPerPixel || pf.BlueShift >= pf.BitsPerPixel {
		return fmt.Errorf("channel shift beyond %d bits in %v", pf.BitsPerPixel, pf)
	}
	return nil
}

// String returns the format in a compact form such as "32bpp/24 le rgb 255:255:255 16:8:0".
func (pf PixelFormat) String() string {
	e, c := "le", "rgb"
	if pf.BigEndian {
		e = "be"
	}
	if !pf.TrueColour {
		c = "map"
	}
	return fmt.Sprintf("%dbpp/%d %s %s %d:%d:%d %d:%d:%d", pf.BitsPerPixel, pf.Depth, e, c,
		pf.RedMax, pf.GreenMax, pf.BlueMax, pf.RedShift, pf.GreenShift, pf.BlueShift)
}

// bytesPerPixel returns the size of one pixel on the wire.
func (pf PixelFormat) bytesPerPixel() int { return int(pf.BitsPerPixel) / 8 }

// put writes the format's 16 bytes into b.
func (pf PixelFormat) put(b []byte) {
	b[0], b[1] = pf.BitsPerPixel, pf.Depth
	b[2], b[3] = boolByte(pf.BigEndian), boolByte(pf.TrueColour)
	binary.BigEndian.PutUint16(b[4:], pf.RedMax)
	binary.BigEndian.PutUint16(b[6:], pf.GreenMax)
	binary.BigEndian.PutUint16(b[8:], pf.BlueMax)
	b[10], b[11], b[12] = pf.RedShift, pf.GreenShift, pf.BlueShift
	b[13], b[14], b[15] = 0, 0, 0
}

// parsePixelFormat reads a format from its 16 bytes.
func parsePixelFormat(b []byte) PixelFormat {
	return PixelFormat{
		BitsPerPixel: b[0], Depth: b[1], BigEndian: b[2] != 0, TrueColour: b[3] != 0,
		RedMax:     binary.BigEndian.Uint16(b[4:]),
		GreenMax:   binary.BigEndian.Uint16(b[6:]),
		BlueMax:    binary.BigEndian.Uint16(b[8:]),
		RedShift:   b[10],
		GreenShift: b[11],
		BlueShift:  b[12],
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// byteOffsets reports, for a 32-bit format with 8-bit channels on byte boundaries, where each
// channel's byte sits in a pixel on the wire; ok is false for any other format.
func (pf PixelFormat) byteOffsets() (r, g, b int, ok bool) {
	if pf.BitsPerPixel != 32 || pf.RedMax != 255 || pf.GreenMax != 255 || pf.BlueMax != 255 {
		return 0, 0, 0, false
	}
	if pf.RedShift%8 != 0 || pf.GreenShift%8 != 0 || pf.BlueShift%8 != 0 {
		return 0, 0, 0, false
	}
	off := func(shift uint8) int {
		if pf.BigEndian {
			return 3 - int(shift)/8
		}
		return int(shift) / 8
	}
	r, g, b = off(pf.RedShift), off(pf.GreenShift), off(pf.BlueShift)
	return r, g, b, r != g && g != b && r != b
}

// encoder converts RGBA pixels into one valid pixel format.
type encoder struct {
	pf         PixelFormat
	bpp        int
	fast       bool
	ri, gi, bi int
	r, g, b    [256]uint32 // each 8-bit value scaled and shifted into place
}

func newEncoder(pf PixelFormat) *encoder {
	e := &encoder{pf: pf, bpp: pf.bytesPerPixel()}
	e.ri, e.gi, e.bi, e.fast = pf.byteOffsets()
	for v := range 256 {
		e.r[v] = scaleTo(uint8(v), pf.RedMax) << pf.RedShift
		e.g[v] = scaleTo(uint8(v), pf.GreenMax) << pf.GreenShift
		e.b[v] = scaleTo(uint8(v), pf.BlueMax) << pf.BlueShift
	}
	return e
}

// scaleTo maps an 8-bit channel value onto 0..max, rounding to nearest.
func scaleTo(v uint8, max uint16) uint32 {
	return (uint32(v)*uint32(max) + 127) / 255
}

// scaleFrom maps a channel value in 0..max onto 0..255, rounding to nearest.
func scaleFrom(v, max uint32) uint8 {
	if max == 0 {
		return 0
	}
	v &= max
	return uint8((v*255 + max/2) / max)
}

// appendPixels appends the RGBA pixels in pix (4 bytes each) converted to e's format.
func (e *encoder) appendPixels(dst, pix []byte) []byte {
	n := len(pix) / 4
	start := len(dst)
	dst = slices.Grow(dst, n*e.bpp)[:start+n*e.bpp]
	out := dst[start:]
	if e.fast {
		for i := range n {
			p, o := pix[i*4:i*4+4:i*4+4], out[i*4:i*4+4:i*4+4]
			o[0], o[1], o[2], o[3] = 0, 0, 0, 0
			o[e.ri], o[e.gi], o[e.bi] = p[0], p[1], p[2]
		}
		return dst
	}
	for i := range n {
		p := pix[i*4 : i*4+3 : i*4+3]
		v := e.r[p[0]] | e.g[p[1]] | e.b[p[2]]
		switch e.bpp {
		case 1:
			out[i] = byte(v)
		case 2:
			if e.pf.BigEndian {
				binary.BigEndian.PutUint16(out[i*2:], uint16(v))
			} else {
				binary.LittleEndian.PutUint16(out[i*2:], uint16(v))
			}
		default:
			if e.pf.BigEndian {
				binary.BigEndian.PutUint32(out[i*4:], v)
			} else {
				binary.LittleEndian.PutUint32(out[i*4:], v)
			}
		}
	}
	return dst
}

// decoder converts pixels in one valid pixel format into RGBA.
type decoder struct {
	pf         PixelFormat
	bpp        int
	fast       bool
	ri, gi, bi int
}

func newDecoder(pf PixelFormat) *decoder {
	d := &decoder{pf: pf, bpp: pf.bytesPerPixel()}
	d.ri, d.gi, d.bi, d.fast = pf.byteOffsets()
	return d
}

// decode writes the pixels in src, in d's format, into dst as opaque RGBA.
func (d *decoder) decode(dst, src []byte) {
	n := len(src) / d.bpp
	if d.fast {
		for i := range n {
			s, o := src[i*4:i*4+4:i*4+4], dst[i*4:i*4+4:i*4+4]
			o[0], o[1], o[2], o[3] = s[d.ri], s[d.gi], s[d.bi], 0xff
		}
		return
	}
	pf := d.pf
	for i := range n {
		var v uint32
		switch d.bpp {
		case 1:
			v = uint32(src[i])
		case 2:
			if pf.BigEndian {
				v = uint32(binary.BigEndian.Uint16(src[i*2:]))
			} else {
				v = uint32(binary.LittleEndian.Uint16(src[i*2:]))
			}
		default:
			if pf.BigEndian {
				v = binary.BigEndian.Uint32(src[i*4:])
			} else {
				v = binary.LittleEndian.Uint32(src[i*4:])
			}
		}
		o := dst[i*4 : i*4+4 : i*4+4]
		o[0] = scaleFrom(v>>pf.RedShift, uint32(pf.RedMax))
		o[1] = scaleFrom(v>>pf.GreenShift, uint32(pf.GreenMax))
		o[2] = scaleFrom(v>>pf.BlueShift, uint32(pf.BlueMax))
		o[3] = 0xff
	}
}
