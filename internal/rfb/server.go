package rfb

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"image"
	"io"
	"slices"
	"sync"
)

// ServerConn is the server end of one RFB connection, past its handshake. One goroutine may
// read client messages while another writes updates.
type ServerConn struct {
	r *bufio.Reader
	w *bufio.Writer // used only by writers
	// row is scratch for one row of pixels in the client's format; used only by writers.
	row []byte

	mu          sync.Mutex // guards enc, desktopSize, extDesktopSize and hextile
	enc         *encoder
	desktopSize bool
	// extDesktopSize: the viewer speaks ExtendedDesktopSize (it may ask to resize).
	extDesktopSize bool
	hextile        bool // the viewer decodes Hextile
}

// ServerHandshake speaks the server's half of the RFB handshake on c: it offers version 3.8
// (and accepts a 3.3 or 3.7 viewer), offers only security type None, reads ClientInit and
// sends ServerInit announcing a width×height framebuffer in StandardFormat, called name.
// Bound it with a deadline on c.
func ServerHandshake(c io.ReadWriter, width, height int, name string) (*ServerConn, error) {
	if width <= 0 || height <= 0 || width > 0xffff || height > 0xffff {
		return nil, fmt.Errorf("framebuffer size %dx%d out of range", width, height)
	}
	if len(name) > MaxName {
		name = name[:MaxName]
	}
	s := &ServerConn{
		r:   bufio.NewReader(c),
		w:   bufio.NewWriterSize(c, 32<<10),
		enc: newEncoder(StandardFormat()),
	}
	if err := s.handshake(width, height, name); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *ServerConn) handshake(width, height int, name string) error {
	var b [12]byte
	s.w.WriteString(version38)
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending protocol version: %w", err)
	}
	if _, err := io.ReadFull(s.r, b[:12]); err != nil {
		return fmt.Errorf("reading protocol version: %w", unexpected(err))
	}
	minor, err := parseVersion(b[:12])
	if err != nil {
		return err
	}
	if minor == 3 {
		s.w.Write(binary.BigEndian.AppendUint32(nil, securityNone))
	} else {
		s.w.Write([]byte{1, securityNone})
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("sending security types: %w", err)
		}
		if _, err := io.ReadFull(s.r, b[:1]); err != nil {
			return fmt.Errorf("reading security type: %w", unexpected(err))
		}
		if b[0] != securityNone {
			if minor == 8 {
				s.w.Write(appendString(binary.BigEndian.AppendUint32(nil, 1), "only security type None is offered"))
				s.w.Flush()
			}
			return fmt.Errorf("viewer chose security type %d: %w", b[0], ErrNoSecurity)
		}
		if minor == 8 {
			s.w.Write(binary.BigEndian.AppendUint32(nil, 0))
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending security result: %w", err)
	}
	if _, err := io.ReadFull(s.r, b[:1]); err != nil {
		return fmt.Errorf("reading ClientInit: %w", unexpected(err))
	}
	init := make([]byte, 20, 24+len(name))
	binary.BigEndian.PutUint16(init[0:], uint16(width))
	binary.BigEndian.PutUint16(init[2:], uint16(height))
	StandardFormat().put(init[4:20])
	s.w.Write(appendString(init, name))
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending ServerInit: %w", err)
	}
	return nil
}

// ReadMessage reads one client message. It applies a SetPixelFormat (refusing a format it
// cannot convert to) and a SetEncodings to the updates written after it, and returns every
// message so that the caller can act on requests and input.
func (s *ServerConn) ReadMessage() (ClientMessage, error) {
	m, err := ReadClientMessage(s.r)
	if err != nil {
		return nil, err
	}
	switch m := m.(type) {
	case SetPixelFormat:
		if err := m.Format.Validate(); err != nil {
			return nil, fmt.Errorf("viewer asked for pixel format %v: %w", m.Format, err)
		}
		enc := newEncoder(m.Format)
		s.mu.Lock()
		s.enc = enc
		s.mu.Unlock()
	case SetEncodings:
		s.mu.Lock()
		s.desktopSize = slices.Contains(m.Encodings, EncodingDesktopSize)
		s.extDesktopSize = slices.Contains(m.Encodings, EncodingExtendedDesktopSize)
		s.hextile = slices.Contains(m.Encodings, EncodingHextile)
		s.mu.Unlock()
	}
	return m, nil
}

// PixelFormat returns the format the client asked for, or StandardFormat if it did not.
func (s *ServerConn) PixelFormat() PixelFormat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enc.pf
}

// WriteUpdate sends one FramebufferUpdate holding each of rects of img in the client's pixel
// format: Hextile encoded when the viewer said it decodes it, else Raw. Every rectangle must
// lie within img's bounds, whose origin is the framebuffer's; empty ones are left out. Only
// one goroutine may write at a time.
func (s *ServerConn) WriteUpdate(img *image.RGBA, rects ...image.Rectangle) error {
	s.mu.Lock()
	enc, hextile := s.enc, s.hextile
	s.mu.Unlock()
	n := 0
	for _, r := range rects {
		if !r.In(img.Bounds()) || r.Min.X < 0 || r.Min.Y < 0 || r.Max.X > 0xffff || r.Max.Y > 0xffff {
			return fmt.Errorf("update rectangle %v outside the framebuffer %v", r, img.Bounds())
		}
		if !r.Empty() {
			n++
		}
	}
	s.w.Write([]byte{byte(MsgFramebufferUpdate), 0, byte(n >> 8), byte(n)})
	for _, r := range rects {
		if r.Empty() {
			continue
		}
		if hextile {
			s.w.Write(rectHeader(r, EncodingHextile))
			s.row = appendHextile(s.row[:0], enc, img, r)
			if _, err := s.w.Write(s.row); err != nil {
				return fmt.Errorf("sending update: %w", err)
			}
			continue
		}
		s.w.Write(rectHeader(r, EncodingRaw))
		for y := r.Min.Y; y < r.Max.Y; y++ {
			i := img.PixOffset(r.Min.X, y)
			s.row = enc.appendPixels(s.row[:0], img.Pix[i:i+4*r.Dx()])
			if _, err := s.w.Write(s.row); err != nil {
				return fmt.Errorf("sending update: %w", err)
			}
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending update: %w", err)
	}
	return nil
}

// WriteDesktopSize sends a FramebufferUpdate whose one DesktopSize pseudo-rectangle tells the
// client that the framebuffer is now width×height. It returns ErrNoDesktopSize if the client
// did not announce that it understands it.
func (s *ServerConn) WriteDesktopSize(width, height int) error {
	s.mu.Lock()
	ok := s.desktopSize
	s.mu.Unlock()
	if !ok {
		return ErrNoDesktopSize
	}
	if width <= 0 || height <= 0 || width > 0xffff || height > 0xffff {
		return fmt.Errorf("framebuffer size %dx%d out of range", width, height)
	}
	s.w.Write([]byte{byte(MsgFramebufferUpdate), 0, 0, 1})
	s.w.Write(rectHeader(image.Rect(0, 0, width, height), EncodingDesktopSize))
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending desktop size: %w", err)
	}
	return nil
}

// WriteCutText sends text as the server's clipboard (ServerCutText, ISO 8859-1: a rune
// beyond it is sent as '?'), cut to MaxCutText bytes.
func (s *ServerConn) WriteCutText(text string) error {
	s.w.Write(cutTextMessage(byte(MsgServerCutText), text))
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending cut text: %w", err)
	}
	return nil
}

// ExtendedDesktopSize reports whether the viewer said it speaks ExtendedDesktopSize: it may
// then send SetDesktopSize, once it has had an ExtendedDesktopSize rectangle.
func (s *ServerConn) ExtendedDesktopSize() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extDesktopSize
}

// WriteExtendedDesktopSize sends a FramebufferUpdate whose one ExtendedDesktopSize
// rectangle says that the framebuffer is width×height, one screen, for reason (ResizeByServer,
// ResizeByViewer) with status (ResizeOK, or why a SetDesktopSize was refused). It returns
// ErrNoDesktopSize if the viewer did not announce that it understands it.
func (s *ServerConn) WriteExtendedDesktopSize(reason, status uint16, width, height int) error {
	if !s.ExtendedDesktopSize() {
		return ErrNoDesktopSize
	}
	if width <= 0 || height <= 0 || width > 0xffff || height > 0xffff {
		return fmt.Errorf("framebuffer size %dx%d out of range", width, height)
	}
	s.w.Write([]byte{byte(MsgFramebufferUpdate), 0, 0, 1})
	s.w.Write(rectHeader(image.Rect(int(reason), int(status), int(reason)+width, int(status)+height), EncodingExtendedDesktopSize))
	b := []byte{1, 0, 0, 0} // one screen
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(width))
	b = binary.BigEndian.AppendUint16(b, uint16(height))
	b = binary.BigEndian.AppendUint32(b, 0)
	s.w.Write(b)
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("sending desktop size: %w", err)
	}
	return nil
}

// rectHeader returns the 12-byte header of one rectangle of an update.
func rectHeader(r image.Rectangle, encoding int32) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b[0:], uint16(r.Min.X))
	binary.BigEndian.PutUint16(b[2:], uint16(r.Min.Y))
	binary.BigEndian.PutUint16(b[4:], uint16(r.Dx()))
	binary.BigEndian.PutUint16(b[6:], uint16(r.Dy()))
	binary.BigEndian.PutUint32(b[8:], uint32(encoding))
	return b
}
