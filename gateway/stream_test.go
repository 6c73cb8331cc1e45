package gateway

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/internal/resume"
)

// echoDesktop runs a desktop server that echoes each connection, half-close passed on, and
// returns its address: the machine's agent fronts it, so the gateway tests see their bytes
// come back through the whole path.
func echoDesktop(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.Copy(c, c); err == nil {
					c.(*net.TCPConn).CloseWrite()
				}
			}()
		}
	}()
	return l.Addr().String()
}

// chanConn is a test client's TCP channel after its ticket: a desktop stream opened with a
// hello, whose frames it speaks on this one channel without ever resuming (package resume),
// so that a cut channel reads as an error, as the tests want.
type chanConn struct {
	net.Conn
	sent, recv uint64
	buf        []byte
}

// openStream sends a new stream's hello on c and reads the machine's reply.
func openStream(c net.Conn) (*chanConn, error) {
	if err := resume.WriteHello(c, resume.Hello{ID: resume.NewID()}); err != nil {
		return nil, err
	}
	rep, err := resume.ReadReply(c)
	if err != nil {
		return nil, err
	}
	if err := rep.Err(); err != nil {
		return nil, err
	}
	return &chanConn{Conn: c}, nil
}

// Write sends b in data frames.
func (c *chanConn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), resume.MaxData)
		f := []byte{'D'}
		f = binary.BigEndian.AppendUint64(f, c.sent)
		f = binary.BigEndian.AppendUint16(f, uint16(k))
		if _, err := c.Conn.Write(append(f, b[:k]...)); err != nil {
			return n, err
		}
		c.sent += uint64(k)
		n += k
		b = b[k:]
	}
	return n, nil
}

// CloseWrite sends the end of the stream.
func (c *chanConn) CloseWrite() error {
	f := binary.BigEndian.AppendUint64([]byte{'F'}, c.sent)
	_, err := c.Conn.Write(f)
	return err
}

// Read returns the data of the next frames, acknowledging them; io.EOF at the stream's end.
func (c *chanConn) Read(b []byte) (int, error) {
	for len(c.buf) == 0 {
		var typ [1]byte
		if _, err := io.ReadFull(c.Conn, typ[:]); err != nil {
			return 0, err
		}
		switch typ[0] {
		case 'D':
			var h [10]byte
			if _, err := io.ReadFull(c.Conn, h[:]); err != nil {
				return 0, err
			}
			data := make([]byte, binary.BigEndian.Uint16(h[8:]))
			if _, err := io.ReadFull(c.Conn, data); err != nil {
				return 0, err
			}
			c.buf = data
			c.recv += uint64(len(data))
			ack := binary.BigEndian.AppendUint64([]byte{'A'}, c.recv)
			if _, err := c.Conn.Write(append(ack, 0)); err != nil {
				return 0, err
			}
		case 'A':
			if _, err := io.ReadFull(c.Conn, make([]byte, 9)); err != nil {
				return 0, err
			}
		case 'F':
			if _, err := io.ReadFull(c.Conn, make([]byte, 8)); err != nil {
				return 0, err
			}
			return 0, io.EOF
		case 'R':
			var n [1]byte
			io.ReadFull(c.Conn, n[:])
			reason := make([]byte, n[0])
			io.ReadFull(c.Conn, reason)
			return 0, fmt.Errorf("stream reset: %s", reason)
		default:
			return 0, errors.New("not a stream frame")
		}
	}
	n := copy(b, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// pump copies what io.Copy does, whatever sizes its reads come in, and ends at io.EOF
// without an error.
func TestPumpCopiesLikeIOCopy(t *testing.T) {
	for _, sizes := range [][]int{{1}, {pumpSmall}, {pumpSmall, 40 << 10, 10, 70 << 10, 5}, {100 << 10}} {
		var want []byte
		var chunks [][]byte
		for i, n := range sizes {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(i*31 + j)
			}
			chunks = append(chunks, b)
			want = append(want, b...)
		}
		var got bytes.Buffer
		n, err := pump(&got, &chunked{chunks: chunks})
		if err != nil || n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
			t.Errorf("sizes %v: copied %d bytes (%v), equal %v; want %d", sizes, n, err, bytes.Equal(got.Bytes(), want), len(want))
		}
	}
}

// chunked returns its chunks one Read at a time (as far as the buffer takes), then io.EOF.
type chunked struct{ chunks [][]byte }

func (c *chunked) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// echoes sends n random bytes on c's stream, then its end, and fails t unless the desktop
// (an echo) sends the same bytes back before its own end.
func echoes(t *testing.T, c *chanConn, n int) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	go func() { c.Write(data); c.CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("echo differs: %d bytes back of %d", len(got), len(data))
	}
}
