package xdesk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// x224Request is an RDP connection request: a TPKT header (version 3, length 19), an X.224
// Connection Request (length 14, code 0xe0, references 0, class 0) and an RDP negotiation
// request asking for TLS ([MS-RDPBCGR] 2.2.1.1).
const x224Request = "\x03\x00\x00\x13" +
	"\x0e\xe0\x00\x00\x00\x00\x00" +
	"\x01\x00\x08\x00\x01\x00\x00\x00"

// speaksRDP is a probe that succeeds once the server at address answers an RDP connection
// request with an X.224 Connection Confirm: a port that merely accepts could be anyone's.
func speaksRDP(address string) func(context.Context) error {
	return func(ctx context.Context) error {
		return probeConn(ctx, "tcp", address, func(c net.Conn) error { return AnswersRDP(c) })
	}
}

// AnswersRDP sends an RDP connection request on c and checks that an X.224 Connection
// Confirm comes back: the far end speaks RDP.
func AnswersRDP(c io.ReadWriter) error {
	if _, err := io.WriteString(c, x224Request); err != nil {
		return fmt.Errorf("sending an RDP connection request: %w", err)
	}
	var head [6]byte // TPKT header, X.224 length and code
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return fmt.Errorf("reading an RDP connection confirm: %w", err)
	}
	if head[0] != 0x03 || head[5]&0xf0 != 0xd0 {
		return errors.New("the answer to an RDP connection request is no connection confirm")
	}
	return nil
}

// speaksVNC is a probe that succeeds once the server at network, address greets a
// connection with an RFB protocol version.
func speaksVNC(network, address string) func(context.Context) error {
	return func(ctx context.Context) error {
		return probeConn(ctx, network, address, func(c net.Conn) error {
			var greeting [12]byte
			if _, err := io.ReadFull(c, greeting[:]); err != nil {
				return fmt.Errorf("reading the VNC greeting: %w", err)
			}
			if string(greeting[:4]) != "RFB " {
				return fmt.Errorf("not a VNC greeting: %q", greeting)
			}
			return nil
		})
	}
}

// probeConn dials network, address and runs talk on the connection, all within a second
// and cut short when ctx ends.
func probeConn(ctx context.Context, network, address string, talk func(net.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	return talk(c)
}
