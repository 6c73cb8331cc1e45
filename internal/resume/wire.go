// Package resume is session reliability: a byte stream between a client and a machine's agent
// that outlives the transport under it. Each end numbers what it sends and keeps it until the
// other end has acknowledged it; when the transport breaks (a gateway dies, a path changes),
// the client opens a new one — through another gateway, with its reconnect ticket — and says
// which stream it resumes and how much it has received, the agent answers how much it has
// received, and both send again from there. The programs at either end (a viewer, a desktop
// server) keep their connections across the change and see every byte once, in order.
//
// The wire format runs inside a channel, after its ticket was admitted; gateways relay it
// without reading it. The client opens with a hello (HelloMagic, flags — 1: resume, 2: a
// probe that opens no stream, only asks whether the desktop server answers —, the 16-byte stream
// ID, the bytes it has received and whether it has received the end); the agent answers a
// reply (HelloMagic, a status, the bytes it has received, whether it has received the end,
// and a reason of at most 255 bytes). Then both ends send frames:
//
//	'D' offset(8) length(2) data   bytes of the stream from offset, length 1..MaxData
//	'A' received(8) fin(1)         everything before received arrived; fin: the end too
//	'F' offset(8)                  the end of the stream: nothing follows offset
//	'R' length(1) reason           the stream is over (its far program failed); no resume
//	'P' token(8)                   a ping: answer with a pong of the same token, at once
//	'Q' token(8)                   the pong
//
// Pings are an addition: an agent's reply with StatusOK names what its end takes beyond the
// frames above, as its reason ("ping", Capabilities), and a client sends a ping only to an
// end that named it (an older agent refuses an unknown frame as a protocol error). The
// user's portal pings, to show the round trip to the machine.
//
// Integers are big endian. An end that receives data below what it has already delivered
// drops the duplicate part, data beyond it is a protocol error, and so is an
// acknowledgement of bytes never sent.
package resume

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// HelloMagic opens a hello and a reply.
const HelloMagic = "FDS1"

// Capabilities is what a reply with StatusOK names as its reason: the frames an end takes
// beyond the base ones (pings).
const Capabilities = "ping"

// MaxData is the most bytes one data frame carries.
const MaxData = 16 << 10

// Frame types.
const (
	frameData  byte = 'D'
	frameAck   byte = 'A'
	frameFin   byte = 'F'
	frameReset byte = 'R'
	framePing  byte = 'P'
	framePong  byte = 'Q'
)

// Reply statuses.
const (
	// StatusOK: the stream is open (new) or resumed.
	StatusOK byte = 0
	// StatusUnknown: there is no such stream to resume (it ended, timed out, or the agent
	// restarted).
	StatusUnknown byte = 1
	// StatusUnavailable: the desktop server did not take the connection.
	StatusUnavailable byte = 2
	// StatusRefused: the agent refuses the stream (see the reason).
	StatusRefused byte = 3
)

// Errors of the wire format and of streams.
var (
	ErrProtocol = errors.New("resume: protocol error")
	ErrTimeout  = errors.New("resume: no transport came back in time")
	ErrUnknown  = errors.New("the machine knows no such stream")
	ErrReset    = errors.New("the far end reset the stream")
	ErrClosed   = errors.New("resume: stream closed")
)

// ID names a stream.
type ID [16]byte

// NewID returns a random ID.
func NewID() ID {
	var id ID
	rand.Read(id[:])
	return id
}

// String returns the ID in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Hello is the client's opening of a stream on a transport.
type Hello struct {
	Resume bool // resume stream ID; false: open a new stream named ID
	Probe  bool // open no stream: the agent answers whether its desktop server takes connections
	// Hold, with Probe: the agent keeps the channel open, idle, until the client closes it —
	// the session's presence at its gateway while no viewer is connected, and the client's
	// way to learn that the gateway died.
	Hold     bool
	ID       ID     // the stream
	Received uint64 // bytes the client has received (0 for a new stream)
	Fin      bool   // the client has received the end of the stream
}

const helloLen = len(HelloMagic) + 1 + 16 + 8 + 1

// WriteHello writes h in one write.
func WriteHello(w io.Writer, h Hello) error {
	b := make([]byte, 0, helloLen)
	b = append(b, HelloMagic...)
	b = append(b, boolByte(h.Resume)|boolByte(h.Probe)<<1|boolByte(h.Probe && h.Hold)<<2)
	b = append(b, h.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, h.Received)
	b = append(b, boolByte(h.Fin))
	_, err := w.Write(b)
	return err
}

// ReadHello reads a hello.
func ReadHello(r io.Reader) (Hello, error) {
	var b [helloLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Hello{}, err
	}
	if string(b[:4]) != HelloMagic || (b[4] > 2 && b[4] != 6) || b[29] > 1 {
		return Hello{}, fmt.Errorf("%w: bad hello", ErrProtocol)
	}
	h := Hello{Resume: b[4] == 1, Probe: b[4]&2 != 0, Hold: b[4] == 6, Received: binary.BigEndian.Uint64(b[21:29]), Fin: b[29] == 1}
	copy(h.ID[:], b[5:21])
	if !h.Resume && (h.Received != 0 || h.Fin) {
		return Hello{}, fmt.Errorf("%w: a new stream has received nothing", ErrProtocol)
	}
	return h, nil
}

// Reply is the agent's answer to a hello.
type Reply struct {
	Status   byte
	Received uint64 // bytes the agent has received of the stream
	Fin      bool   // the agent has received the end of the stream
	Reason   string // why, for a status other than StatusOK; at most 255 bytes
}

// WriteReply writes r in one write.
func WriteReply(w io.Writer, r Reply) error {
	reason := r.Reason
	if len(reason) > 255 {
		reason = reason[:255]
	}
	b := make([]byte, 0, len(HelloMagic)+1+8+1+1+len(reason))
	b = append(b, HelloMagic...)
	b = append(b, r.Status)
	b = binary.BigEndian.AppendUint64(b, r.Received)
	b = append(b, boolByte(r.Fin), byte(len(reason)))
	b = append(b, reason...)
	_, err := w.Write(b)
	return err
}

// ReadReply reads a reply.
func ReadReply(r io.Reader) (Reply, error) {
	var b [len(HelloMagic) + 1 + 8 + 1 + 1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Reply{}, err
	}
	if string(b[:4]) != HelloMagic || b[13] > 1 {
		return Reply{}, fmt.Errorf("%w: bad reply", ErrProtocol)
	}
	rep := Reply{Status: b[4], Received: binary.BigEndian.Uint64(b[5:13]), Fin: b[13] == 1}
	if n := int(b[14]); n > 0 {
		reason := make([]byte, n)
		if _, err := io.ReadFull(r, reason); err != nil {
			return Reply{}, err
		}
		rep.Reason = string(reason)
	}
	return rep, nil
}

// Err returns the reply's error: nil for StatusOK.
func (r Reply) Err() error {
	switch r.Status {
	case StatusOK:
		return nil
	case StatusUnknown:
		return ErrUnknown
	case StatusUnavailable:
		return fmt.Errorf("the desktop server does not answer: %s", r.Reason)
	}
	if r.Reason != "" {
		return fmt.Errorf("the machine refused the stream: %s", r.Reason)
	}
	return errors.New("the machine refused the stream")
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// frame is one decoded frame.
type frame struct {
	typ    byte
	off    uint64 // data and fin: the offset; ack: received; ping and pong: the token
	fin    bool   // ack
	data   []byte // data: the bytes (aliasing the reader's buffer); reset: the reason
	reason string
}

// readFrame reads one frame into f, using buf (at least MaxData bytes) for its data.
func readFrame(r io.Reader, buf []byte, f *frame) error {
	var hdr [11]byte
	if _, err := io.ReadFull(r, hdr[:1]); err != nil {
		return err
	}
	f.typ = hdr[0]
	switch f.typ {
	case frameData:
		if _, err := io.ReadFull(r, hdr[1:11]); err != nil {
			return noEOF(err)
		}
		f.off = binary.BigEndian.Uint64(hdr[1:9])
		n := int(binary.BigEndian.Uint16(hdr[9:11]))
		if n == 0 || n > MaxData {
			return fmt.Errorf("%w: data frame of %d bytes", ErrProtocol, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return noEOF(err)
		}
		f.data = buf[:n]
	case frameAck:
		if _, err := io.ReadFull(r, hdr[1:10]); err != nil {
			return noEOF(err)
		}
		if hdr[9] > 1 {
			return fmt.Errorf("%w: bad ack", ErrProtocol)
		}
		f.off, f.fin = binary.BigEndian.Uint64(hdr[1:9]), hdr[9] == 1
	case frameFin:
		if _, err := io.ReadFull(r, hdr[1:9]); err != nil {
			return noEOF(err)
		}
		f.off = binary.BigEndian.Uint64(hdr[1:9])
	case framePing, framePong:
		if _, err := io.ReadFull(r, hdr[1:9]); err != nil {
			return noEOF(err)
		}
		f.off = binary.BigEndian.Uint64(hdr[1:9])
	case frameReset:
		if _, err := io.ReadFull(r, hdr[1:2]); err != nil {
			return noEOF(err)
		}
		if n := int(hdr[1]); n > 0 {
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return noEOF(err)
			}
			f.reason = string(buf[:n])
		} else {
			f.reason = ""
		}
	default:
		return fmt.Errorf("%w: frame type %#x", ErrProtocol, f.typ)
	}
	return nil
}

// noEOF turns an end of input inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// dataHeader is the length of a data frame's header: type, offset, length.
const dataHeader = 1 + 8 + 2

func appendData(b []byte, off uint64, data []byte) []byte {
	b = append(b, frameData)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

func appendAck(b []byte, received uint64, fin bool) []byte {
	b = append(b, frameAck)
	b = binary.BigEndian.AppendUint64(b, received)
	return append(b, boolByte(fin))
}

func appendFin(b []byte, off uint64) []byte {
	b = append(b, frameFin)
	return binary.BigEndian.AppendUint64(b, off)
}

func appendPong(b []byte, token uint64) []byte {
	b = append(b, framePong)
	return binary.BigEndian.AppendUint64(b, token)
}

func appendReset(b []byte, reason string) []byte {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	b = append(b, frameReset, byte(len(reason)))
	return append(b, reason...)
}
