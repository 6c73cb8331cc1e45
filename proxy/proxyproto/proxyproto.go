// Package proxyproto reads and writes PROXY protocol headers, versions 1 (text) and 2
// (binary, with TLVs), as specified by HAProxy's proxy-protocol.txt. It is a leaf package: the
// proxy uses it to accept headers from trusted load balancers and to send the client address
// and zone to backends; a backend written in Go (the launch API) uses it to read them.
package proxyproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// TLVZone is the PROXY v2 TLV type (in the custom range 0xE0..0xEF) that carries the client's
// user-location zone as UTF-8 text.
const TLVZone = 0xE0

// MaxV2Payload bounds the address and TLV part of a v2 header that Read accepts.
const MaxV2Payload = 2048

// maxV1 is the longest v1 header the specification allows, CRLF included.
const maxV1 = 107

// v2Sig is the 12-byte signature that starts every v2 header.
var v2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// Errors returned by Read.
var (
	// ErrNoHeader means the bytes do not start with a PROXY header.
	ErrNoHeader = errors.New("proxyproto: no proxy header")
	// ErrMalformed means a header started but does not parse.
	ErrMalformed = errors.New("proxyproto: malformed header")
)

// Header is one PROXY header.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Local is true for a v2 LOCAL command or a v1 UNKNOWN line: the connection was made by
	// the proxy itself (a health check) and carries no client address.
	Local bool
	// Source is the client's address and port; invalid when Local.
	Source netip.AddrPort
	// Destination is the address and port the client connected to; invalid when Local.
	Destination netip.AddrPort
	// Datagram is true for v2 UDP (DGRAM) headers.
	Datagram bool
	// Zone is the client's zone from the TLVZone TLV (v2 only).
	Zone string
	// TLVs holds the other v2 TLVs by type.
	TLVs map[byte][]byte
}

// Read reads one header from br and nothing after it. It returns ErrNoHeader (having
// consumed nothing) when the first bytes are not a header signature.
func Read(br *bufio.Reader) (Header, error) {
	// Peek no further than the bytes still look like a signature, so that a peer sending a
	// few bytes of something else is turned away at once instead of waiting for 12 bytes.
	for n := 1; ; n++ {
		n = max(n, min(br.Buffered(), 12))
		b, err := br.Peek(n)
		if !maybeHeader(b) {
			return Header{}, ErrNoHeader
		}
		if err != nil {
			return Header{}, err
		}
		if n < 12 {
			continue
		}
		if bytes.Equal(b, v2Sig) {
			return readV2(br)
		}
		return readV1(br)
	}
}

// maybeHeader reports whether b can start a v1 or v2 header.
func maybeHeader(b []byte) bool {
	const v1 = "PROXY "
	if len(b) <= len(v1) {
		return strings.HasPrefix(v1, string(b)) || bytes.HasPrefix(v2Sig, b)
	}
	return strings.HasPrefix(string(b), v1) || bytes.HasPrefix(v2Sig, b)
}

func readV1(br *bufio.Reader) (Header, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return Header{}, fmt.Errorf("%w: v1 line too long", ErrMalformed)
		}
		return Header{}, err
	}
	if len(line) > maxV1 || len(line) < 2 || line[len(line)-2] != '\r' {
		return Header{}, fmt.Errorf("%w: v1 line too long or not CRLF terminated", ErrMalformed)
	}
	return ParseV1(string(line[:len(line)-2]))
}

// ParseV1 parses a v1 line without its CRLF: "PROXY TCP4 src dst sport dport" or
// "PROXY UNKNOWN ...".
func ParseV1(line string) (Header, error) {
	f := strings.Split(line, " ")
	if len(f) < 2 || f[0] != "PROXY" {
		return Header{}, fmt.Errorf("%w: v1 line %q", ErrMalformed, line)
	}
	if f[1] == "UNKNOWN" {
		return Header{Version: 1, Local: true}, nil
	}
	if len(f) != 6 || (f[1] != "TCP4" && f[1] != "TCP6") {
		return Header{}, fmt.Errorf("%w: v1 line %q", ErrMalformed, line)
	}
	src, err1 := netip.ParseAddr(f[2])
	dst, err2 := netip.ParseAddr(f[3])
	sp, err3 := parsePort(f[4])
	dp, err4 := parsePort(f[5])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Header{}, fmt.Errorf("%w: v1 line %q: %v", ErrMalformed, line, err)
	}
	if src.Zone() != "" || dst.Zone() != "" || (f[1] == "TCP4") != src.Is4() || (f[1] == "TCP4") != dst.Is4() {
		return Header{}, fmt.Errorf("%w: v1 family %s does not match addresses", ErrMalformed, f[1])
	}
	return Header{Version: 1, Source: netip.AddrPortFrom(src, sp), Destination: netip.AddrPortFrom(dst, dp)}, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("bad port %q", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err
}

func readV2(br *bufio.Reader) (Header, error) {
	b, err := br.Peek(16)
	if err != nil {
		return Header{}, err
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if n > MaxV2Payload {
		return Header{}, fmt.Errorf("%w: v2 payload of %d bytes exceeds %d", ErrMalformed, n, MaxV2Payload)
	}
	b, err = br.Peek(16 + n)
	if err != nil {
		return Header{}, err
	}
	h, err := ParseV2(b)
	if err != nil {
		return Header{}, err
	}
	_, _ = br.Discard(16 + n)
	return h, nil
}

// ParseV2 parses a complete v2 header (signature, fixed part, addresses and TLVs).
func ParseV2(b []byte) (Header, error) {
	if len(b) < 16 || !bytes.Equal(b[:12], v2Sig) {
		return Header{}, ErrNoHeader
	}
	if b[12]>>4 != 2 {
		return Header{}, fmt.Errorf("%w: v2 version %d", ErrMalformed, b[12]>>4)
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if len(b) != 16+n {
		return Header{}, fmt.Errorf("%w: v2 length %d, have %d", ErrMalformed, n, len(b)-16)
	}
	h := Header{Version: 2}
	p := b[16:]
	switch b[12] & 0xF {
	case 0: // LOCAL: addresses, if any, are ignored.
		h.Local = true
		return h, nil
	case 1:
	default:
		return Header{}, fmt.Errorf("%w: v2 command %d", ErrMalformed, b[12]&0xF)
	}
	fam, proto := b[13]>>4, b[13]&0xF
	switch proto {
	case 1:
	case 2:
		h.Datagram = true
	default:
		if fam != 0 {
			return Header{}, fmt.Errorf("%w: v2 transport %d", ErrMalformed, proto)
		}
	}
	var alen int
	switch fam {
	case 0:
		h.Local = true
		return h, nil
	case 1:
		alen = 12
	case 2:
		alen = 36
	default:
		return Header{}, fmt.Errorf("%w: v2 family %d", ErrMalformed, fam)
	}
	if len(p) < alen {
		return Header{}, fmt.Errorf("%w: v2 addresses truncated", ErrMalformed)
	}
	if fam == 1 {
		h.Source = netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[0:4])), binary.BigEndian.Uint16(p[8:10]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[4:8])), binary.BigEndian.Uint16(p[10:12]))
	} else {
		h.Source = netip.AddrPortFrom(netip.AddrFrom16([16]byte(p[0:16])), binary.BigEndian.Uint16(p[32:34]))
		h.Destination = netip.AddrPortFrom(netip.AddrFrom16([16]byte(p[16:32])), binary.BigEndian.Uint16(p[34:36]))
	}
	for t := p[alen:]; len(t) > 0; {
		if len(t) < 3 {
			return Header{}, fmt.Errorf("%w: v2 tlv truncated", ErrMalformed)
		}
		typ, l := t[0], int(binary.BigEndian.Uint16(t[1:3]))
		if len(t) < 3+l {
			return Header{}, fmt.Errorf("%w: v2 tlv %#x truncated", ErrMalformed, typ)
		}
		v := t[3 : 3+l]
		if typ == TLVZone {
			h.Zone = string(v)
		} else {
			if h.TLVs == nil {
				h.TLVs = make(map[byte][]byte)
			}
			h.TLVs[typ] = append([]byte(nil), v...)
		}
		t = t[3+l:]
	}
	return h, nil
}

// AppendV1 appends h as a v1 line. A Local header, or one whose addresses are not both IPv4
// or both IPv6, is written as "PROXY UNKNOWN".
func AppendV1(b []byte, h Header) []byte {
	src, dst := h.Source.Addr().Unmap(), h.Destination.Addr().Unmap()
	if h.Local || !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	fam := "TCP6"
	if src.Is4() {
		fam = "TCP4"
	}
	b = append(b, "PROXY "+fam+" "...)
	b = src.WithZone("").AppendTo(b)
	b = append(b, ' ')
	b = dst.WithZone("").AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(h.Source.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(h.Destination.Port()), 10)
	return append(b, "\r\n"...)
}

// AppendV2 appends h as a v2 header, with the zone in a TLVZone TLV when h.Zone is set and
// h.TLVs in ascending type order. Mixed families are sent as IPv6 (IPv4-mapped).
func AppendV2(b []byte, h Header) []byte {
	b = append(b, v2Sig...)
	src, dst := h.Source.Addr().Unmap(), h.Destination.Addr().Unmap()
	if h.Local || !src.IsValid() || !dst.IsValid() {
		return append(b, 0x20, 0x00, 0, 0)
	}
	proto := byte(1)
	if h.Datagram {
		proto = 2
	}
	start := len(b)
	if src.Is4() && dst.Is4() {
		b = append(b, 0x21, 0x10|proto, 0, 0)
		s, d := src.As4(), dst.As4()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
	} else {
		b = append(b, 0x21, 0x20|proto, 0, 0)
		s, d := src.As16(), dst.As16()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, h.Source.Port())
	b = binary.BigEndian.AppendUint16(b, h.Destination.Port())
	if h.Zone != "" {
		b = appendTLV(b, TLVZone, []byte(h.Zone))
	}
	for t := 0; t < 256; t++ {
		if v, ok := h.TLVs[byte(t)]; ok && t != TLVZone {
			b = appendTLV(b, byte(t), v)
		}
	}
	binary.BigEndian.PutUint16(b[start+2:start+4], uint16(len(b)-start-4))
	return b
}

func appendTLV(b []byte, typ byte, v []byte) []byte {
	if len(v) > 0xFFFF {
		v = v[:0xFFFF]
	}
	b = append(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}
