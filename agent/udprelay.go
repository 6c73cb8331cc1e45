package agent

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// A desktop's UDP transport (RDP's: Windows' RDP server takes it on the port of its TCP one)
// rides the desktop's UDP channel. The agent relays the channel's datagrams to the server's
// address over UDP, from one socket per session and port: the relay. Like a desktop stream's
// connection to the server, the relay outlives the channel that carries it, so that the
// server sees one flow from one address when the session comes back through another gateway
// (its UDP transport goes on); it closes when the session ends, or after the reliability
// timeout without a channel.

// relayKey names a relay: a session's UDP channel on a port.
type relayKey struct {
	session string
	port    uint16
}

// udpRelay is a session's flow to the desktop server's UDP port.
type udpRelay struct {
	key  relayKey
	sock *net.UDPConn

	mu    sync.Mutex  // guards conn, idle
	conn  *quic.Conn  // the channel the server's datagrams go to; nil while none
	idle  *time.Timer // closes the relay while no channel carries it
	close sync.Once
}

// Close ends the relay; its reader forgets it.
func (r *udpRelay) Close() error {
	r.close.Do(func() { r.sock.Close() })
	return nil
}

// attach makes c the channel the server's datagrams go to.
func (r *udpRelay) attach(c *quic.Conn) {
	r.mu.Lock()
	r.conn = c
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
	r.mu.Unlock()
}

// detach forgets c, if it is the relay's channel, and closes the relay after timeout unless a
// channel comes back.
func (r *udpRelay) detach(c *quic.Conn, timeout time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn != c {
		return
	}
	r.conn = nil
	r.idle = time.AfterFunc(timeout, func() { r.Close() })
}

// send relays a datagram of the channel (its 2-byte port first) to the server.
func (r *udpRelay) send(b []byte) {
	if len(b) > 2 {
		r.sock.Write(b[2:]) // UDP: a datagram the server's port refuses is lost, as on a network
	}
}

// relay returns the session's relay on port, opening it when there is none, with c as its
// channel.
func (d *Display) relay(c *quic.Conn, claims ticket.Claims, port uint16) (*udpRelay, error) {
	k := relayKey{claims.Session, port}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the agent stops")
	}
	if r := d.relays[k]; r != nil {
		d.conns[r] = ticketOf{claims.Session, claims.Issued}
		r.attach(c)
		return r, nil
	}
	raddr, err := net.ResolveUDPAddr("udp", d.o.Desktop.Address)
	if err != nil {
		return nil, err
	}
	sock, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, err
	}
	r := &udpRelay{key: k, sock: sock, conn: c}
	d.relays[k] = r
	d.conns[r] = ticketOf{claims.Session, claims.Issued}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.readRelay(r) }()
	d.log.Info("udp relay to the desktop server opened", "session", claims.Session, "port", port, "desktop", d.o.Desktop.String(), "from", sock.LocalAddr().String())
	return r, nil
}

// readRelay sends the server's datagrams to the relay's channel until the relay closes, then
// forgets it.
func (d *Display) readRelay(r *udpRelay) {
	defer func() {
		d.mu.Lock()
		if d.relays[r.key] == r {
			delete(d.relays, r.key)
		}
		delete(d.conns, r)
		d.mu.Unlock()
		r.mu.Lock()
		if r.idle != nil {
			r.idle.Stop()
		}
		r.mu.Unlock()
	}()
	buf := make([]byte, 2+64<<10)
	binary.BigEndian.PutUint16(buf, r.key.port)
	for {
		n, err := r.sock.Read(buf[2:])
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			continue // an ICMP error of an earlier datagram (the server's port closed): go on
		case err != nil:
			return
		}
		r.mu.Lock()
		c := r.conn
		r.mu.Unlock()
		if c != nil {
			c.SendDatagram(buf[:2+n]) // too large for the path, or no room: lost, as on a network
		}
	}
}
