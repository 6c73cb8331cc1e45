package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// A gateway's QUIC end (Gateway.ListenQUIC) is that gateway on QUIC: on its address, with its
// certificate, taking its tickets to its machines.
func TestAGatewaysQUICEndIsTheGateway(t *testing.T) {
	r, _ := startOne(t)
	q, err := r.gw.ListenQUIC(0)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(q.Addr().String()); host != r.addr {
		t.Fatalf("the QUIC end listens on %s, want the gateway's address %s", q.Addr(), r.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	defer func() { cancel(); <-served; q.Close() }()

	qc, err := quic.DialAddr(ctx, q.Addr().String(), &tls.Config{RootCAs: r.pool, NextProtos: []string{ticket.QUICALPN}}, &quic.Config{EnableDatagrams: true})
	if err != nil {
		t.Fatalf("a handshake trusting the gateway's certificate: %v", err)
	}
	defer qc.CloseWithError(0, "")
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte{ticket.QUICKindTCP, byte(r.port >> 8), byte(r.port)})
	ticket.WriteFrame(st, r.issue(t, ticket.Reconnect, "s-1", "vda-1"))
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := []byte{ticket.StatusDenied}
	if _, err := io.ReadFull(st, b); err != nil || b[0] != ticket.StatusOK {
		t.Fatalf("a channel with the gateway's ticket: status %d, %v; want OK", b[0], err)
	}
}
