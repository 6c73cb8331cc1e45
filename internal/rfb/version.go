package rfb

import (
	"encoding/binary"
	"fmt"
	"io"
)

// version38 is the ProtocolVersion both ends of this package announce.
const version38 = "RFB 003.008\n"

// parseVersion reads a 12-byte ProtocolVersion message and returns the minor version the
// peer will speak: 3, 7 or 8. As RFC 6143 section 7.1.1 asks, versions other than 3.7 and
// 3.8 are taken as 3.3, except later majors, which speak at least 3.8.
func parseVersion(b []byte) (int, error) {
	if len(b) != 12 || string(b[:4]) != "RFB " || b[7] != '.' || b[11] != '\n' {
		return 0, fmt.Errorf("malformed protocol version %q", b)
	}
	major, ok1 := digits(b[4:7])
	minor, ok2 := digits(b[8:11])
	switch {
	case !ok1 || !ok2:
		return 0, fmt.Errorf("malformed protocol version %q", b)
	case major < 3:
		return 0, fmt.Errorf("protocol version %d.%d is older than 3.3", major, minor)
	case major > 3 || minor >= 8:
		return 8, nil
	case minor == 7:
		return 7, nil
	}
	return 3, nil
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// readReason reads a failure reason (a length and that many bytes), bounded by MaxReason.
func readReason(r io.Reader) (string, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", unexpected(err)
	}
	n := binary.BigEndian.Uint32(b[:])
	if n > MaxReason {
		return "", fmt.Errorf("failure reason of %d bytes, more than %d", n, MaxReason)
	}
	s := make([]byte, n)
	if _, err := io.ReadFull(r, s); err != nil {
		return "", unexpected(err)
	}
	return string(s), nil
}

// appendString appends a length-prefixed string.
func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
