package rfb

import (
	"bufio"
	"bytes"
	"image"
	"io"
	"testing"
)

// FuzzServerReadMessage feeds hostile bytes to the server's reader of client messages, and
// encodes an update in every pixel format it accepts.
func FuzzServerReadMessage(f *testing.F) {
	pf := make([]byte, 16)
	StandardFormat().put(pf)
	rgb565 := PixelFormat{BitsPerPixel: 16, Depth: 16, BigEndian: true, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}
	pf565 := make([]byte, 16)
	rgb565.put(pf565)
	f.Add(append([]byte{0, 0, 0, 0}, pf...))
	f.Add(append([]byte{0, 0, 0, 0}, pf565...))
	f.Add([]byte{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21})
	f.Add([]byte{3, 1, 0, 0, 0, 0, 0, 10, 0, 10})
	f.Add([]byte{4, 1, 0, 0, 0, 0, 0, 'a'})
	f.Add([]byte{5, 1, 0, 10, 0, 20})
	f.Add([]byte{6, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'})
	f.Add([]byte{6, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'h', 'i'})
	f.Add([]byte{2, 0, 0xff, 0xff})
	f.Add([]byte{9})
	// SetDesktopSize 800x600, one screen; then one claiming 255 screens.
	f.Add([]byte{251, 0, 3, 32, 2, 88, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 32, 2, 88, 0, 0, 0, 0})
	f.Add([]byte{251, 0, 3, 32, 2, 88, 255, 0})
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 31)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &ServerConn{r: bufio.NewReader(bytes.NewReader(data)), w: bufio.NewWriter(io.Discard), enc: newEncoder(StandardFormat())}
		for {
			m, err := s.ReadMessage()
			if err != nil {
				return
			}
			switch m := m.(type) {
			case SetEncodings:
				if len(m.Encodings) > MaxEncodings {
					t.Fatalf("%d encodings accepted", len(m.Encodings))
				}
			case SetDesktopSize:
				if len(m.Screens) > MaxScreens {
					t.Fatalf("%d screens accepted", len(m.Screens))
				}
			case ClientCutText:
				if len(m.Text) > 2*MaxCutText {
					t.Fatalf("%d bytes of cut text kept", len(m.Text))
				}
			case SetPixelFormat:
				if err := s.WriteUpdate(img, img.Rect); err != nil {
					t.Fatalf("WriteUpdate in %v: %v", m.Format, err)
				}
			}
		}
	})
}

// FuzzClientReadMessage feeds hostile bytes to the client's reader of server messages, with
// a small framebuffer limit so that resizes stay cheap; a leading 0xff byte followed by a
// pixel format makes the client decode in that format instead of the standard one.
func FuzzClientReadMessage(f *testing.F) {
	raw := []byte{0, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 1, 0, 0, 0, 0}
	raw = append(raw, 1, 2, 3, 4, 5, 6, 7, 8)
	f.Add(raw)
	f.Add([]byte{0, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 40, 0, 30, 0xff, 0xff, 0xff, 0x21})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 7})
	f.Add([]byte{1, 0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{2, 2, 3, 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{7})
	// Hextile: a 20x18 rectangle (two tiles by two): a background tile, a foreground tile
	// with two subrectangles, a coloured subrectangle, a raw tile.
	hex := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 20, 0, 18, 0, 0, 0, 5}
	hex = append(hex, 2, 1, 2, 3, 0)
	hex = append(hex, 4|8, 9, 9, 9, 0, 2, 0x11, 0x30, 0x00, 0x03)
	hex = append(hex, 8|16, 1, 5, 5, 5, 0, 0x00, 0x11)
	hex = append(hex, 1)
	hex = append(hex, make([]byte, 4*4*2)...)
	f.Add(hex)
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 16, 0, 16, 0, 0, 0, 5, 8, 1, 0xff, 0xff}) // no background
	// ExtendedDesktopSize: by a viewer, OK, 800x600, one screen.
	f.Add([]byte{0, 0, 0, 1, 0, 1, 0, 0, 3, 32, 2, 88, 0xff, 0xff, 0xfe, 0xcc, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 32, 2, 88, 0, 0, 0, 0})
	pf := PixelFormat{BitsPerPixel: 8, Depth: 8, TrueColour: true, RedMax: 7, GreenMax: 7, BlueMax: 3, GreenShift: 3, BlueShift: 6}
	b := make([]byte, 17)
	b[0] = 0xff
	pf.put(b[1:])
	f.Add(append(b, raw...))
	f.Fuzz(func(t *testing.T, data []byte) {
		format := StandardFormat()
		if len(data) >= 17 && data[0] == 0xff {
			format = parsePixelFormat(data[1:17])
			data = data[17:]
			if format.Validate() != nil {
				return
			}
		}
		c := &Client{r: bufio.NewReader(bytes.NewReader(data)), w: io.Discard, maxPixels: 64 * 64, dec: newDecoder(format)}
		c.resize(16, 16)
		var read int64
		for {
			m, err := c.ReadMessage()
			if err != nil {
				break
			}
			read += m.Bytes
			if len(c.fb.Pix) > 4*c.maxPixels {
				t.Fatalf("framebuffer of %d bytes, limit %d pixels", len(c.fb.Pix), c.maxPixels)
			}
			if b := c.fb.Bounds(); b.Dx() != c.Width() || b.Dy() != c.Height() {
				t.Fatalf("framebuffer %v but size %dx%d", b, c.Width(), c.Height())
			}
		}
		if read > int64(len(data)) {
			t.Fatalf("messages claim %d bytes of %d", read, len(data))
		}
	})
}
