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

// Client is the viewer end of one RFB connection. It keeps the framebuffer the server paints
// into. ReadMessage, Framebuffer and ServerFormat belong to one reading goroutine; the other
// methods are safe to call from any goroutine, also while ReadMessage runs.
type Client struct {
	r            *bufio.Reader
	name         string
	serverFormat PixelFormat
	maxPixels    int
	resizes      bool // announce ExtendedDesktopSize (ClientOptions.Resize)
	raw          bool // announce Raw alone (ClientOptions.Raw)

	// Owned by the reading goroutine.
	dec  *decoder
	fb   *image.RGBA
	wire []byte // scratch: one row of pixels as sent

	wmu sync.Mutex // guards writes to w
	w   io.Writer

	mu     sync.Mutex // guards width, height and cut
	width  int
	height int
	cut    string
}

// Keysyms of the keys Type sends for control characters (X11 keysymdef.h).
const (
	KeyBackSpace uint32 = 0xff08
	KeyTab       uint32 = 0xff09
	KeyReturn    uint32 = 0xff0d
)

// NewClient speaks the viewer's half of the RFB handshake on c: version 3.8 (or the 3.3 or 3.7
// the server speaks), security type None, a shared ClientInit, then reads ServerInit and asks
// for StandardFormat pixels and the Hextile, Raw, CopyRect and DesktopSize encodings. A server that
// offers only VNC authentication yields ErrAuthRequired. Bound it with a deadline on c.
func NewClient(c io.ReadWriter) (*Client, error) { return NewClientWith(c, ClientOptions{}) }

// ClientOptions change what NewClientWith asks of the server.
type ClientOptions struct {
	// Resize announces ExtendedDesktopSize too: the server then sends an update of its own
	// with an ExtendedDesktopSize rectangle (one more message than requests asked for), after
	// which SetDesktopSize may ask it for another size.
	Resize bool
	// Raw asks for the Raw encoding alone (and DesktopSize), as a benchmark of the bytes a
	// tunnel carries does: Hextile shrinks the builtin desktop's frames twentyfold.
	Raw bool
}

// NewClientWith is NewClient with o.
func NewClientWith(c io.ReadWriter, o ClientOptions) (*Client, error) {
	cl := &Client{r: bufio.NewReaderSize(c, 64<<10), w: c, maxPixels: MaxPixels, resizes: o.Resize, raw: o.Raw}
	if err := cl.handshake(); err != nil {
		return nil, err
	}
	return cl, nil
}

func (c *Client) handshake() error {
	var b [24]byte
	if _, err := io.ReadFull(c.r, b[:12]); err != nil {
		return fmt.Errorf("reading protocol version: %w", unexpected(err))
	}
	minor, err := parseVersion(b[:12])
	if err != nil {
		return err
	}
	if err := c.write(fmt.Appendf(nil, "RFB 003.%03d\n", minor)); err != nil {
		return fmt.Errorf("sending protocol version: %w", err)
	}
	if err := c.security(minor); err != nil {
		return err
	}
	if err := c.write([]byte{1}); err != nil {
		return fmt.Errorf("sending ClientInit: %w", err)
	}
	if _, err := io.ReadFull(c.r, b[:24]); err != nil {
		return fmt.Errorf("reading ServerInit: %w", unexpected(err))
	}
	w, h := int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
	if w*h > c.maxPixels {
		return fmt.Errorf("framebuffer of %dx%d pixels, more than %d", w, h, c.maxPixels)
	}
	c.serverFormat = parsePixelFormat(b[4:20])
	n := binary.BigEndian.Uint32(b[20:])
	if n > MaxName {
		return fmt.Errorf("desktop name of %d bytes, more than %d", n, MaxName)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(c.r, name); err != nil {
		return fmt.Errorf("reading desktop name: %w", unexpected(err))
	}
	c.name = string(name)
	c.resize(w, h)

	pf := StandardFormat()
	msg := make([]byte, 20)
	msg[0] = msgSetPixelFormat
	pf.put(msg[4:])
	c.dec = newDecoder(pf)
	encs := []int32{EncodingHextile, EncodingRaw, EncodingCopyRect, EncodingDesktopSize}
	if c.raw {
		encs = []int32{EncodingRaw, EncodingDesktopSize}
	}
	if c.resizes {
		encs = append(encs, EncodingExtendedDesktopSize)
	}
	msg = append(msg, msgSetEncodings, 0, 0, byte(len(encs)))
	for _, e := range encs {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	if err := c.write(msg); err != nil {
		return fmt.Errorf("sending pixel format and encodings: %w", err)
	}
	return nil
}

// security agrees on security type None for the given minor version.
func (c *Client) security(minor int) error {
	var b [4]byte
	if minor == 3 {
		if _, err := io.ReadFull(c.r, b[:4]); err != nil {
			return fmt.Errorf("reading security type: %w", unexpected(err))
		}
		switch t := binary.BigEndian.Uint32(b[:]); t {
		case securityNone:
			return nil
		case securityVNCAuth:
			return ErrAuthRequired
		case securityInvalid:
			return c.refused("server refused the connection")
		default:
			return fmt.Errorf("server chose security type %d: %w", t, ErrNoSecurity)
		}
	}
	if _, err := io.ReadFull(c.r, b[:1]); err != nil {
		return fmt.Errorf("reading security types: %w", unexpected(err))
	}
	if b[0] == 0 {
		return c.refused("server refused the connection")
	}
	types := make([]byte, b[0])
	if _, err := io.ReadFull(c.r, types); err != nil {
		return fmt.Errorf("reading security types: %w", unexpected(err))
	}
	switch {
	case slices.Contains(types, securityNone):
	case slices.Contains(types, securityVNCAuth):
		return ErrAuthRequired
	default:
		return fmt.Errorf("server offers security types %v: %w", types, ErrNoSecurity)
	}
	if err := c.write([]byte{securityNone}); err != nil {
		return fmt.Errorf("sending security type: %w", err)
	}
	if minor == 7 {
		return nil
	}
	if _, err := io.ReadFull(c.r, b[:4]); err != nil {
		return fmt.Errorf("reading security result: %w", unexpected(err))
	}
	if binary.BigEndian.Uint32(b[:]) != 0 {
		return c.refused("server rejected security type None")
	}
	return nil
}

// refused reads the reason a server gives for refusing and returns it as an error.
func (c *Client) refused(what string) error {
	reason, err := readReason(c.r)
	if err != nil {
		return fmt.Errorf("%s; reading its reason: %w", what, err)
	}
	return fmt.Errorf("%s: %q", what, reason)
}

// resize replaces the framebuffer with a blank one of w×h pixels.
func (c *Client) resize(w, h int) {
	c.fb = image.NewRGBA(image.Rect(0, 0, w, h))
	c.mu.Lock()
	c.width, c.height = w, h
	c.mu.Unlock()
}

// SetDesktopSize asks the server to make the framebuffer width×height, one screen (a server
// that sent an ExtendedDesktopSize rectangle takes it; its answer is another).
func (c *Client) SetDesktopSize(width, height int) error {
	if width <= 0 || height <= 0 || width > 0xffff || height > 0xffff {
		return fmt.Errorf("desktop size %dx%d out of range", width, height)
	}
	b := []byte{msgSetDesktopSize, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(width))
	b = binary.BigEndian.AppendUint16(b, uint16(height))
	b = append(b, 1, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(width))
	b = binary.BigEndian.AppendUint16(b, uint16(height))
	b = binary.BigEndian.AppendUint32(b, 0)
	return c.write(b)
}

// write sends one whole message.
func (c *Client) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(b)
	return err
}

// Name returns the desktop name from ServerInit.
func (c *Client) Name() string { return c.name }

// ServerFormat returns the pixel format the server announced in ServerInit; the client has
// since asked for StandardFormat.
func (c *Client) ServerFormat() PixelFormat { return c.serverFormat }

// Width returns the framebuffer's width, which a DesktopSize update may change.
func (c *Client) Width() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.width
}

// Height returns the framebuffer's height, which a DesktopSize update may change.
func (c *Client) Height() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.height
}

// Framebuffer returns the framebuffer as updated so far. It is the client's own: read it
// only from the goroutine that calls ReadMessage, between calls.
func (c *Client) Framebuffer() *image.RGBA { return c.fb }

// LastCutText returns the text of the last ServerCutText message, cut to MaxCutText bytes.
func (c *Client) LastCutText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// Request asks for a FramebufferUpdate of the w×h rectangle at x, y; incremental asks only for
// what changed since the client last saw it.
func (c *Client) Request(incremental bool, x, y, w, h int) error {
	if x < 0 || y < 0 || w < 0 || h < 0 || x > 0xffff || y > 0xffff || w > 0xffff || h > 0xffff {
		return fmt.Errorf("update request %dx%d at %d,%d out of range", w, h, x, y)
	}
	b := []byte{msgFramebufferUpdateRequest, boolByte(incremental), 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(x))
	binary.BigEndian.PutUint16(b[4:], uint16(y))
	binary.BigEndian.PutUint16(b[6:], uint16(w))
	binary.BigEndian.PutUint16(b[8:], uint16(h))
	return c.write(b)
}

// RequestAll asks for a FramebufferUpdate of the whole framebuffer.
func (c *Client) RequestAll(incremental bool) error {
	c.mu.Lock()
	w, h := c.width, c.height
	c.mu.Unlock()
	return c.Request(incremental, 0, 0, w, h)
}

// Key presses (down) or releases the key named by the X11 keysym.
func (c *Client) Key(keysym uint32, down bool) error {
	b := []byte{msgKeyEvent, boolByte(down), 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], keysym)
	return c.write(b)
}

// Type presses and releases a key for each character of text: '\n' as Return, '\b' as
// BackSpace, '\t' as Tab and any other rune as its keysym.
func (c *Client) Type(text string) error {
	for _, r := range text {
		k := uint32(r)
		switch {
		case r == '\n':
			k = KeyReturn
		case r == '\b':
			k = KeyBackSpace
		case r == '\t':
			k = KeyTab
		case r > 0xff:
			k = 0x01000000 | uint32(r)
		}
		if err := c.Key(k, true); err != nil {
			return err
		}
		if err := c.Key(k, false); err != nil {
			return err
		}
	}
	return nil
}

// Pointer moves the pointer to x, y with the buttons in mask held (bit 0 is the left button).
func (c *Client) Pointer(mask uint8, x, y uint16) error {
	b := []byte{msgPointerEvent, mask, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], x)
	binary.BigEndian.PutUint16(b[4:], y)
	return c.write(b)
}

// CutText sends text as the client's clipboard, encoded as ISO 8859-1 ('?' for what it
// cannot hold) and cut to MaxCutText bytes.
func (c *Client) CutText(text string) error {
	return c.write(cutTextMessage(msgClientCutText, text))
}

// cutTextMessage is a ClientCutText or ServerCutText message (typ) of text: ISO 8859-1 ('?'
// for what it cannot hold), cut to MaxCutText bytes, after the 8-byte header.
func cutTextMessage(typ byte, text string) []byte {
	t := stringToLatin1(text)
	if len(t) > MaxCutText {
		t = t[:MaxCutText]
	}
	b := make([]byte, 8, 8+len(t))
	b[0] = typ
	binary.BigEndian.PutUint32(b[4:], uint32(len(t)))
	return append(b, t...)
}
