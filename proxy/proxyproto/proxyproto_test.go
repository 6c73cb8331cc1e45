package proxyproto

import (
	"bufio"
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Header
	}{
		{"IPv4 with a zone", Header{Source: netip.MustParseAddrPort("10.1.2.3:4000"), Destination: netip.MustParseAddrPort("10.0.0.1:443"), Zone: "east"}},
		{"IPv6", Header{Source: netip.MustParseAddrPort("[2001:db8::1]:4000"), Destination: netip.MustParseAddrPort("[2001:db8::2]:443")}},
		{"a datagram with other TLVs", Header{Source: netip.MustParseAddrPort("10.1.2.3:4000"), Destination: netip.MustParseAddrPort("10.0.0.1:4172"), Datagram: true, TLVs: map[byte][]byte{0x02: []byte("authority")}}},
		{"local", Header{Local: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int{1, 2} {
				if v == 1 && (tc.h.Zone != "" || tc.h.Datagram || tc.h.TLVs != nil) {
					continue
				}
				var b []byte
				if v == 1 {
					b = AppendV1(nil, tc.h)
				} else {
					b = AppendV2(nil, tc.h)
				}
				br := bufio.NewReader(bytes.NewReader(append(b, "payload"...)))
				got, err := Read(br)
				if err != nil {
					t.Fatalf("v%d: %v", v, err)
				}
				want := tc.h
				want.Version = v
				if got.Version != want.Version || got.Local != want.Local || got.Source != want.Source ||
					got.Destination != want.Destination || got.Zone != want.Zone || got.Datagram != want.Datagram ||
					len(got.TLVs) != len(want.TLVs) {
					t.Fatalf("v%d: got %+v, want %+v", v, got, want)
				}
				rest, _ := br.Peek(br.Buffered())
				if string(rest) != "payload" {
					t.Fatalf("v%d: Read consumed payload; left %q", v, rest)
				}
			}
		})
	}
}

func TestReadRejects(t *testing.T) {
	sig := string(v2Sig)
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"plain data", "GET / HTTP/1.1\r\n\r\n", ErrNoHeader},
		{"v1 without CRLF", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", ErrMalformed},
		{"v1 with a bad address", "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", ErrMalformed},
		{"v1 with family mismatch", "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", ErrMalformed},
		{"v1 with a leading zero port", "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", ErrMalformed},
		{"v1 too long", "PROXY TCP4 " + strings.Repeat("1", 200) + "\r\n", ErrMalformed},
		{"v2 with a bad version", sig + "\x11\x11\x00\x0c" + strings.Repeat("\x00", 12), ErrMalformed},
		{"v2 over the size bound", sig + "\x21\x11\xff\xff", ErrMalformed},
		{"v2 with a truncated TLV", sig + "\x21\x11\x00\x0e" + strings.Repeat("\x00", 12) + "\xe0\x00", ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bufio.NewReader(strings.NewReader(tc.in)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"))
	f.Add(AppendV2(nil, Header{Source: netip.MustParseAddrPort("10.1.2.3:4000"), Destination: netip.MustParseAddrPort("10.0.0.1:443"), Zone: "z"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Read(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		// Whatever parses must write back to something that parses the same way.
		var out []byte
		if h.Version == 1 {
			out = AppendV1(nil, h)
		} else {
			out = AppendV2(nil, h)
		}
		h2, err := Read(bufio.NewReader(bytes.NewReader(out)))
		if err != nil || h2.Source != h.Source || h2.Zone != h.Zone || h2.Local != h.Local {
			t.Fatalf("re-read of %+v gave %+v, %v", h, h2, err)
		}
	})
}
