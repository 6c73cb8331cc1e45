package ticket

import (
	"crypto/sha256"
	"crypto/x509"
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
	// StatusSealed admits a sealed channel (FrameMagicSealed): see ReadSealed.
	StatusSealed byte = 4
)

// A sealed channel is a TCP channel whose bytes the gateway relays without decrypting them.
// The client opens it with a frame of FrameMagicSealed in place of FrameMagic, on TLS to the
// gateway; the gateway checks the ticket, opens its mutual TLS connection to the machine and
// sends the same frame there; an agent that takes it answers StatusOK. The gateway then
// answers the client StatusSealed, the pin of the machine's certificate (Pin) and the next
// reconnect ticket (ReadSealed), and from there all three drop their TLS layer (each end has
// sent its last record of it and waits for the other to speak) and the gateway copies the
// TCP bytes as they come. On them the client makes a TLS 1.3 connection to the agent that
// takes only the pinned certificate, and sends the ticket frame again as its first bytes: the
// agent takes the connection only from the holder of the ticket the gateway brought. A
// gateway whose machine does not take sealed channels (an agent of an earlier version closes
// at the unknown frame) admits the channel as a plain one instead (StatusOK or
// StatusRotated), and so does one that cannot seal (a WebSocket, a QUIC stream): the client
// goes on with the gateway's TLS as before. A gateway of an earlier version closes at the
// sealed frame, before it reads the ticket; the client then opens the channel again with the
// plain frame.
const FrameMagicSealed = "FDT2"

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
	tok, sealed, err := ReadOpening(r)
	if err == nil && sealed {
		return "", ErrFrame
	}
	return tok, err
}

// ReadOpening reads the frame that opens a TCP channel: a ticket frame, or one that asks for
// a sealed channel (FrameMagicSealed).
func ReadOpening(r io.Reader) (tok string, sealed bool, err error) {
	var hdr [len(FrameMagic) + 2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", false, err
	}
	n := int(binary.BigEndian.Uint16(hdr[len(FrameMagic):]))
	magic := string(hdr[:len(FrameMagic)])
	if (magic != FrameMagic && magic != FrameMagicSealed) || n == 0 || n > MaxLen {
		return "", false, ErrFrame
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", false, err
	}
	return string(b), magic == FrameMagicSealed, nil
}

// WriteFrame writes one ticket frame.
func WriteFrame(w io.Writer, tok string) error { return writeFrame(w, FrameMagic, tok) }

// WriteSealedFrame writes the frame that asks for a sealed channel.
func WriteSealedFrame(w io.Writer, tok string) error { return writeFrame(w, FrameMagicSealed, tok) }

func writeFrame(w io.Writer, magic, tok string) error {
	if len(tok) == 0 || len(tok) > MaxLen {
		return ErrFrame
	}
	b := make([]byte, 0, len(magic)+2+len(tok))
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(tok)))
	b = append(b, tok...)
	_, err := w.Write(b)
	return err
}

// Pin is what a sealed channel's client takes from the machine: the SHA-256 of its
// certificate's public key.
func Pin(cert *x509.Certificate) [sha256.Size]byte {
	return sha256.Sum256(cert.RawSubjectPublicKeyInfo)
}

// WriteSealed writes a gateway's StatusSealed with the machine's pin and the next reconnect
// ticket (none: "") in one write.
func WriteSealed(w io.Writer, pin [sha256.Size]byte, next string) error {
	if len(next) > MaxLen {
		return ErrFrame
	}
	b := make([]byte, 0, 1+len(pin)+2+len(next))
	b = append(b, StatusSealed)
	b = append(b, pin[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(next)))
	b = append(b, next...)
	_, err := w.Write(b)
	return err
}

// ReadSealed reads what follows StatusSealed: the pin and the next reconnect ticket ("" for
// none).
func ReadSealed(r io.Reader) (pin [sha256.Size]byte, next string, err error) {
	var hdr [sha256.Size + 2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return pin, "", err
	}
	copy(pin[:], hdr[:])
	n := int(binary.BigEndian.Uint16(hdr[sha256.Size:]))
	if n > MaxLen {
		return pin, "", ErrFrame
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return pin, "", err
	}
	return pin, string(b), nil
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
