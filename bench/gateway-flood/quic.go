//go:build linux && !floodbase

package main

// The QUIC target: the gateway's QUIC port (gateway.QUIC, as node serves it on a gateway's
// quic_port), an established flow on it from a quic-go client speaking the wire format of
// package ticket, and a flood of forged QUIC Initials from spoofed loopback sources. The
// machine is the plain target's (agent.Display, whose UDP display port speaks QUIC): the
// gateway relays the flow to it on a QUIC connection of its own, from the same socket.
//
// The -base build (the gateway before c42a390) is built with -tags floodbase, without this
// file: its rows are the plain target's only.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv4"
)

const quicTarget = true

// spoofedNet is the /16 the forged Initials come from (127.200.0.0/16); nothing listens there.
var spoofedNet = [2]byte{127, 200}

// runQUICGateway serves a gateway.QUIC on 127.0.50.1 (a free port) until stdin closes; the
// flows' channel port is the machine's on 127.0.60.1.
func runQUICGateway(dir, profile string) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	cert, err := s.ca.PartyCertificate(siteid.RoleGateway, "gw-1", []netip.Addr{gatewayIP})
	if err != nil {
		return err
	}
	var denied atomic.Int64
	log := slog.New(countingHandler{slog.NewTextHandler(io.Discard, nil), &denied})
	signer := ticket.NewSigner(s.key, nil)
	q, err := gateway.ListenQUIC(gateway.QUICOptions{Name: "gw-1", Address: netip.AddrPortFrom(gatewayIP, 0).String(),
		TLS:        &tls.Config{Certificates: []tls.Certificate{*cert}},
		MachineTLS: s.ca.Party(siteid.RoleGateway, "gw-1", []netip.Addr{gatewayIP}).ClientTLS(nil),
		Verifier:   ticket.NewVerifier(s.pub(), ticket.NewMemoryLedger(0, nil), nil),
		Sessions:   sessions{},
		Machine:    func(n string) (netip.Addr, bool) { return machineIP, n == machineName },
		Reissue: func(c ticket.Claims) (string, error) { // as node's: the next reconnect ticket
			tok, _, err := signer.Reissue(c, c.Issued.Add(10*time.Minute))
			return tok, err
		},
		Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- q.Serve(ctx) }()
	fmt.Printf("READY %s GOMAXPROCS=%d\n", q.Addr(), runtime.GOMAXPROCS(0))
	h := profileCommands(profile)
	h["STATS"] = func() { printLine("STATS", gatewayStats{Denied: denied.Load(), Flows: len(q.Clients())}) }
	commands(h)
	cancel()
	return <-served
}

// quicEcho is the flow's client end: DATAGRAM frames prefixed with the channel's port.
type quicEcho struct {
	c    *quic.Conn
	port uint16
	out  []byte
}

func (q *quicEcho) send(b []byte) error {
	q.out = append(q.out[:2], b...)
	return q.c.SendDatagram(q.out)
}

func (q *quicEcho) recv(buf []byte, deadline time.Time) (int, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for range 1 << 16 { // frames of another port (none here) are skipped, a bounded number of them
		m, err := q.c.ReceiveDatagram(ctx)
		if err != nil {
			return 0, err
		}
		if len(m) >= 2 && binary.BigEndian.Uint16(m) == q.port {
			return copy(buf, m[2:]), nil
		}
	}
	return 0, errors.New("no datagram of the channel")
}

// runQUICClient opens the UDP channel port on the gateway's QUIC port at gw from 127.0.80.1
// (the stream: 'u', the port, the launch ticket's frame; the status, and after
// ticket.StatusRotated the next ticket's frame), then echoes as runClient does. It prints
// RESULT, then keeps the connection open (as the plain target's flow stays at the gateway)
// until the orchestrator closes stdin, 60 s at most.
func runQUICClient(dir string, gw netip.AddrPort, port uint16, tok string, size int, interval, lossAfter, warm, dur time.Duration) {
	r, measured := quicFlow(dir, gw, port, tok, size, interval, lossAfter, warm, dur)
	printLine("RESULT", r)
	if measured {
		time.Sleep(60 * time.Second) // measureEcho's stdin reader ends the process at end of input
	}
}

func quicFlow(dir string, gw netip.AddrPort, port uint16, tok string, size int, interval, lossAfter, warm, dur time.Duration) (flowResult, bool) {
	var r flowResult
	fail := func(err error) (flowResult, bool) { r.Err = err.Error(); return r, false }
	s, err := loadSite(dir)
	if err != nil {
		return fail(err)
	}
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(clientIP, 0)))
	if err != nil {
		return fail(err)
	}
	// Neither the socket nor the connection is closed here: the process's end closes them.
	tr := &quic.Transport{Conn: uc}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := &tls.Config{RootCAs: s.ca.Pool(), ServerName: gw.Addr().String(), NextProtos: []string{ticket.QUICALPN}, MinVersion: tls.VersionTLS13}
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(gw), tc,
		&quic.Config{EnableDatagrams: true, KeepAlivePeriod: time.Second, MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		return fail(fmt.Errorf("the QUIC connection: %w", err))
	}
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		return fail(err)
	}
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	if _, err := st.Write([]byte{ticket.QUICKindUDP, byte(port >> 8), byte(port)}); err != nil {
		return fail(err)
	}
	if err := ticket.WriteFrame(st, tok); err != nil {
		return fail(err)
	}
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		return fail(fmt.Errorf("the gateway's status: %w", err))
	}
	switch status[0] {
	case ticket.StatusOK:
	case ticket.StatusRotated: // the next reconnect ticket follows
		if _, err := ticket.ReadFrame(st); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("the gateway refused the ticket (status %d)", status[0]))
	}
	st.SetDeadline(time.Time{})
	out := make([]byte, 2, 2048)
	binary.BigEndian.PutUint16(out, port)
	l := &quicEcho{c: c, port: port, out: out}
	// The flow is open once a datagram comes back (the gateway's leg to the machine is up
	// when it answers the status, but a first datagram may still be lost).
	buf := make([]byte, 2048)
	probe := []byte("open?...")
	open := false
	for try := 0; try < 10 && !open; try++ {
		l.send(probe)
		n, err := l.recv(buf, time.Now().Add(300*time.Millisecond))
		open = err == nil && string(buf[:n]) == string(probe)
	}
	if !open {
		return fail(errors.New("no echo on the QUIC flow in 10 tries"))
	}
	measureEcho(l, &r, size, interval, lossAfter, warm, dur)
	if err := context.Cause(c.Context()); err != nil && r.Err == "" {
		r.Err = "the flow's QUIC connection closed: " + err.Error()
	}
	return r, true
}

// quicFloodResult is what the QUIC flood process reports.
type quicFloodResult struct {
	Sent      int64   `json:"sent"`
	Errors    int64   `json:"errors"`
	Retries   int64   `json:"retries"`   // Retries back to the spoofed sources
	Handshake int64   `json:"handshake"` // datagrams back to the spoofed sources that are no Retry
	Seconds   float64 `json:"seconds"`
	Bytes     int     `json:"bytes"`
	Pool      int     `json:"pool"`
	Err       string  `json:"err,omitempty"`
}

// runQUICFlood sends forged Initials (see initialForger) to gw at rate per second for dur,
// and never more than rate×dur of them, each from a random source of 127.200.0.0/16 through
// a raw socket. They are made before START (about 6 µs each), each with a DCID of its own: all
// of them, up to 2^20 (past that they repeat, round robin), so that no forged Initial reaches
// a handshake an earlier one started. It paces by the clock every millisecond, counts
// the gateway's answers to the spoofed sources (Retries, and the handshake packets of the
// Initials it took without one) and answers STATS with its counts.
func runQUICFlood(gw netip.AddrPort, rate int, dur time.Duration) quicFloodResult {
	var r quicFloodResult
	fail := func(err error) quicFloodResult { r.Err = err.Error(); return r }
	captured, err := firstInitial(net.UDPAddrFromAddrPort(gw))
	if err != nil {
		return fail(err)
	}
	f, err := newInitialForger(captured)
	if err != nil {
		return fail(err)
	}
	r.Bytes = f.size()
	total := int64(float64(rate) * dur.Seconds())
	pool := int(min(total, 1<<20))
	if pool < 1 {
		return fail(errors.New("nothing to send"))
	}
	r.Pool = pool
	const ipUDP = 28
	stride := ipUDP + f.size()
	slab := make([]byte, pool*stride)
	gw4 := gw.Addr().As4()
	for i := range pool {
		pkt := slab[i*stride : (i+1)*stride]
		ip, udp := pkt[:20], pkt[20:28]
		ip[0], ip[8], ip[9] = 0x45, 64, syscall.IPPROTO_UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(len(pkt)))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		copy(ip[16:20], gw4[:])
		binary.BigEndian.PutUint16(udp[2:], gw.Port())
		binary.BigEndian.PutUint16(udp[4:], uint16(8+f.size()))
		if err := f.forge(pkt[ipUDP:]); err != nil {
			return fail(err)
		}
	}
	sfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
	if err != nil {
		return fail(fmt.Errorf("raw socket (needs root): %w", err))
	}
	defer syscall.Close(sfd)
	var retries, handshake atomic.Int64
	stopCount, err := countAnswers(gw, &retries, &handshake)
	if err != nil {
		return fail(err)
	}
	defer stopCount()
	var sent atomic.Int64
	go func() {
		commands(map[string]func(){"STATS": func() {
			printLine("STATS", map[string]int64{"sent": sent.Load(), "retries": retries.Load(), "handshake": handshake.Load()})
		}})
		os.Exit(0)
	}()
	to := &syscall.SockaddrInet4{Addr: gw4}
	mark(fmt.Sprintf("START %d-byte QUIC v1 Initials without a token (a quic-go ClientHello, X25519), %d distinct DCIDs, at %d/s from random sources of %d.%d.0.0/16",
		f.size(), pool, rate, spoofedNet[0], spoofedNet[1]))
	t0 := time.Now()
	var n int64
	for n < total {
		el := time.Since(t0)
		if el >= dur {
			break
		}
		due := min(total, int64(float64(rate)*el.Seconds())+1)
		for burst := 0; n < due && burst < 2000; burst++ { // a late tick catches up by 2,000 at most
			pkt := slab[int(n%int64(pool))*stride:][:stride]
			pkt[12], pkt[13], pkt[14], pkt[15] = spoofedNet[0], spoofedNet[1], byte(mrand.IntN(256)), byte(1+mrand.IntN(254))
			binary.BigEndian.PutUint16(pkt[20:], uint16(1024+mrand.IntN(64000)))
			binary.BigEndian.PutUint16(pkt[4:], uint16(n))
			if err := syscall.Sendto(sfd, pkt, 0, to); err != nil {
				r.Errors++
			}
			n++
			sent.Store(n)
		}
		time.Sleep(time.Millisecond)
	}
	r.Sent, r.Seconds = n, time.Since(t0).Seconds()
	mark("END")
	r.Retries, r.Handshake = retries.Load(), handshake.Load()
	return r
}

// countAnswers counts, in the background until stop, the datagrams from gw to the spoofed
// sources: Retries (a long header of type 3, first byte 0xf_) and the others (the handshake
// packets of the Initials the gateway took without a Retry). Each count has a raw socket of
// its own whose BPF filter lets only its datagrams through (64 bytes of each), read in
// batches (recvmmsg).
func countAnswers(gw netip.AddrPort, retries, others *atomic.Int64) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for _, c := range closers {
			c()
		}
	}
	for _, retry := range []bool{true, false} {
		n := others
		if retry {
			n = retries
		}
		c, err := countOne(gw, retry, n)
		if err != nil {
			stop()
			return nil, err
		}
		closers = append(closers, c)
	}
	return stop, nil
}

func countOne(gw netip.AddrPort, retry bool, n *atomic.Int64) (stop func(), err error) {
	c, err := net.ListenIP("ip4:udp", &net.IPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, fmt.Errorf("raw UDP socket: %w", err)
	}
	gw4 := gw.Addr().As4()
	const drop = 12
	last := bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xf0, SkipTrue: drop - 11} // a Retry is dropped
	if retry {
		last = bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xf0, SkipFalse: drop - 11} // anything else is
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 4}, // 0: IP source
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: binary.BigEndian.Uint32(gw4[:]), SkipFalse: drop - 2},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // 2: IP destination
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xffff0000},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(spoofedNet[0])<<24 | uint32(spoofedNet[1])<<16, SkipFalse: drop - 5},
		bpf.LoadMemShift{Off: 0},          // 5: X = IP header length
		bpf.LoadIndirect{Off: 0, Size: 2}, // 6: UDP source port
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(gw.Port()), SkipFalse: drop - 8},
		bpf.LoadIndirect{Off: 8, Size: 1}, // 8: the QUIC packet's first byte
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0},
		last,                     // 10
		bpf.RetConstant{Val: 64}, // 11: counted
		bpf.RetConstant{Val: 0},  // 12: dropped
	})
	pc := ipv4.NewPacketConn(c)
	if err == nil {
		err = pc.SetBPF(prog)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the counter's BPF filter: %w", err)
	}
	c.SetReadBuffer(8 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		msgs := make([]ipv4.Message, 64)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, 128)}
		}
		for range 1 << 40 { // ends when the socket closes
			k, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			n.Add(int64(k))
		}
	}()
	return func() { c.Close(); <-done }, nil
}

// dropSink is a UDP socket on the gateway's address whose BPF filter drops every datagram in
// the kernel (as quicguard's filter drops the Initials it sheds): a control target for the
// flood, whose datagrams then cost the host what the kernel spends on them and no process
// anything.
func dropSink() (addr string, closeFn func(), err error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(gatewayIP, 0)))
	if err != nil {
		return "", nil, err
	}
	prog, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: 0}})
	if err == nil {
		err = ipv4.NewPacketConn(c).SetBPF(prog)
	}
	if err != nil {
		c.Close()
		return "", nil, fmt.Errorf("the sink's BPF filter: %w", err)
	}
	return c.LocalAddr().String(), func() { c.Close() }, nil
}
