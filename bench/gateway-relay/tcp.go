package main

// The TCP load: bulk streams through a relay into a sink, one way (client → sink), as iperf3
// does. The streams are one of:
//
//   - fd-tls: frontdoor's TLS channel as the client package opens it (client.dialTCP): TLS
//     to the gateway's channel port, the ticket frame, the status byte; the gateway dials the
//     machine over TLS 1.3 with its certificate of the site CA (mutual), passes the frame on
//     and splices; the machine's end checks the ticket as the agent does and drops the bytes;
//   - haproxy: TLS to HAProxy (mode tcp, TLS terminated at the bind), which forwards plain
//     TCP to the backend's sink;
//   - haproxy-tls2: TLS to HAProxy, which re-encrypts to the backend's TLS 1.3 sink
//     presenting a client certificate of the site CA: the same work as frontdoor's gateway.

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
)

type tlsConn = tls.Conn

// dialFD opens one TLS channel through frontdoor's gateway.
func dialFD(s *site) (*tls.Conn, error) {
	tok, err := s.issue(ticket.Launch, ticket.Channel{Port: tcpPort, Proto: "tcp"})
	if err != nil {
		return nil, err
	}
	c, err := dialTLS(netip.AddrPortFrom(gatewayIP, tcpPort).String(), gatewayIP.String(), s)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var st [1]byte
	if err := ticket.WriteFrame(c, tok); err == nil {
		_, err = io.ReadFull(c, st[:])
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	switch st[0] {
	case ticket.StatusOK:
	case ticket.StatusRotated: // a gateway that rotates reconnect tickets: the next one follows
		if _, err := ticket.ReadFrame(c); err != nil {
			c.Close()
			return nil, err
		}
	default:
		c.Close()
		return nil, errors.New("the gateway refused the ticket")
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// dialTLS opens a TLS connection to addr and checks the relay's certificate for host.
func dialTLS(addr, host string, s *site) (*tls.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{RootCAs: s.CA.Pool(), ServerName: host, MinVersion: tls.VersionTLS12}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

// bulkResult is one TCP row's load-side measurement.
type bulkResult struct {
	Bytes   int64 // written inside the window, all streams
	Seconds float64
	Cipher  string
	Err     string
}

// runBulk writes 64 KB chunks on every stream of conns as fast as they take them: warm-up,
// then the measured window (start and end are called at its edges), then it closes them.
func runBulk(conns []*tls.Conn, warm, dur time.Duration, start, end func()) bulkResult {
	const maxChunks = 1 << 28 // per stream: 16 TB
	var res bulkResult
	if len(conns) > 0 {
		st := conns[0].ConnectionState()
		res.Cipher = tls.VersionName(st.Version) + " " + tls.CipherSuiteName(st.CipherSuite)
	}
	var total atomic.Int64
	var stop atomic.Bool
	var errMu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		c.SetWriteDeadline(time.Now().Add(warm + dur + 10*time.Second))
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for i := 0; i < maxChunks && !stop.Load(); i++ {
				n, err := c.Write(buf)
				total.Add(int64(n))
				if err != nil {
					if !stop.Load() {
						errMu.Lock()
						res.Err = err.Error()
						errMu.Unlock()
					}
					return
				}
			}
		})
	}
	time.Sleep(warm)
	b0 := total.Load()
	start()
	t0 := time.Now()
	time.Sleep(dur)
	b1 := total.Load()
	end()
	res.Seconds = time.Since(t0).Seconds()
	res.Bytes = b1 - b0
	stop.Store(true)
	for _, c := range conns {
		c.Close() // breaks a Write in flight
	}
	wg.Wait()
	return res
}
