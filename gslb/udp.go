package gslb

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// maxUDPRequest is the largest UDP request read; longer datagrams are cut and fail to unpack.
const maxUDPRequest = 4096

// batchSize is the most datagrams one worker reads (recvmmsg) and answers (sendmmsg) at once.
const batchSize = 32

// batchConn reads and writes several datagrams per system call; ipv4.PacketConn and
// ipv6.PacketConn implement it.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// udpLoop answers datagrams on a socket bound to one address with a fixed set of workers,
// each reading a batch, answering it and writing the replies in one call: no goroutine and no
// buffer per packet. (miekg's server starts a goroutine per packet and makes two system calls
// per query, which cost more than the answer.) Sockets bound to a wildcard address use
// miekg's server, which answers from the address the query was sent to.
type udpLoop struct {
	conn    *net.UDPConn // the batch workers' socket; nil with raw
	raw     *rawUDP      // the blocking workers' socket (udp_linux.go); nil with conn
	batch   batchConn
	local   netip.AddrPort
	handler dns.Handler
	fast    fastFunc // tried first when set; see fastUDP
	log     *slog.Logger
	stop    atomic.Bool // set before the socket is closed

	coalesce time.Duration // blocking workers: pause after a partial batch (ServerOptions.UDPCoalesce)
}

// fastFunc appends to out the reply to the UDP query req from src, or returns ok=false when
// the query needs the full dns.Handler.
type fastFunc func(req []byte, src netip.Addr, out []byte) (reply []byte, ok bool)

// usableUDPLoop returns a loop for pc, or nil when pc needs miekg's server.
func usableUDPLoop(pc net.PacketConn, h dns.Handler, fast fastFunc, log *slog.Logger) *udpLoop {
	c, ok := pc.(*net.UDPConn)
	if !ok {
		return nil
	}
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || ua.IP.IsUnspecified() {
		return nil
	}
	u := &udpLoop{conn: c, local: ua.AddrPort(), handler: h, fast: fast, log: log}
	if u.local.Addr().Unmap().Is4() {
		u.batch = ipv4.NewPacketConn(c)
	} else {
		u.batch = ipv6.NewPacketConn(c)
	}
	return u
}

// rawUDPLoop returns a loop of blocking workers on r.
func rawUDPLoop(r *rawUDP, h dns.Handler, fast fastFunc, coalesce time.Duration, log *slog.Logger) *udpLoop {
	return &udpLoop{raw: r, local: r.Local(), handler: h, fast: fast, log: log, coalesce: coalesce}
}

// workerCount is how many workers a socket gets: one per processor, at most 8.
func workerCount() int { return max(1, min(runtime.GOMAXPROCS(0), 8)) }

// workers returns the functions to run, each until the socket is closed: the blocking workers
// of a rawUDP socket (udp_linux.go), else batch workers through golang.org/x/net and the Go
// poller.
func (u *udpLoop) workers() []func() error {
	if u.raw != nil {
		return u.rawWorkers()
	}
	fs := make([]func() error, workerCount())
	for i := range fs {
		fs[i] = u.serveBatches
	}
	return fs
}

// shutdown makes the workers return; the caller closes the socket next.
func (u *udpLoop) shutdown() { u.stop.Store(true) }

// serveBatches reads with recvmmsg through the Go poller and answers with sendmmsg.
func (u *udpLoop) serveBatches() error {
	in := make([]ipv4.Message, batchSize)
	out := make([]ipv4.Message, batchSize)
	bufs := make([][]byte, batchSize)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, maxUDPRequest)}
		out[i].Buffers = [][]byte{nil}
		bufs[i] = make([]byte, 0, 2048)
	}
	w := &udpWriter{local: u.local}
	for {
		if u.stop.Load() {
			return nil
		}
		n, err := u.batch.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("reading udp: %w", err)
		}
		k := 0
		for i := range n {
			ua, ok := in[i].Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			w.reset(ua.AddrPort(), bufs[k])
			u.answer(w, in[i].Buffers[0][:in[i].N])
			if w.reply != nil {
				bufs[k] = w.buf // keep a buffer the packer had to grow
				out[k].Buffers[0], out[k].Addr = w.reply, ua
				k++
			}
		}
		for off := 0; off < k; {
			m, err := u.batch.WriteBatch(out[off:k], 0)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return nil
				}
				m = max(m, 1) // skip the datagram that failed (e.g. an unreachable peer)
			}
			off += m
		}
		for i := range out[:k] {
			out[i].Addr = nil
		}
	}
}

// answer handles one datagram; a panic in the handler is logged and the loop goes on.
func (u *udpLoop) answer(w *udpWriter, b []byte) {
	defer func() {
		if r := recover(); r != nil {
			u.log.Error("dns handler panic", "peer", w.peer, "panic", r)
		}
	}()
	if u.fast != nil {
		if r, ok := u.fast(b, w.peer.Addr().Unmap(), w.buf[:0]); ok {
			w.buf, w.reply = r[:0], r
			return
		}
	}
	req := new(dns.Msg)
	if err := req.Unpack(b); err != nil {
		if r := formErr(b); r != nil {
			w.WriteMsg(r)
		}
		return
	}
	u.handler.ServeDNS(w, req)
}

// formErr returns a FORMERR reply to a query that does not unpack, or nil when b is too short
// to have a header or is itself a response.
func formErr(b []byte) *dns.Msg {
	if len(b) < 12 || b[2]&0x80 != 0 {
		return nil
	}
	r := new(dns.Msg)
	r.Id = uint16(b[0])<<8 | uint16(b[1])
	r.Response = true
	r.Opcode = int(b[2]>>3) & 0xF
	r.Rcode = dns.RcodeFormatError
	return r
}

// udpWriter is the dns.ResponseWriter of one datagram of a batch: the reply is packed into
// buf and sent with the batch's other replies.
type udpWriter struct {
	local netip.AddrPort
	peer  netip.AddrPort
	buf   []byte // the slot's reply buffer; grown by the packer when too small
	reply []byte // the packed reply, nil when none was written
}

var _ dns.ResponseWriter = (*udpWriter)(nil)

// reset prepares w for the datagram of one slot.
func (w *udpWriter) reset(peer netip.AddrPort, buf []byte) {
	w.peer, w.buf, w.reply = peer, buf, nil
}

func (w *udpWriter) LocalAddr() net.Addr  { return net.UDPAddrFromAddrPort(w.local) }
func (w *udpWriter) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(w.peer) }

// RemoteAddrPort returns the peer without allocating; the Handler prefers it to RemoteAddr.
func (w *udpWriter) RemoteAddrPort() (netip.AddrPort, bool) { return w.peer, false }

func (w *udpWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.PackBuffer(w.buf[:cap(w.buf)])
	if err != nil {
		return err
	}
	w.buf, w.reply = b[:0], b
	return nil
}

func (w *udpWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf[:0], b...)
	w.reply = w.buf
	return len(b), nil
}

func (w *udpWriter) Close() error        { return nil }
func (w *udpWriter) TsigStatus() error   { return nil }
func (w *udpWriter) TsigTimersOnly(bool) {}
func (w *udpWriter) Hijack()             {}
