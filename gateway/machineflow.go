package gateway

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// machineFlow is a UDP channel's leg to the machine: a QUIC connection of its own to the
// machine's UDP display port (TLS 1.3; the gateway presents its certificate and takes only
// one of the site CA that names the machine), whose first stream carried the ticket and whose
// DATAGRAM frames carry the channel's datagrams, each prefixed with the port (see package
// agent). The connection is the flow: closing it ends the flow at the machine at once.
type machineFlow struct {
	c    *quic.Conn
	port uint16
}

// machineQUIC is the QUIC configuration of the legs to machines: the client's keepalives
// hold a connection, and a machine that went away is noticed within the idle timeout.
var machineQUIC = &quic.Config{EnableDatagrams: true, HandshakeIdleTimeout: 2 * time.Second,
	MaxIdleTimeout: 10 * time.Second, KeepAlivePeriod: 2 * time.Second}

// dialMachineFlow opens a flow to machine at target through tr, hands it tok and waits for
// the machine's status, within timeout.
func dialMachineFlow(ctx context.Context, tr *quic.Transport, base *tls.Config, timeout time.Duration, machine string, target netip.AddrPort, tok string) (*machineFlow, error) {
	tc := base.Clone()
	tc.ServerName = target.Addr().String()
	tc.NextProtos = []string{ticket.QUICALPN}
	tc.MinVersion = tls.VersionTLS13
	tc.VerifyConnection = verifyMachine(base, machine, target)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(target), tc, machineQUIC)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*machineFlow, error) {
		c.CloseWithError(0, "")
		return nil, err
	}
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		return fail(err)
	}
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	if err := ticket.WriteChannel(st, ticket.Channel{Port: target.Port(), Proto: "udp"}, tok); err != nil {
		return fail(err)
	}
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		return fail(fmt.Errorf("machine's status: %w", err))
	}
	if status[0] != ticket.StatusOK {
		return fail(errors.New("the machine refused the ticket"))
	}
	st.SetDeadline(time.Time{})
	return &machineFlow{c: c, port: target.Port()}, nil
}

// Write sends b to the machine as one DATAGRAM frame (dropped, as a network would, when it
// does not fit in one).
func (f *machineFlow) Write(b []byte) error {
	msg := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(msg, f.port)
	copy(msg[2:], b)
	return f.c.SendDatagram(msg)
}

// sendFrame sends a DATAGRAM frame that already starts with the port (a QUIC client's).
func (f *machineFlow) sendFrame(msg []byte) error { return f.c.SendDatagram(msg) }

// next returns the next DATAGRAM frame from the machine, port first, until the connection
// ends.
func (f *machineFlow) next() ([]byte, error) {
	for {
		m, err := f.c.ReceiveDatagram(f.c.Context())
		if err != nil {
			return nil, err
		}
		if len(m) >= 2 && binary.BigEndian.Uint16(m) == f.port {
			return m, nil
		}
	}
}

// Close ends the flow at both ends.
func (f *machineFlow) Close() error { return f.c.CloseWithError(0, "flow closed") }
