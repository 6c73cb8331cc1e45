package main

// The UDP load: one flow through a relay to an echo, with a fixed window of datagrams in
// flight. The flow is one of:
//
//   - fd-quic: frontdoor's client package (client.Open with a gateway-mode descriptor whose
//     gateway has a QUIC port; Session.WriteDatagram and ReadDatagram): the client's
//     datagrams ride QUIC DATAGRAM frames to the gateway's QUIC end, which relays them on a
//     QUIC connection of its own to the agent's UDP display port, which echoes;
//   - fd-quic-raw: the same path, the client's side spoken directly with quic-go (the
//     wire format of package ticket: a stream with the kind, the port and the ticket frame,
//     then DATAGRAM frames, each prefixed with the port), without the client package's
//     per-datagram channel hops;
//   - fd-plain: the client package to a gateway without a QUIC port: plain UDP to the
//     gateway's UDP port (PlainUDP), the first datagram ticket.Datagram, answered with
//     ticket.UDPReady; the gateway's leg to the machine is QUIC;
//   - nginx: plain UDP to nginx's stream proxy, which forwards to the backend's plain echo.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/quic-go/quic-go"
)

// link is a flow's client end.
type link interface {
	send(b []byte) error
	recv(b []byte) (int, error)
	close()
}

// sessionLink is a client.Session's UDP channel.
type sessionLink struct {
	s      *client.Session
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *sessionLink) send(b []byte) error { return l.s.WriteDatagram(udpPort, b) }
func (l *sessionLink) recv(b []byte) (int, error) {
	m, err := l.s.ReadDatagram(l.ctx, udpPort)
	if err != nil {
		return 0, err
	}
	return copy(b, m), nil
}
func (l *sessionLink) close() { l.cancel(); l.s.Close() }

// openSession opens session s-1's UDP channel with the client package, through the gateway's
// QUIC end (withQUIC) or its plain UDP port; it returns how the client went.
func openSession(s *site, withQUIC bool) (link, string, error) {
	ch := ticket.Channel{Port: udpPort, Proto: "udp"}
	lt, err := s.issue(ticket.Launch, ch)
	if err != nil {
		return nil, "", err
	}
	rt, err := s.issue(ticket.Reconnect, ch)
	if err != nil {
		return nil, "", err
	}
	gw := client.GatewayEndpoint{Name: gatewayName, Zone: "bench", Addresses: []netip.Addr{gatewayIP}}
	if withQUIC {
		gw.QUICPort = quicPort
	}
	chans := []client.Channel{{Port: udpPort, Proto: "udp"}}
	d := &client.Descriptor{SessionID: sessionID, Mode: client.ModeGateway, Machine: machineName, Zone: "bench",
		Channels: chans, Gateways: []client.GatewayEndpoint{gw}, LaunchTicket: lt, ReconnectTicket: rt}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := client.Open(ctx, client.Options{Descriptor: d, RootCAs: s.CA.Pool(), Channels: chans,
		DialTimeout: 2 * time.Second, KeepaliveTimeout: 5 * time.Second, Logger: discard()})
	if err != nil {
		return nil, "", err
	}
	name, addr := sess.Via()
	rctx, rcancel := context.WithCancel(context.Background())
	return &sessionLink{s: sess, ctx: rctx, cancel: rcancel}, name + " " + addr, nil
}

// quicLink is the client's side of the QUIC end spoken directly.
type quicLink struct {
	c   *quic.Conn
	st  *quic.Stream
	out []byte // the datagram being sent, port first (SendDatagram copies it)
	ctx context.Context
	end context.CancelFunc
}

func (l *quicLink) send(b []byte) error {
	l.out = append(l.out[:2], b...)
	return l.c.SendDatagram(l.out)
}

func (l *quicLink) recv(b []byte) (int, error) {
	for range 1 << 20 { // frames of another port (none here) are skipped, a bounded number of them
		m, err := l.c.ReceiveDatagram(l.ctx)
		if err != nil {
			return 0, err
		}
		if len(m) >= 2 && binary.BigEndian.Uint16(m) == udpPort {
			return copy(b, m[2:]), nil
		}
	}
	return 0, errors.New("no datagram of the channel")
}

func (l *quicLink) close() {
	l.end()
	l.st.CancelRead(0)
	l.st.Close()
	l.c.CloseWithError(0, "")
}

// openQUIC opens the UDP channel on the gateway's QUIC end with quic-go alone.
func openQUIC(s *site) (link, string, error) {
	tok, err := s.issue(ticket.Launch, ticket.Channel{Port: udpPort, Proto: "udp"})
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := &tls.Config{RootCAs: s.CA.Pool(), ServerName: gatewayIP.String(), NextProtos: []string{ticket.QUICALPN}, MinVersion: tls.VersionTLS13}
	c, err := quic.DialAddr(ctx, netip.AddrPortFrom(gatewayIP, quicPort).String(), tc,
		&quic.Config{EnableDatagrams: true, KeepAlivePeriod: time.Second, MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		return nil, "", err
	}
	fail := func(err error) (link, string, error) {
		c.CloseWithError(0, "")
		return nil, "", err
	}
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		return fail(err)
	}
	dl, _ := ctx.Deadline()
	st.SetDeadline(dl)
	if _, err := st.Write([]byte{ticket.QUICKindUDP, byte(udpPort >> 8), byte(udpPort & 0xff)}); err != nil {
		return fail(err)
	}
	if err := ticket.WriteFrame(st, tok); err != nil {
		return fail(err)
	}
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		return fail(err)
	}
	switch status[0] {
	case ticket.StatusOK:
	case ticket.StatusRotated: // a gateway that rotates reconnect tickets: the next one follows
		if _, err := ticket.ReadFrame(st); err != nil {
			return fail(err)
		}
	default:
		return fail(errors.New("the gateway refused the ticket"))
	}
	st.SetDeadline(time.Time{})
	rctx, end := context.WithCancel(context.Background())
	out := make([]byte, 2, 2048)
	binary.BigEndian.PutUint16(out, udpPort)
	return &quicLink{c: c, st: st, out: out, ctx: rctx, end: end}, "quic-go " + c.RemoteAddr().String(), nil
}

// udpLink is a connected UDP socket (to nginx).
type udpLink struct{ c *net.UDPConn }

func (l udpLink) send(b []byte) error        { _, err := l.c.Write(b); return err }
func (l udpLink) recv(b []byte) (int, error) { return l.c.Read(b) }
func (l udpLink) close()                     { l.c.Close() }

func openUDP(addr string) (link, string, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, "", err
	}
	c, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, "", err
	}
	_ = c.SetReadBuffer(4 << 20)
	_ = c.SetWriteBuffer(4 << 20)
	return udpLink{c}, "udp " + addr, nil
}

// echoResult is one UDP row's load-side measurement.
type echoResult struct {
	Echoed  int64   // replies received inside the window
	Sent    int64   // datagrams sent inside the window
	Lost    int64   // of those, never answered (timed out or outstanding at the end)
	Seconds float64 // the window
	P50us   float64 // round trip of the replies in the window
	P99us   float64
	Err     string
}

// runEcho keeps window datagrams of size bytes in flight over l: warm-up, then the measured
// window (start and end are called at its edges, where the relay's CPU is read), then a
// bounded drain. A datagram unanswered after lossAfter counts as lost and frees its place.
func runEcho(l link, size, window int, warm, dur time.Duration, start, end func()) echoResult {
	const lossAfter = 300 * time.Millisecond
	const maxSends = 50_000_000
	size = max(size, 16)
	type flight struct {
		at       int64 // send time, ns since t0
		measured bool
	}
	var (
		mu       sync.Mutex
		inflight = make(map[uint64]flight, window*2)
		measure  bool // sends are inside the window
		counting bool // replies are inside the window
		res      echoResult
		rtts     = make([]int64, 0, 1<<20)
	)
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	t0 := time.Now()
	now := func() int64 { return int64(time.Since(t0)) }
	stop := make(chan struct{})
	recvDone := make(chan struct{})

	go func() { // receiver
		defer close(recvDone)
		buf := make([]byte, 2048)
		for range maxSends {
			n, err := l.recv(buf)
			if err != nil {
				return
			}
			if n < 16 {
				continue
			}
			seq := binary.LittleEndian.Uint64(buf)
			mu.Lock()
			f, ok := inflight[seq]
			if ok {
				delete(inflight, seq)
				if counting {
					res.Echoed++
					if len(rtts) < cap(rtts) {
						rtts = append(rtts, now()-f.at)
					}
				}
			}
			mu.Unlock()
			if ok {
				tokens <- struct{}{}
			}
		}
	}()
	go func() { // reaper: frees the places of datagrams that never came back
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			mu.Lock()
			cut, freed := now()-int64(lossAfter), 0
			for seq, f := range inflight {
				if f.at < cut {
					delete(inflight, seq)
					if f.measured {
						res.Lost++
					}
					freed++
				}
			}
			mu.Unlock()
			for range freed {
				tokens <- struct{}{}
			}
		}
	}()

	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	var seq uint64
	phaseEnd := t0.Add(warm)
	phase := 0 // 0 warm-up, 1 measured
	var tw time.Time
	var sendErr error
	for range maxSends {
		t := time.Now()
		if t.After(phaseEnd) {
			if phase == 1 {
				break
			}
			phase = 1
			start()
			mu.Lock()
			measure, counting = true, true
			mu.Unlock()
			tw = time.Now()
			phaseEnd = tw.Add(dur)
		}
		select {
		case <-tokens:
		default:
			select {
			case <-tokens:
			case <-time.After(lossAfter):
				continue
			}
		}
		seq++
		binary.LittleEndian.PutUint64(buf, seq) // below 50M: never starts "FDT1" or "FDKA"
		mu.Lock()
		inflight[seq] = flight{at: now(), measured: measure}
		if measure {
			res.Sent++
		}
		mu.Unlock()
		if err := l.send(buf); err != nil && sendErr == nil {
			sendErr = err
		}
	}
	mu.Lock()
	counting, measure = false, false
	mu.Unlock()
	end()
	res.Seconds = time.Since(tw).Seconds()
	// Drain: the datagrams still in flight get lossAfter to come back (not counted as echoed,
	// but not lost either).
	deadline := time.Now().Add(lossAfter + 50*time.Millisecond)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := 0
		for _, f := range inflight {
			if f.measured {
				n++
			}
		}
		mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	mu.Lock()
	for _, f := range inflight {
		if f.measured {
			res.Lost++
		}
	}
	mu.Unlock()
	l.close()
	select {
	case <-recvDone:
	case <-time.After(time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(rtts)
	if len(rtts) > 0 {
		res.P50us = float64(rtts[len(rtts)/2]) / 1e3
		res.P99us = float64(rtts[len(rtts)*99/100]) / 1e3
	}
	if sendErr != nil {
		res.Err = sendErr.Error()
	}
	return res
}

// checkEcho sends one datagram over l, a few times, until it comes back (a target's
// readiness check before the rounds).
func checkEcho(l link) error {
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = 0xa5
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		for range 1000 {
			n, err := l.recv(buf)
			if err != nil {
				got <- err
				return
			}
			if n == len(msg) && buf[0] == 0xa5 {
				got <- nil
				return
			}
		}
		got <- errors.New("no echo")
	}()
	for range 50 {
		if err := l.send(msg); err != nil {
			return err
		}
		select {
		case err := <-got:
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("no echo within 10s")
}
