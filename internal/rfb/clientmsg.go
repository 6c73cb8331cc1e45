package rfb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"io"
	"strings"
)

// ClientMessage is one message a viewer sends to a server: a SetPixelFormat, SetEncodings,
// FramebufferUpdateRequest, KeyEvent, PointerEvent or ClientCutText.
type ClientMessage interface{ clientMessage() }

// SetPixelFormat asks the server to send pixels in Format from now on.
type SetPixelFormat struct{ Format PixelFormat }

// SetEncodings lists the encodings the viewer understands, most preferred first.
type SetEncodings struct{ Encodings []int32 }

// FramebufferUpdateRequest asks for the pixels of a rectangle; when Incremental is set, only
// for what changed since the viewer last saw it.
type FramebufferUpdateRequest struct {
	Incremental         bool
	X, Y, Width, Height uint16
}

// KeyEvent presses (Down) or releases a key named by its X11 keysym.
type KeyEvent struct {
	Down bool
	Key  uint32
}

// PointerEvent moves the pointer to X, Y with Buttons (bit 0 is the left button) held.
type PointerEvent struct {
	Buttons uint8
	X, Y    uint16
}

// ClientCutText carries the viewer's clipboard, decoded from ISO 8859-1 and cut to
// MaxCutText bytes.
type ClientCutText struct{ Text string }

// SetDesktopSize asks a server that sent an ExtendedDesktopSize rectangle to make the
// framebuffer Width×Height, laid out as Screens.
type SetDesktopSize struct {
	Width, Height uint16
	Screens       []Screen
}

// Screen is one screen of a SetDesktopSize's layout.
type Screen struct {
	ID                  uint32
	X, Y, Width, Height uint16
	Flags               uint32
}

func (SetPixelFormat) clientMessage()           {}
func (SetEncodings) clientMessage()             {}
func (FramebufferUpdateRequest) clientMessage() {}
func (KeyEvent) clientMessage()                 {}
func (PointerEvent) clientMessage()             {}
func (ClientCutText) clientMessage()            {}
func (SetDesktopSize) clientMessage()           {}

// Rect returns the requested area as a rectangle.
func (r FramebufferUpdateRequest) Rect() image.Rectangle {
	return image.Rect(int(r.X), int(r.Y), int(r.X)+int(r.Width), int(r.Y)+int(r.Height))
}

// ReadClientMessage reads one message a viewer sent. It trusts nothing it reads: lists and
// texts are bounded by MaxEncodings and MaxCutText, and an unknown type is an error, since
// the rest of the stream cannot be framed without knowing its length.
func ReadClientMessage(r io.Reader) (ClientMessage, error) {
	var b [20]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return nil, err
	}
	switch t := b[0]; t {
	case msgSetPixelFormat:
		if _, err := io.ReadFull(r, b[:19]); err != nil {
			return nil, fmt.Errorf("reading SetPixelFormat: %w", unexpected(err))
		}
		return SetPixelFormat{Format: parsePixelFormat(b[3:19])}, nil
	case msgSetEncodings:
		if _, err := io.ReadFull(r, b[:3]); err != nil {
			return nil, fmt.Errorf("reading SetEncodings: %w", unexpected(err))
		}
		n := int(binary.BigEndian.Uint16(b[1:3]))
		if n > MaxEncodings {
			return nil, fmt.Errorf("SetEncodings lists %d encodings, more than %d", n, MaxEncodings)
		}
		encs := make([]int32, n)
		for i := range encs {
			if _, err := io.ReadFull(r, b[:4]); err != nil {
				return nil, fmt.Errorf("reading SetEncodings: %w", unexpected(err))
			}
			encs[i] = int32(binary.BigEndian.Uint32(b[:4]))
		}
		return SetEncodings{Encodings: encs}, nil
	case msgFramebufferUpdateRequest:
		if _, err := io.ReadFull(r, b[:9]); err != nil {
			return nil, fmt.Errorf("reading FramebufferUpdateRequest: %w", unexpected(err))
		}
		return FramebufferUpdateRequest{
			Incremental: b[0] != 0,
			X:           binary.BigEndian.Uint16(b[1:]),
			Y:           binary.BigEndian.Uint16(b[3:]),
			Width:       binary.BigEndian.Uint16(b[5:]),
			Height:      binary.BigEndian.Uint16(b[7:]),
		}, nil
	case msgKeyEvent:
		if _, err := io.ReadFull(r, b[:7]); err != nil {
			return nil, fmt.Errorf("reading KeyEvent: %w", unexpected(err))
		}
		return KeyEvent{Down: b[0] != 0, Key: binary.BigEndian.Uint32(b[3:])}, nil
	case msgPointerEvent:
		if _, err := io.ReadFull(r, b[:5]); err != nil {
			return nil, fmt.Errorf("reading PointerEvent: %w", unexpected(err))
		}
		return PointerEvent{
			Buttons: b[0],
			X:       binary.BigEndian.Uint16(b[1:]),
			Y:       binary.BigEndian.Uint16(b[3:]),
		}, nil
	case msgClientCutText:
		if _, err := io.ReadFull(r, b[:7]); err != nil {
			return nil, fmt.Errorf("reading ClientCutText: %w", unexpected(err))
		}
		text, err := readCutText(r, binary.BigEndian.Uint32(b[3:]))
		if err != nil {
			return nil, fmt.Errorf("reading ClientCutText: %w", err)
		}
		return ClientCutText{Text: text}, nil
	case msgSetDesktopSize:
		if _, err := io.ReadFull(r, b[:7]); err != nil {
			return nil, fmt.Errorf("reading SetDesktopSize: %w", unexpected(err))
		}
		m := SetDesktopSize{Width: binary.BigEndian.Uint16(b[1:]), Height: binary.BigEndian.Uint16(b[3:])}
		n := int(b[5])
		if n > MaxScreens {
			return nil, fmt.Errorf("SetDesktopSize lists %d screens, more than %d", n, MaxScreens)
		}
		for range n {
			if _, err := io.ReadFull(r, b[:16]); err != nil {
				return nil, fmt.Errorf("reading SetDesktopSize: %w", unexpected(err))
			}
			m.Screens = append(m.Screens, Screen{ID: binary.BigEndian.Uint32(b[0:]), X: binary.BigEndian.Uint16(b[4:]), Y: binary.BigEndian.Uint16(b[6:]),
				Width: binary.BigEndian.Uint16(b[8:]), Height: binary.BigEndian.Uint16(b[10:]), Flags: binary.BigEndian.Uint32(b[12:])})
		}
		return m, nil
	default:
		return nil, fmt.Errorf("unknown client message type %d", t)
	}
}

// readCutText reads n bytes of ISO 8859-1 text, keeping at most MaxCutText of them. The
// buffer grows only as bytes arrive, so a large n alone costs no memory.
func readCutText(r io.Reader, n uint32) (string, error) {
	keep := min(int64(n), MaxCutText)
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, keep); err != nil {
		return "", unexpected(err)
	}
	if rest := int64(n) - keep; rest > 0 {
		if _, err := io.CopyN(io.Discard, r, rest); err != nil {
			return "", unexpected(err)
		}
	}
	return latin1ToString(buf.Bytes()), nil
}

// latin1ToString decodes ISO 8859-1, whose bytes are the first 256 code points.
func latin1ToString(b []byte) string {
	var s strings.Builder
	s.Grow(len(b))
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return s.String()
}

// stringToLatin1 encodes s as ISO 8859-1, replacing what it cannot hold with '?'.
func stringToLatin1(s string) []byte {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			r = '?'
		}
		b = append(b, byte(r))
	}
	return b
}

// unexpected turns an io.EOF met inside a message into io.ErrUnexpectedEOF: only a peer
// that leaves between messages leaves cleanly.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
