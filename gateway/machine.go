package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// ErrNotTheMachine refuses a machine whose certificate does not name the ticket's machine.
var ErrNotTheMachine = errors.New("the machine's certificate does not name it")

// dialMachine opens a channel's TLS connection to machine at addr within timeout: the
// gateway presents its certificate from base (a gateway's of the site CA) and takes only a
// certificate of the site CA that names the machine, and that base's own VerifyConnection
// (a revocation check) takes.
func dialMachine(ctx context.Context, base *tls.Config, timeout time.Duration, machine string, addr netip.AddrPort) (*tls.Conn, error) {
	tc := base.Clone()
	tc.ServerName = addr.Addr().String()
	tc.VerifyConnection = verifyMachine(base, machine, addr)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: tc}
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

// verifyMachine checks the certificate of machine at addr: base's VerifyConnection first,
// then that it names the machine.
func verifyMachine(base *tls.Config, machine string, addr netip.AddrPort) func(tls.ConnectionState) error {
	return func(st tls.ConnectionState) error {
		if base.VerifyConnection != nil {
			if err := base.VerifyConnection(st); err != nil {
				return err
			}
		}
		if len(st.PeerCertificates) == 0 || !siteid.Is(st.PeerCertificates[0], siteid.RoleMachine, machine) {
			return fmt.Errorf("%w: %s at %s", ErrNotTheMachine, machine, addr)
		}
		return nil
	}
}
