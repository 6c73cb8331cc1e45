package quicguard

import (
	"net"

	"github.com/quic-go/quic-go"
	"golang.org/x/time/rate"
)

// What a listening QUIC socket lets through: past FreshPerSecond new connections a second a
// client must prove its address with a stateless Retry (RFC 9000 8.1.2) before any handshake
// or ticket check; past InitialsPerSecond Initials without a token the Guard sheds a share
// in the kernel, and while it does every new connection must answer a Retry first.
const (
	FreshPerSecond    = 200
	InitialsPerSecond = 2000
)

// Transport returns the quic-go Transport of a listening socket, guarded: Retry past
// FreshPerSecond, the Guard past InitialsPerSecond (onChange as for New), no version
// negotiation. Close the Guard with the Transport.
func Transport(c *net.UDPConn, onChange func(keep float64)) (*quic.Transport, *Guard, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	fresh := rate.NewLimiter(FreshPerSecond, FreshPerSecond/4)
	g := New(rc, InitialsPerSecond, onChange)
	tr := &quic.Transport{Conn: c, DisableVersionNegotiationPackets: true,
		VerifySourceAddress: func(net.Addr) bool { g.Note(); return g.Keep() < 1 || !fresh.Allow() }}
	return tr, g, nil
}
