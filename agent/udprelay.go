package agent

import (
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
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

// relayQueue bounds the server's datagrams waiting for the relay's channel: past it they are
// dropped, as a congested network drops them (the transport sends them again).
const relayQueue = 64

// relayKey names a relay: a session's UDP channel on a port.
type relayKey struct {
	session string
	port    uint16
}

// udpRelay is a session's flow to the desktop server's UDP port.
type udpRelay struct {
	key  relayKey
	sock *net.UDPConn
	out  chan []byte // the server's datagrams, port first, for send

	mu     sync.Mutex   // guards conns, idle, closed
	conns  []*quic.Conn // the channels attached, newest last: the server's datagrams go to it
	idle   *time.Timer  // closes the relay while no channel carries it
	closed bool
	done   chan struct{} // closed by Close
}

// Close ends the relay: its socket, its sender and its idle timer.
func (r *udpRelay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.idle != nil {
		r.idle.Stop()
	}
	close(r.done)
	return r.sock.Close()
}

// attach adds c to the relay's channels; it reports false when the relay is closed.
func (r *udpRelay) attach(c *quic.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns = append(r.conns, c)
	if r.idle != nil {
		r.idle.Stop()
		r.idle = nil
	}
	return true
}

// detach forgets c and, when no channel is left, closes the relay after timeout unless one
// comes back.
func (r *udpRelay) detach(c *quic.Conn, timeout time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = slices.DeleteFunc(r.conns, func(x *quic.Conn) bool { return x == c })
	if len(r.conns) == 0 && !r.closed && r.idle == nil {
		r.idle = time.AfterFunc(timeout, func() { r.Close() })
	}
}

// current returns the channel the server's datagrams go to, nil while none.
func (r *udpRelay) current() *quic.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.conns) == 0 {
		return nil
	}
	return r.conns[len(r.conns)-1]
}

// send relays a datagram of the channel (its 2-byte port first) to the server.
func (r *udpRelay) send(b []byte) {
	if len(b) > 2 {
		r.sock.Write(b[2:]) // UDP: a datagram the server's port refuses is lost, as on a network
	}
}

// relay returns the session's relay on port with c attached, opening one when there is none
// (or only a closed one).
func (d *Display) relay(c *quic.Conn, claims ticket.Claims, port uint16) (*udpRelay, error) {
	k := relayKey{claims.Session, port}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("the agent stops")
	}
	if r := d.relays[k]; r != nil && r.attach(c) {
		// The relay is cut with its newest ticket: an endpoint that took the session (whose
		// tickets are newer) keeps it when the old one's are revoked.
		if t := d.conns[r]; claims.Issued.After(t.issued) {
			d.conns[r] = ticketOf{claims.Session, claims.Issued}
		}
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
	r := &udpRelay{key: k, sock: sock, out: make(chan []byte, relayQueue), conns: []*quic.Conn{c}, done: make(chan struct{})}
	d.relays[k] = r
	d.conns[r] = ticketOf{claims.Session, claims.Issued}
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.readRelay(r) }()
	go func() { defer d.wg.Done(); r.sendOut() }()
	d.log.Info("udp relay to the desktop server opened", "session", claims.Session, "port", port, "desktop", d.o.Desktop.String(), "from", sock.LocalAddr().String())
	return r, nil
}

// readRelay queues the server's datagrams for the relay's channel until the relay closes,
// then forgets it.
func (d *Display) readRelay(r *udpRelay) {
	defer func() {
		r.Close()
		d.mu.Lock()
		if d.relays[r.key] == r {
			delete(d.relays, r.key)
		}
		delete(d.conns, r)
		d.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.sock.Read(buf)
		if err != nil {
			// An ICMP error of an earlier datagram (the server's port closed, its host
			// unreachable) fails a read: the flow goes on, as UDP does, after a pause that
			// keeps an error that repeats from spinning.
			select {
			case <-r.done:
				return
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		b := make([]byte, 2+n)
		binary.BigEndian.PutUint16(b, r.key.port)
		copy(b[2:], buf[:n])
		select {
		case r.out <- b:
		default: // the channel is behind: lost, as on a congested network
		}
	}
}

// sendOut sends the queued datagrams on the relay's current channel until the relay closes.
// A send may wait (quic-go queues a few datagrams a connection), so it runs apart from the
// reader, which never waits for a channel.
func (r *udpRelay) sendOut() {
	for {
		select {
		case <-r.done:
			return
		case b := <-r.out:
			if c := r.current(); c != nil {
				c.SendDatagram(b) // too large for the path, or the channel gone: lost
			}
		}
	}
}
