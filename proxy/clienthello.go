package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// peekServerName reads, without consuming, the TLS records that hold the ClientHello at the
// head of br and returns its server name ("" when it has none). It reads at most max bytes;
// br's buffer must hold at least max bytes.
func peekServerName(br *bufio.Reader, max int) (string, error) {
	var hs []byte // handshake bytes gathered from the records
	off := 0
	for {
		if off+5 > max {
			return "", ErrClientHelloTooLarge
		}
		h, err := br.Peek(off + 5)
		if err != nil {
			return "", peekErr(err)
		}
		rec := h[off:]
		if rec[0] != 0x16 || rec[1] != 3 {
			return "", fmt.Errorf("%w: not a handshake record", ErrClientHello)
		}
		n := int(binary.BigEndian.Uint16(rec[3:5]))
		if n == 0 || n > 16384+2048 {
			return "", fmt.Errorf("%w: record length %d", ErrClientHello, n)
		}
		if off+5+n > max {
			return "", ErrClientHelloTooLarge
		}
		b, err := br.Peek(off + 5 + n)
		if err != nil {
			return "", peekErr(err)
		}
		hs = append(hs, b[off+5:]...)
		off += 5 + n
		if len(hs) < 4 {
			continue
		}
		if hs[0] != 1 {
			return "", fmt.Errorf("%w: handshake type %d", ErrClientHello, hs[0])
		}
		want := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		if want > max {
			return "", ErrClientHelloTooLarge
		}
		if len(hs) >= want {
			return parseClientHello(hs[4:want])
		}
	}
}

func peekErr(err error) error {
	if errors.Is(err, bufio.ErrBufferFull) {
		return ErrClientHelloTooLarge
	}
	return err
}

// parseClientHello returns the server name of a ClientHello body (after the 4-byte handshake
// header).
func parseClientHello(b []byte) (string, error) {
	bad := func(what string) (string, error) { return "", fmt.Errorf("%w: %s", ErrClientHello, what) }
	if len(b) < 2+32+1 {
		return bad("short")
	}
	b = b[2+32:] // legacy_version, random
	sid := int(b[0])
	if sid > 32 || len(b) < 1+sid+2 {
		return bad("session id")
	}
	b = b[1+sid:]
	cs := int(binary.BigEndian.Uint16(b))
	if cs < 2 || cs%2 != 0 || len(b) < 2+cs+1 {
		return bad("cipher suites")
	}
	b = b[2+cs:]
	cm := int(b[0])
	if cm < 1 || len(b) < 1+cm {
		return bad("compression methods")
	}
	b = b[1+cm:]
	if len(b) == 0 {
		return "", nil // no extensions at all
	}
	if len(b) < 2 {
		return bad("extensions length")
	}
	el := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if el != len(b) {
		return bad("extensions length")
	}
	name := ""
	seen := false
	for len(b) > 0 {
		if len(b) < 4 {
			return bad("extension header")
		}
		typ, l := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+l {
			return bad("extension length")
		}
		if typ == 0 {
			if seen {
				return bad("duplicate server_name")
			}
			seen = true
			n, err := parseSNI(b[4 : 4+l])
			if err != nil {
				return "", err
			}
			name = n
		}
		b = b[4+l:]
	}
	return name, nil
}

// parseSNI returns the host_name of a server_name extension body.
func parseSNI(b []byte) (string, error) {
	if len(b) == 0 {
		return "", nil // the server's reply form; harmless in a ClientHello
	}
	if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
		return "", fmt.Errorf("%w: server_name list length", ErrClientHello)
	}
	for b = b[2:]; len(b) > 0; {
		if len(b) < 3 {
			return "", fmt.Errorf("%w: server_name entry", ErrClientHello)
		}
		typ, l := b[0], int(binary.BigEndian.Uint16(b[1:]))
		if len(b) < 3+l {
			return "", fmt.Errorf("%w: server_name entry length", ErrClientHello)
		}
		if typ == 0 {
			n := b[3 : 3+l]
			if l == 0 || l > 253 || !validHost(n) {
				return "", fmt.Errorf("%w: bad host name", ErrClientHello)
			}
			return strings.ToLower(strings.TrimSuffix(string(n), ".")), nil
		}
		b = b[3+l:]
	}
	return "", nil
}

func validHost(b []byte) bool {
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// matchName reports whether a server name matches a route pattern: exact, or "*.suffix"
// matching exactly one more label.
func matchName(pattern, name string) bool {
	if strings.HasPrefix(pattern, "*.") {
		rest, ok := strings.CutSuffix(name, pattern[1:])
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	return strings.EqualFold(pattern, name)
}
