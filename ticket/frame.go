package ticket

import (
	"encoding/binary"
	"errors"
	"io"
)

// The channel wire format shared by clients, gateways and machine agents.
//
// A TCP channel starts with a frame: FrameMagic, a 2-byte big-endian length and the ticket;
// the receiver answers one byte, StatusOK or StatusDenied or StatusLoginExpired (and then
// closes), or, from a gateway,
// StatusRotated followed by a frame holding the session's next reconnect ticket: every
// channel a gateway admits rotates the ticket, and once the next one is used the earlier ones
// are refused. A UDP flow starts
// with one datagram holding FrameMagic and the ticket, and the gateway answers UDPReady and
// the next reconnect ticket; such
// plain flows exist only on a gateway's UDP ports, and only where the site turns them on.
// ProbePayload, sent alone in a datagram, is echoed by gateways and agents for health probes;
// its first byte has the QUIC fixed bit (0x40) and the long-header bit (0x80) clear, so a
// port that speaks QUIC tells it from QUIC packets.
const (
	FrameMagic   = "FDT1"
	UDPReady     = FrameMagic + "OK"
	ProbePayload = "?frontdoor-probe"

	StatusOK      byte = 0
	StatusDenied  byte = 1
	StatusRotated byte = 2
	// StatusLoginExpired refuses a good ticket whose login is past the site's factor
	// lifetime (ErrLoginExpired): the client must log in again rather than try other
	// gateways. Clients that do not know it read it as a denial.
	StatusLoginExpired byte = 3
)

// DeniedStatus is the status that refuses a channel for err, the ticket check's error:
// StatusLoginExpired for ErrLoginExpired, StatusDenied for any other.
func DeniedStatus(err error) byte {
	if errors.Is(err, ErrLoginExpired) {
		return StatusLoginExpired
	}
	return StatusDenied
}

// The QUIC transport carries a session's channels on a connection (ALPN QUICALPN): between
// client and gateway all of them on one connection; to a machine's UDP display port one UDP
// channel a connection, from a gateway or (direct mode) from the client. Each channel opens a bidirectional stream that starts with a kind
// byte (QUICKindTCP or QUICKindUDP), the channel's port (2 bytes, big endian) and a ticket
// frame; the gateway answers one status byte. A TCP channel's bytes then flow on its stream; a
// UDP channel's datagrams travel as QUIC DATAGRAM frames, each prefixed with the channel's port.
const (
	QUICALPN         = "frontdoor-channels/1"
	QUICKindTCP byte = 't'
	QUICKindUDP byte = 'u'
)

// ErrFrame is returned for a frame that is not FrameMagic, a length in 1..MaxLen and a ticket.
var ErrFrame = errors.New("bad ticket frame")

// ReadFrame reads one ticket frame.
func ReadFrame(r io.Reader) (string, error) {
	var hdr [len(FrameMagic) + 2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n := int(binary.BigEndian.Uint16(hdr[len(FrameMagic):]))
	if string(hdr[:len(FrameMagic)]) != FrameMagic || n == 0 || n > MaxLen {
		return "", ErrFrame
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// WriteFrame writes one ticket frame.
func WriteFrame(w io.Writer, tok string) error {
	if len(tok) == 0 || len(tok) > MaxLen {
		return ErrFrame
	}
	b := make([]byte, 0, len(FrameMagic)+2+len(tok))
	b = append(b, FrameMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(tok)))
	b = append(b, tok...)
	_, err := w.Write(b)
	return err
}

// Datagram returns the first datagram of a UDP flow for tok.
func Datagram(tok string) []byte { return append([]byte(FrameMagic), tok...) }

// ParseDatagram returns the ticket of a flow's first datagram, or false.
func ParseDatagram(b []byte) (string, bool) {
	if len(b) <= len(FrameMagic) || len(b)-len(FrameMagic) > MaxLen || string(b[:len(FrameMagic)]) != FrameMagic {
		return "", false
	}
	return string(b[len(FrameMagic):]), true
}

// ErrChannelKind is returned for a QUIC channel header whose kind is neither QUICKindTCP nor
// QUICKindUDP.
var ErrChannelKind = errors.New("bad channel kind")

// ReadChannel reads the opening of a channel on a QUIC stream: the kind, the port and the
// ticket frame. It returns the channel ("8443/tcp") and the ticket.
func ReadChannel(r io.Reader) (Channel, string, error) {
	var hdr [3]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Channel{}, "", err
	}
	ch := Channel{Port: binary.BigEndian.Uint16(hdr[1:])}
	switch hdr[0] {
	case QUICKindTCP:
		ch.Proto = "tcp"
	case QUICKindUDP:
		ch.Proto = "udp"
	default:
		return ch, "", ErrChannelKind
	}
	tok, err := ReadFrame(r)
	return ch, tok, err
}

// WriteChannel writes the opening of channel ch with tok on a QUIC stream, in one write.
func WriteChannel(w io.Writer, ch Channel, tok string) error {
	if len(tok) == 0 || len(tok) > MaxLen {
		return ErrFrame
	}
	kind := QUICKindTCP
	if ch.Proto == "udp" {
		kind = QUICKindUDP
	}
	b := make([]byte, 0, 3+len(FrameMagic)+2+len(tok))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint16(b, ch.Port)
	b = append(b, FrameMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(tok)))
	b = append(b, tok...)
	_, err := w.Write(b)
	return err
}
