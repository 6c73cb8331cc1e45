package rfb

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/draw"
	"io"
)

// Message describes one server message that Client.ReadMessage read and applied.
type Message struct {
	// Type is the message's type.
	Type MessageType
	// Rects lists the rectangles of a FramebufferUpdate in the order they came.
	Rects []Rect
	// Bytes is the message's size on the wire.
	Bytes int64
}

// Rect is one rectangle of a FramebufferUpdate.
type Rect struct {
	// Bounds is the area painted; for DesktopSize, the new size at the origin.
	Bounds image.Rectangle
	// Encoding is how it was encoded: EncodingRaw, EncodingHextile, EncodingCopyRect,
	// EncodingDesktopSize or EncodingExtendedDesktopSize.
	Encoding int32
	// Reason and Status are an ExtendedDesktopSize's (ResizeByServer, ResizeByViewer;
	// ResizeOK or why a SetDesktopSize was refused).
	Reason, Status uint16
}

// ReadMessage reads one server message and applies it: a FramebufferUpdate paints the
// framebuffer (Raw and CopyRect rectangles) or resizes it (DesktopSize), a ServerCutText
// becomes LastCutText, SetColourMapEntries is skipped and Bell only reported. Rectangles
// outside the framebuffer, other encodings and unknown message types are errors, after which
// the connection cannot be read further.
func (c *Client) ReadMessage() (Message, error) {
	var b [12]byte
	if _, err := io.ReadFull(c.r, b[:1]); err != nil {
		return Message{}, err
	}
	m := Message{Type: MessageType(b[0]), Bytes: 1}
	switch m.Type {
	case MsgFramebufferUpdate:
		return m, c.readUpdate(&m)
	case MsgSetColourMapEntries:
		if _, err := io.ReadFull(c.r, b[:5]); err != nil {
			return m, fmt.Errorf("reading SetColourMapEntries: %w", unexpected(err))
		}
		n := 6 * int64(binary.BigEndian.Uint16(b[3:]))
		if _, err := io.CopyN(io.Discard, c.r, n); err != nil {
			return m, fmt.Errorf("reading SetColourMapEntries: %w", unexpected(err))
		}
		m.Bytes += 5 + n
	case MsgBell:
	case MsgServerCutText:
		if _, err := io.ReadFull(c.r, b[:7]); err != nil {
			return m, fmt.Errorf("reading ServerCutText: %w", unexpected(err))
		}
		n := binary.BigEndian.Uint32(b[3:])
		text, err := readCutText(c.r, n)
		if err != nil {
			return m, fmt.Errorf("reading ServerCutText: %w", err)
		}
		c.mu.Lock()
		c.cut = text
		c.mu.Unlock()
		m.Bytes += 7 + int64(n)
	default:
		return m, fmt.Errorf("unknown server message type %d", b[0])
	}
	return m, nil
}

// readUpdate reads the rest of a FramebufferUpdate into m and the framebuffer.
func (c *Client) readUpdate(m *Message) error {
	var b [12]byte
	if _, err := io.ReadFull(c.r, b[:3]); err != nil {
		return fmt.Errorf("reading FramebufferUpdate: %w", unexpected(err))
	}
	m.Bytes += 3
	n := int(binary.BigEndian.Uint16(b[1:]))
	for range n {
		if _, err := io.ReadFull(c.r, b[:12]); err != nil {
			return fmt.Errorf("reading rectangle header: %w", unexpected(err))
		}
		m.Bytes += 12
		x, y := int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
		w, h := int(binary.BigEndian.Uint16(b[4:])), int(binary.BigEndian.Uint16(b[6:]))
		r := Rect{Bounds: image.Rect(x, y, x+w, y+h), Encoding: int32(binary.BigEndian.Uint32(b[8:]))}
		if r.Encoding != EncodingDesktopSize && r.Encoding != EncodingExtendedDesktopSize && !r.Bounds.In(c.fb.Bounds()) {
			return fmt.Errorf("rectangle %v outside the framebuffer %v", r.Bounds, c.fb.Bounds())
		}
		switch r.Encoding {
		case EncodingRaw:
			read, err := c.readRaw(r.Bounds)
			m.Bytes += read
			if err != nil {
				return err
			}
		case EncodingHextile:
			read, err := c.readHextile(r.Bounds)
			m.Bytes += read
			if err != nil {
				return err
			}
		case EncodingCopyRect:
			if _, err := io.ReadFull(c.r, b[:4]); err != nil {
				return fmt.Errorf("reading CopyRect: %w", unexpected(err))
			}
			m.Bytes += 4
			src := image.Pt(int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:])))
			if !r.Bounds.Sub(r.Bounds.Min).Add(src).In(c.fb.Bounds()) {
				return fmt.Errorf("CopyRect source %v outside the framebuffer %v", src, c.fb.Bounds())
			}
			draw.Draw(c.fb, r.Bounds, c.fb, src, draw.Src)
		case EncodingDesktopSize:
			if w == 0 || h == 0 || w*h > c.maxPixels {
				return fmt.Errorf("desktop size %dx%d out of range", w, h)
			}
			c.resize(w, h)
			r.Bounds = image.Rect(0, 0, w, h)
		case EncodingExtendedDesktopSize:
			if _, err := io.ReadFull(c.r, b[:4]); err != nil {
				return fmt.Errorf("reading ExtendedDesktopSize: %w", unexpected(err))
			}
			m.Bytes += 4
			screens := int(b[0])
			if screens > MaxScreens {
				return fmt.Errorf("ExtendedDesktopSize lists %d screens, more than %d", screens, MaxScreens)
			}
			for range screens {
				if _, err := io.ReadFull(c.r, b[:12]); err != nil {
					return fmt.Errorf("reading ExtendedDesktopSize: %w", unexpected(err))
				}
				if _, err := io.ReadFull(c.r, b[:4]); err != nil {
					return fmt.Errorf("reading ExtendedDesktopSize: %w", unexpected(err))
				}
				m.Bytes += 16
			}
			r.Reason, r.Status = uint16(x), uint16(y)
			if w == 0 || h == 0 || w*h > c.maxPixels {
				return fmt.Errorf("desktop size %dx%d out of range", w, h)
			}
			if r.Status == ResizeOK && (w != c.fb.Rect.Dx() || h != c.fb.Rect.Dy()) {
				c.resize(w, h)
			}
			r.Bounds = image.Rect(0, 0, w, h)
		default:
			return fmt.Errorf("rectangle %v in unsupported encoding %d", r.Bounds, r.Encoding)
		}
		m.Rects = append(m.Rects, r)
	}
	return nil
}

// readRaw reads a Raw rectangle into the framebuffer, one row at a time, and returns the
// bytes read.
func (c *Client) readRaw(r image.Rectangle) (int64, error) {
	if r.Empty() {
		return 0, nil
	}
	bpp := c.dec.bpp
	need := r.Dx() * bpp
	if cap(c.wire) < need {
		c.wire = make([]byte, need)
	}
	row := c.wire[:need]
	var read int64
	for y := r.Min.Y; y < r.Max.Y; y++ {
		if _, err := io.ReadFull(c.r, row); err != nil {
			return read, fmt.Errorf("reading Raw rectangle %v: %w", r, unexpected(err))
		}
		read += int64(need)
		i := c.fb.PixOffset(r.Min.X, y)
		c.dec.decode(c.fb.Pix[i:i+4*r.Dx()], row)
	}
	return read, nil
}
