// Package rfb speaks the Remote Framebuffer protocol (RFB, the VNC protocol) of RFC 6143,
// version 3.8, from both ends: ServerConn for a desktop that serves viewers and Client for a
// viewer, test or probe that reads a desktop. Only the None security type and the Raw,
// CopyRect and DesktopSize encodings are spoken; every length read off the wire is bounded.
package rfb

import (
	"errors"
	"fmt"
)

// Client-to-server message types (RFC 6143 section 7.5).
const (
	msgSetPixelFormat           = 0
	msgSetEncodings             = 2
	msgFramebufferUpdateRequest = 3
	msgKeyEvent                 = 4
	msgPointerEvent             = 5
	msgClientCutText            = 6
	msgSetDesktopSize           = 251
)

// MessageType is the type of a server-to-client message (RFC 6143 section 7.6).
type MessageType uint8

// The server-to-client message types Client understands.
const (
	// MsgFramebufferUpdate carries rectangles of pixels.
	MsgFramebufferUpdate MessageType = 0
	// MsgSetColourMapEntries sets colour map entries; Client skips it.
	MsgSetColourMapEntries MessageType = 1
	// MsgBell rings the bell.
	MsgBell MessageType = 2
	// MsgServerCutText carries the server's clipboard text.
	MsgServerCutText MessageType = 3
)

// String returns the message type's name in RFC 6143.
func (t MessageType) String() string {
	switch t {
	case MsgFramebufferUpdate:
		return "FramebufferUpdate"
	case MsgSetColourMapEntries:
		return "SetColourMapEntries"
	case MsgBell:
		return "Bell"
	case MsgServerCutText:
		return "ServerCutText"
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// Encodings and pseudo-encodings this package speaks (RFC 6143 section 7.7).
const (
	// EncodingRaw sends pixels left to right, top to bottom, in the client's pixel format.
	EncodingRaw int32 = 0
	// EncodingCopyRect copies a rectangle from elsewhere in the framebuffer.
	EncodingCopyRect int32 = 1
	// EncodingHextile sends 16×16 tiles of a background colour and rectangles on it.
	EncodingHextile int32 = 5
	// EncodingDesktopSize is the pseudo-encoding that announces a new framebuffer size.
	EncodingDesktopSize int32 = -223
	// EncodingExtendedDesktopSize is the pseudo-encoding of a server that lets viewers resize
	// the framebuffer (SetDesktopSize), and of its answers (the RFB community's extension,
	// rfbproto "ExtendedDesktopSize").
	EncodingExtendedDesktopSize int32 = -308
)

// The reasons and statuses of an ExtendedDesktopSize rectangle.
const (
	// ResizeByServer: the server changed the size; ResizeByViewer: this viewer asked.
	ResizeByServer uint16 = 0
	ResizeByViewer uint16 = 1
	// ResizeOK: the size is changed (or, from the server, just told); ResizeProhibited and
	// ResizeInvalid refuse a SetDesktopSize.
	ResizeOK         uint16 = 0
	ResizeProhibited uint16 = 1
	ResizeInvalid    uint16 = 3
)

// Security types (RFC 6143 section 7.2).
const (
	securityInvalid = 0
	securityNone    = 1
	securityVNCAuth = 2
)

// Limits on what either end accepts from the other.
const (
	// MaxCutText is the most clipboard text kept from one cut-text message; the rest of a
	// longer text is read and dropped.
	MaxCutText = 1 << 20
	// MaxEncodings is the most encodings a SetEncodings message may list.
	MaxEncodings = 1024
	// MaxScreens is the most screens a SetDesktopSize message may list.
	MaxScreens = 16
	// MaxName is the longest desktop name a ServerInit may carry.
	MaxName = 4096
	// MaxReason is the longest failure reason read from a server.
	MaxReason = 4096
	// MaxPixels is the largest framebuffer, in pixels, a Client accepts (8192×4096).
	MaxPixels = 8192 * 4096
)

// Errors a caller may want to tell apart.
var (
	// ErrAuthRequired is returned by NewClient when the server offers VNC authentication but
	// not None.
	ErrAuthRequired = errors.New("server requires VNC authentication; only security type None is supported")
	// ErrNoSecurity is returned when the two ends share no security type.
	ErrNoSecurity = errors.New("no common security type; only None is supported")
	// ErrColourMap is returned for a colour-map pixel format, which is not supported.
	ErrColourMap = errors.New("colour-map pixel formats are not supported")
	// ErrNoDesktopSize is returned by ServerConn.WriteDesktopSize when the client did not
	// announce the DesktopSize pseudo-encoding.
	ErrNoDesktopSize = errors.New("client does not support the DesktopSize pseudo-encoding")
)
