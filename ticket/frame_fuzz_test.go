package ticket

import (
	"bytes"
	"testing"
)

// FuzzReadFrame: a channel's first bytes come from anyone; ReadFrame never panics, never
// returns a token longer than MaxLen or empty, and what it returns WriteFrame writes back as
// the bytes it read.
func FuzzReadFrame(f *testing.F) {
	var ok bytes.Buffer
	WriteFrame(&ok, "a-token")
	f.Add(ok.Bytes())
	f.Add([]byte("FDT1\x00\x00"))
	f.Add([]byte("FDT1\xff\xff"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tok, err := ReadFrame(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(tok) == 0 || len(tok) > MaxLen {
			t.Fatalf("ReadFrame returned %d bytes", len(tok))
		}
		var out bytes.Buffer
		if err := WriteFrame(&out, tok); err != nil || !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("the frame of %q does not encode back to its input's start: %v", tok, err)
		}
	})
}

// FuzzParseDatagram: a flow's first datagram comes from anyone; ParseDatagram never panics
// and takes only FrameMagic and a token of 1..MaxLen bytes, which Datagram encodes back.
func FuzzParseDatagram(f *testing.F) {
	f.Add(Datagram("a-token"))
	f.Add([]byte("FDT1"))
	f.Add([]byte(ProbePayload))
	f.Fuzz(func(t *testing.T, in []byte) {
		tok, ok := ParseDatagram(in)
		if !ok {
			return
		}
		if len(tok) == 0 || len(tok) > MaxLen || !bytes.Equal(Datagram(tok), in) {
			t.Fatalf("ParseDatagram(%q) = %q", in, tok)
		}
	})
}

// FuzzReadChannel: a QUIC stream's first bytes come from anyone who completed a handshake;
// ReadChannel never panics, takes only the two kinds, and what it returns WriteChannel writes
// back as the bytes it read.
func FuzzReadChannel(f *testing.F) {
	var ok bytes.Buffer
	WriteChannel(&ok, Channel{Port: 4172, Proto: "udp"}, "a-token")
	f.Add(ok.Bytes())
	f.Add([]byte("t\x20\xfbFDT1\x00\x01x"))
	f.Add([]byte("x\x00\x00FDT1\x00\x01x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ch, tok, err := ReadChannel(bytes.NewReader(in))
		if err != nil {
			return
		}
		if ch.Proto != "tcp" && ch.Proto != "udp" {
			t.Fatalf("ReadChannel took kind %q", ch.Proto)
		}
		var out bytes.Buffer
		if err := WriteChannel(&out, ch, tok); err != nil || !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("%s with %q does not encode back to its input's start: %v", ch, tok, err)
		}
	})
}

// FuzzReadOpening: a TCP channel's first bytes come from anyone; ReadOpening takes only the
// two magics with a token of 1..MaxLen bytes, and what it returns the matching writer writes
// back as the bytes it read.
func FuzzReadOpening(f *testing.F) {
	var ok, sealed bytes.Buffer
	WriteFrame(&ok, "a-token")
	WriteSealedFrame(&sealed, "a-token")
	f.Add(ok.Bytes())
	f.Add(sealed.Bytes())
	f.Add([]byte("FDT2\x00\x00"))
	f.Add([]byte("FDT3\x00\x01x"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tok, isSealed, err := ReadOpening(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(tok) == 0 || len(tok) > MaxLen {
			t.Fatalf("ReadOpening returned %d bytes", len(tok))
		}
		var out bytes.Buffer
		write := WriteFrame
		if isSealed {
			write = WriteSealedFrame
		}
		if err := write(&out, tok); err != nil || !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("the opening of %q (sealed %v) does not encode back to its input's start: %v", tok, isSealed, err)
		}
		if plain, err := ReadFrame(bytes.NewReader(in)); isSealed != (err != nil) || (!isSealed && plain != tok) {
			t.Fatalf("ReadFrame takes a sealed opening or refuses a plain one: %q, %v", plain, err)
		}
	})
}

// FuzzReadSealed: a gateway's answer is read by a client that may be talking to anyone who
// holds a certificate; ReadSealed never panics, never returns more than MaxLen, and what it
// returns WriteSealed writes back as the bytes it read.
func FuzzReadSealed(f *testing.F) {
	var ok bytes.Buffer
	WriteSealed(&ok, [32]byte{1, 2, 3}, "next")
	f.Add(ok.Bytes()[1:])
	f.Add(make([]byte, 34))
	f.Add(append(make([]byte, 32), 0xff, 0xff))
	f.Fuzz(func(t *testing.T, in []byte) {
		pin, next, err := ReadSealed(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(next) > MaxLen {
			t.Fatalf("ReadSealed returned %d bytes", len(next))
		}
		var out bytes.Buffer
		if err := WriteSealed(&out, pin, next); err != nil || !bytes.HasPrefix(in, out.Bytes()[1:]) {
			t.Fatalf("%x %q does not encode back to its input's start: %v", pin, next, err)
		}
	})
}
