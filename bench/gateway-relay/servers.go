package main

// The long-running processes the script starts by hand (and stops by PID): frontdoor's relay
// (a gateway.Gateway with a TLS channel port and a plain UDP port, and a gateway.QUIC end, in
// one process as a node runs them), the machine (agent.Display's UDP display port, which
// echoes, and a TLS sink that speaks the agent's TCP channel protocol), and the peers'
// backend (a plain UDP echo, a plain TCP sink and a mutual-TLS sink).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // the relay's -pprof
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// runGateway serves frontdoor's relay on 127.0.50.1: TLS channels on tcpPort, plain UDP
// flows on udpPort (PlainUDP) and the QUIC end on quicPort, all to vda-1 on 127.0.60.1.
func runGateway(dir, pprofAddr string) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	v := s.Verifier()
	machine := func(n string) (netip.Addr, bool) { return machineIP, n == machineName }
	tc := &tls.Config{Certificates: []tls.Certificate{s.Relay}}
	toMachine := s.CA.Party(siteid.RoleGateway, gatewayName, []netip.Addr{gatewayIP}).ClientTLS(nil)
	g, err := gateway.New(gateway.Options{Name: gatewayName, Address: gatewayIP, TCPPorts: []uint16{tcpPort},
		UDPPorts: []uint16{udpPort}, PlainUDP: true, TLS: tc, MachineTLS: toMachine, Verifier: v, Sessions: rig.Sessions{},
		Machine: machine, Logger: discard()}, nil)
	if err != nil {
		return err
	}
	if err := g.Listen(); err != nil {
		return err
	}
	q, err := gateway.ListenQUIC(gateway.QUICOptions{Name: gatewayName, Sessions: rig.Sessions{},
		Address: netip.AddrPortFrom(gatewayIP, quicPort).String(), TLS: tc, Verifier: v, Machine: machine,
		MachineTLS: toMachine, Logger: discard()})
	if err != nil {
		g.Close()
		return err
	}
	if pprofAddr != "" {
		srv := &http.Server{Addr: pprofAddr, ReadHeaderTimeout: 5 * time.Second}
		go srv.ListenAndServe()
	}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { g.Serve(ctx) })
	wg.Go(func() { q.Serve(ctx) })
	fmt.Printf("READY gateway tls %s udp %s quic %s GOMAXPROCS=%d\n", netip.AddrPortFrom(gatewayIP, tcpPort),
		netip.AddrPortFrom(gatewayIP, udpPort), q.Addr(), gomaxprocs())
	<-ctx.Done()
	g.Close()
	q.Close()
	wg.Wait()
	return nil
}

// runMachine runs vda-1 on 127.0.60.1: the agent's display simulator on udpPort (QUIC, echo)
// and, on tcpPort, a sink that takes a gateway's TLS channel as the agent does (TLS 1.3 with
// the machine's certificate, a gateway's certificate, the ticket frame, StatusOK), then reads
// and drops what comes.
func runMachine(dir string) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	cert, err := s.CA.PartyCertificate(siteid.RoleMachine, machineName, []netip.Addr{machineIP})
	if err != nil {
		return err
	}
	id, err := agent.NewIdentity(machineName, cert, s.CA.Pool())
	if err != nil {
		return err
	}
	v := s.Verifier()
	d, err := agent.NewDisplay(agent.DisplayOptions{Machine: machineName, Address: machineIP, UDPPorts: []uint16{udpPort},
		Verifier: v, Identity: id, Logger: discard()})
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(machineIP, tcpPort).String())
	if err != nil {
		d.Close()
		return err
	}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { d.Serve(ctx) })
	wg.Go(func() {
		accept(l, func(c net.Conn) { machineSink(tls.Server(c, id.ServerTLS()), v) })
	})
	fmt.Printf("READY machine udp %s tcp %s GOMAXPROCS=%d\n", netip.AddrPortFrom(machineIP, udpPort), l.Addr(), gomaxprocs())
	<-ctx.Done()
	l.Close()
	d.Close()
	wg.Wait()
	return nil
}

// machineSink is the machine's end of one TLS channel: as agent.handleTCP, but it drops the
// channel's bytes instead of echoing them.
func machineSink(c *tls.Conn, v *ticket.Verifier) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		return
	}
	tok, err := ticket.ReadFrame(c)
	if err != nil {
		return
	}
	ch := ticket.Channel{Port: tcpPort, Proto: "tcp"}
	if _, err := v.Check(tok, machineName, ch); err != nil || !fromGateway(c.ConnectionState()) {
		c.Write([]byte{ticket.StatusDenied})
		return
	}
	if _, err := c.Write([]byte{ticket.StatusOK}); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	drain(c)
}

// fromGateway reports whether the peer presented a gateway's certificate of the site CA.
func fromGateway(st tls.ConnectionState) bool {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return false
	}
	role, _, ok := siteid.Of(st.VerifiedChains[0][0])
	return ok && role == siteid.RoleGateway
}

// runBackend serves the peers' backend on loopback: a plain UDP echo on udpAddr (nginx's
// upstream), a plain TCP sink on tcpAddr (HAProxy's upstream when it terminates TLS) and a TLS
// 1.3 sink on tlsAddr that requires a client certificate of the site CA (HAProxy's upstream
// when it re-encrypts, as frontdoor's gateway does to the machine).
func runBackend(dir, udpAddr, tcpAddr, tlsAddr string) error {
	s, err := loadSite(dir)
	if err != nil {
		return err
	}
	ua, err := net.ResolveUDPAddr("udp", udpAddr)
	if err != nil {
		return err
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return err
	}
	_ = uc.SetReadBuffer(4 << 20)
	_ = uc.SetWriteBuffer(4 << 20)
	tl, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		return err
	}
	sl, err := net.Listen("tcp", tlsAddr)
	if err != nil {
		return err
	}
	cert, err := s.CA.PartyCertificate(siteid.RoleMachine, "backend", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		return err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: s.CA.Pool()}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { echoUDP(uc) })
	wg.Go(func() { accept(tl, func(c net.Conn) { defer c.Close(); drain(c) }) })
	wg.Go(func() {
		accept(sl, func(c net.Conn) {
			t := tls.Server(c, tc)
			defer t.Close()
			t.SetDeadline(time.Now().Add(5 * time.Second))
			if t.Handshake() != nil {
				return
			}
			t.SetDeadline(time.Time{})
			drain(t)
		})
	})
	fmt.Printf("READY backend udp echo %s tcp sink %s tls sink %s GOMAXPROCS=%d\n", uc.LocalAddr(), tl.Addr(), sl.Addr(), gomaxprocs())
	<-ctx.Done()
	uc.Close()
	tl.Close()
	sl.Close()
	wg.Wait()
	return nil
}

// maxOps bounds the loops of the servers in count (the process lifetime bounds them in time).
const maxOps = 1 << 40

// echoUDP echoes every datagram to its sender until the socket closes.
func echoUDP(c *net.UDPConn) {
	buf := make([]byte, 64<<10)
	for i := 0; i < maxOps; i++ {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c.WriteToUDPAddrPort(buf[:n], from)
	}
}

// accept serves every connection of l in a goroutine of its own until l closes (it does not
// wait for them: the process ends with its listeners).
func accept(l net.Listener, serve func(net.Conn)) {
	for i := 0; i < maxOps; i++ {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}

// drain reads r until it ends.
func drain(r io.Reader) {
	buf := make([]byte, 64<<10)
	for i := 0; i < maxOps; i++ {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway-relay:", err)
		os.Exit(1)
	}
}
