//go:build linux && !floodbase

package main

// Forged QUIC Initials: the first datagram a real quic-go client sends to the gateway's QUIC
// port (captured, never sent), decrypted with the Initial keys of its Destination Connection
// ID (RFC 9001 5.2), and sealed again under a new random DCID for each forged packet, with
// its header protection (RFC 9001 5.4). So every forged Initial is a long-header version-1
// packet of the real client's size (≥1200 bytes), with no token, a DCID never seen before and
// a ClientHello the gateway can decrypt: below the gateway's rate of unvalidated connections
// it starts a real handshake, past it it answers a Retry.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/capture"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// firstInitial is the first datagram a quic-go client of the gateway's QUIC port sends: an
// Initial with the whole ClientHello (X25519 only, so that it fits in one packet; with the
// post-quantum key share it takes two and the first alone starts no handshake).
func firstInitial(ra *net.UDPAddr) ([]byte, error) {
	cc := capture.New(&net.UDPAddr{IP: net.IPv4(127, 200, 0, 1), Port: 40000})
	tr := &quic.Transport{Conn: cc}
	defer func() { cc.Close(); tr.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tc := &tls.Config{ServerName: ra.IP.String(), NextProtos: []string{ticket.QUICALPN}, MinVersion: tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519}}
	go tr.Dial(ctx, ra, tc, &quic.Config{EnableDatagrams: true})
	select {
	case b := <-cc.First():
		return b, nil
	case <-ctx.Done():
		return nil, errors.New("no first datagram from the quic-go client")
	}
}

// quicV1Salt is QUIC version 1's initial salt (RFC 9001 5.2).
var quicV1Salt = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func expandLabel(secret []byte, label string, n int) ([]byte, error) {
	info := binary.BigEndian.AppendUint16(nil, uint16(n))
	info = append(info, byte(len("tls13 ")+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	return hkdf.Expand(sha256.New, secret, string(info), n)
}

// initialKeys are a client's Initial packet protection keys.
type initialKeys struct {
	aead cipher.AEAD
	iv   []byte
	hp   cipher.Block
}

func clientInitialKeys(dcid []byte) (*initialKeys, error) {
	initial, err := hkdf.Extract(sha256.New, dcid, quicV1Salt)
	if err != nil {
		return nil, err
	}
	cs, err := expandLabel(initial, "client in", 32)
	if err != nil {
		return nil, err
	}
	key, err := expandLabel(cs, "quic key", 16)
	if err != nil {
		return nil, err
	}
	iv, err := expandLabel(cs, "quic iv", 12)
	if err != nil {
		return nil, err
	}
	hpKey, err := expandLabel(cs, "quic hp", 16)
	if err != nil {
		return nil, err
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	hp, err := aes.NewCipher(hpKey)
	if err != nil {
		return nil, err
	}
	return &initialKeys{aead: aead, iv: iv, hp: hp}, nil
}

func (k *initialKeys) nonce(pn uint64) []byte {
	n := append([]byte(nil), k.iv...)
	for i := range 8 {
		n[len(n)-1-i] ^= byte(pn >> (8 * i))
	}
	return n
}

// mask is the header protection mask of a packet whose packet number starts at pnOff.
func (k *initialKeys) mask(pkt []byte, pnOff int) ([]byte, error) {
	if pnOff+4+16 > len(pkt) {
		return nil, errors.New("packet too short for a header protection sample")
	}
	m := make([]byte, 16)
	k.hp.Encrypt(m, pkt[pnOff+4:pnOff+4+16])
	return m, nil
}

// varint decodes a QUIC variable-length integer.
func varint(b []byte) (v uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, errors.New("short varint")
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, errors.New("short varint")
	}
	v = uint64(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, nil
}

// initialLayout is where an Initial's fields sit in its datagram.
type initialLayout struct {
	dcidOff, dcidLen int
	pnOff, end       int // the packet number's offset; the end of the Initial packet
}

func parseInitial(b []byte) (l initialLayout, err error) {
	if len(b) < 7 || b[0]&0xf0 != 0xc0 || binary.BigEndian.Uint32(b[1:]) != 1 {
		return l, errors.New("not a version 1 Initial")
	}
	p := 5
	l.dcidLen, l.dcidOff = int(b[p]), p+1
	p += 1 + l.dcidLen
	if p >= len(b) {
		return l, errors.New("short Initial")
	}
	p += 1 + int(b[p]) // the source connection ID
	tok, n, err := varint(b[min(p, len(b)):])
	if err != nil {
		return l, err
	}
	if tok != 0 {
		return l, errors.New("the captured Initial has a token")
	}
	p += n
	length, n, err := varint(b[min(p, len(b)):])
	if err != nil {
		return l, err
	}
	l.pnOff = p + n
	l.end = l.pnOff + int(length)
	if l.end > len(b) || l.dcidLen < 8 {
		return l, errors.New("malformed Initial")
	}
	return l, nil
}

// openInitial removes an Initial's header protection and decrypts it: the unprotected
// header, the packet number's length and value, and the frames.
func openInitial(pkt []byte, l initialLayout) (hdr []byte, pnLen int, pn uint64, frames []byte, err error) {
	k, err := clientInitialKeys(pkt[l.dcidOff : l.dcidOff+l.dcidLen])
	if err != nil {
		return nil, 0, 0, nil, err
	}
	m, err := k.mask(pkt, l.pnOff)
	if err != nil {
		return nil, 0, 0, nil, err
	}
	first := pkt[0] ^ m[0]&0x0f
	pnLen = int(first&3) + 1
	hdr = append([]byte(nil), pkt[:l.pnOff+pnLen]...)
	hdr[0] = first
	for i := range pnLen {
		hdr[l.pnOff+i] ^= m[1+i]
		pn = pn<<8 | uint64(hdr[l.pnOff+i])
	}
	frames, err = k.aead.Open(nil, k.nonce(pn), pkt[l.pnOff+pnLen:l.end], hdr)
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("the captured Initial does not decrypt with its DCID's keys: %w", err)
	}
	return hdr, pnLen, pn, frames, nil
}

// initialForger seals the captured Initial's frames again under new DCIDs.
type initialForger struct {
	l      initialLayout
	hdr    []byte // unprotected header of the captured Initial
	pnLen  int
	pn     uint64
	frames []byte
}

func newInitialForger(captured []byte) (*initialForger, error) {
	l, err := parseInitial(captured)
	if err != nil {
		return nil, err
	}
	hdr, pnLen, pn, frames, err := openInitial(captured, l)
	if err != nil {
		return nil, err
	}
	f := &initialForger{l: l, hdr: hdr, pnLen: pnLen, pn: pn, frames: frames}
	if f.size() < 1200 {
		return nil, fmt.Errorf("the captured Initial has %d bytes, less than 1200", f.size())
	}
	// The check of the sealing: a forged Initial opens with its own DCID's keys.
	b := make([]byte, f.size())
	if err := f.forge(b); err != nil {
		return nil, err
	}
	if _, _, _, fr, err := openInitial(b, l); err != nil || string(fr) != string(frames) {
		return nil, fmt.Errorf("a forged Initial does not open again: %v", err)
	}
	return f, nil
}

// size is a forged Initial's size in bytes.
func (f *initialForger) size() int { return f.l.end }

// forge writes into b (size bytes) an Initial with a new random DCID.
func (f *initialForger) forge(b []byte) error {
	hdr := append([]byte(nil), f.hdr...)
	rand.Read(hdr[f.l.dcidOff : f.l.dcidOff+f.l.dcidLen])
	k, err := clientInitialKeys(hdr[f.l.dcidOff : f.l.dcidOff+f.l.dcidLen])
	if err != nil {
		return err
	}
	out := append(b[:0], hdr...)
	out = k.aead.Seal(out, k.nonce(f.pn), f.frames, hdr)
	if len(out) != f.size() {
		return fmt.Errorf("forged Initial of %d bytes, not %d", len(out), f.size())
	}
	m, err := k.mask(out, f.l.pnOff)
	if err != nil {
		return err
	}
	out[0] ^= m[0] & 0x0f
	for i := range f.pnLen {
		out[f.l.pnOff+i] ^= m[1+i]
	}
	return nil
}
