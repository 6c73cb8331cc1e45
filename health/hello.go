package health

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The TLS hello check (KindTLS without VerifyName) sends a ClientHello and reads the first
// record back, like HAProxy's ssl-hello-chk: a TLS stack that answers a ClientHello with a
// ServerHello is up. It costs a connect and two small packets instead of a key exchange and
// a certificate parse. The ClientHello is made once per server name by crypto/tls writing
// into memory (so it is the hello a Go client sends), then replayed on every probe.

// helloReplyLen is how much of the answer the check reads: a record header (type, version,
// length) and the first two bytes of the record, which a ServerHello and an alert both have.
const helloReplyLen = 7

// The record types the check knows.
const (
	recordAlert     = 0x15
	recordHandshake = 0x16
	typeServerHello = 2
)

// helloReply judges the first helloReplyLen bytes a TLS port answered to a ClientHello:
// nil for a handshake record that starts a ServerHello (a HelloRetryRequest included).
// An alert means the TLS stack refused our hello (no common version, cipher or name): the
// full handshake would fail there too, so it is a failure, ErrBadReply. Anything else is
// not TLS, also ErrBadReply.
func helloReply(addr netip.AddrPort, b []byte) error {
	switch {
	case len(b) < helloReplyLen:
		return fmt.Errorf("TLS hello to %s: %d bytes before the connection closed: %w", addr, len(b), ErrBadReply)
	case b[0] == recordHandshake && b[1] == 3 && b[5] == typeServerHello:
		return nil
	case b[0] == recordAlert && b[1] == 3:
		return fmt.Errorf("TLS hello to %s: alert %d (level %d): %w", addr, b[6], b[5], ErrBadReply)
	}
	return fmt.Errorf("TLS hello to %s: not a ServerHello (% x): %w", addr, b, ErrBadReply)
}

// helloCache holds one ClientHello per server name.
type helloCache struct {
	mu     sync.Mutex // guards byName
	byName map[string][]byte
}

// get returns the ClientHello record for serverName, making it on first use.
func (h *helloCache) get(serverName string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.byName[serverName]; ok {
		return b, nil
	}
	b, err := makeClientHello(serverName)
	if err != nil {
		return nil, err
	}
	if h.byName == nil {
		h.byName = map[string][]byte{}
	}
	h.byName[serverName] = b
	return b, nil
}

var errCaptured = errors.New("client hello captured")

// makeClientHello runs a crypto/tls client against a conn that keeps what it writes and
// returns the first record: the ClientHello.
func makeClientHello(serverName string) ([]byte, error) {
	cc := &captureConn{}
	tc := tls.Client(cc, &tls.Config{
		ServerName:         serverName,
		InsecureSkipVerify: true, // never gets that far
		NextProtos:         []string{"http/1.1"},
		CurvePreferences:   []tls.CurveID{tls.X25519, tls.CurveP256},
	})
	tc.Handshake()
	b := cc.buf
	if len(b) < 5 || b[0] != recordHandshake || 5+(int(b[3])<<8|int(b[4])) != len(b) {
		return nil, fmt.Errorf("making a TLS ClientHello: captured %d bytes that are not one handshake record", len(b))
	}
	return b, nil
}

// captureConn is a net.Conn that keeps the first write and fails every call.
type captureConn struct{ buf []byte }

func (c *captureConn) Write(b []byte) (int, error) {
	if c.buf == nil {
		c.buf = append([]byte(nil), b...)
	}
	return 0, errCaptured
}

func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// probeHello runs the hello check over an established connection (the portable path).
func probeHello(conn net.Conn, addr netip.AddrPort, hello []byte) error {
	if _, err := conn.Write(hello); err != nil {
		return fmt.Errorf("sending a TLS ClientHello to %s: %w", addr, err)
	}
	var b [helloReplyLen]byte
	n, err := io.ReadFull(conn, b[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("reading the TLS answer of %s: %w", addr, err)
	}
	return helloReply(addr, b[:n])
}
