package resume

import (
	"crypto/tls"
	"net"
	"sync"
)

// BatchedTLS is a TLS connection whose every Write goes to the connection under it in one
// write: crypto/tls writes each record of up to 16 KiB with a call of its own, so a stream's
// write of writeBatch bytes would be four system calls and four segments, and four wake-ups
// of the gateway that relays them.
type BatchedTLS struct {
	*tls.Conn
	under *gather
	wmu   sync.Mutex // one Write at a time: each holds the gather
}

// BatchTLS makes the TLS connection that mk makes on raw (tls.Server or tls.Client) a
// BatchedTLS.
func BatchTLS(raw net.Conn, mk func(net.Conn) *tls.Conn) *BatchedTLS {
	g := &gather{Conn: raw}
	return &BatchedTLS{Conn: mk(g), under: g}
}

// Write writes b as TLS records, all in one write of the connection under it.
func (c *BatchedTLS) Write(b []byte) (int, error) {
	// A handshake's flight gathered would wait for an answer that cannot come.
	if err := c.Conn.Handshake(); err != nil {
		return 0, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.under.hold()
	n, err := c.Conn.Write(b)
	if ferr := c.under.flush(); err == nil && ferr != nil {
		err = ferr
		n = 0
	}
	return n, err
}

// gather is the connection under a BatchedTLS: between hold and flush it keeps what it is
// given and writes it in one call at flush; otherwise (handshakes, alerts) it writes through.
type gather struct {
	net.Conn
	mu   sync.Mutex // guards held and buf
	held bool
	buf  *[]byte
}

// gatherBufs lends a gather its buffer for one write: an idle connection holds none.
var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, writeBatch+4*64); return &b }}

func (g *gather) hold() {
	g.mu.Lock()
	g.held = true
	g.buf = gatherBufs.Get().(*[]byte)
	g.mu.Unlock()
}

func (g *gather) Write(b []byte) (int, error) {
	g.mu.Lock()
	if g.held {
		*g.buf = append(*g.buf, b...)
		g.mu.Unlock()
		return len(b), nil
	}
	g.mu.Unlock()
	return g.Conn.Write(b)
}

func (g *gather) flush() error {
	g.mu.Lock()
	buf := g.buf
	g.held, g.buf = false, nil
	g.mu.Unlock()
	_, err := g.Conn.Write(*buf)
	*buf = (*buf)[:0]
	gatherBufs.Put(buf)
	return err
}
