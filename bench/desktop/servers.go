package main

// The long-running processes the benchmarks start (and stop by PID): a gateway, a machine's
// agent, and a desktop server of the builtin desktop's own code on a socket of its own.

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/rig"
	"github.com/frontdoor-vdi/frontdoor/gateway"
	"github.com/frontdoor-vdi/frontdoor/internal/desktop"
	"github.com/frontdoor-vdi/frontdoor/internal/siteid"
)

// gatewayMain serves gateway number -n (0: gw-a on 127.0.81.1) on the display port, relaying
// to the machines vda-N on 127.0.82.N.
func gatewayMain(args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ExitOnError)
	dir := fs.String("dir", "", "site directory")
	n := fs.Int("n", 0, "gateway number: 0 gw-a, 1 gw-b")
	fs.Parse(args)
	s, err := loadSite(*dir)
	if err != nil {
		return err
	}
	name := gatewayNames[*n]
	g, err := gateway.New(gateway.Options{Name: name, Address: gatewayIPs[*n], TCPPorts: []uint16{displayPort}, HealthPort: httpsPort,
		TLS: &tls.Config{Certificates: []tls.Certificate{s.Relay}}, Reissue: s.reissue,
		MachineTLS: s.CA.Party(siteid.RoleGateway, name, []netip.Addr{gatewayIPs[*n]}).ClientTLS(nil),
		Verifier:   s.Verifier(), Sessions: rig.Sessions{}, Machine: machineOf, Logger: discard()}, nil)
	if err != nil {
		return err
	}
	if err := g.Listen(); err != nil {
		return err
	}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	fmt.Printf("READY gateway %s %s GOMAXPROCS=%d\n", name, netip.AddrPortFrom(gatewayIPs[*n], displayPort), runtime.GOMAXPROCS(0))
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	g.Close()
	return <-done
}

// agentMain runs machine vda-N's agent on 127.0.82.N: its display port fronts the builtin
// desktop (-desktop builtin) or a VNC server (-desktop tcp:ADDR or unix:PATH). With
// -straight it also serves the builtin desktop on straightAddr (plain) and straightTLSAddr
// (TLS), in the same process, for viewers and HAProxy that bypass frontdoor.
func agentMain(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	dir := fs.String("dir", "", "site directory")
	n := fs.Int("n", 1, "machine number: vda-N on 127.0.82.N")
	dk := fs.String("desktop", "builtin", "builtin, tcp:ADDR or unix:PATH (a VNC server)")
	straight := fs.Bool("straight", false, "also serve the builtin desktop on "+straightAddr+" and "+straightTLSAddr)
	fs.Parse(args)
	s, err := loadSite(*dir)
	if err != nil {
		return err
	}
	name := machineName(*n)
	cert, err := s.CA.PartyCertificate(siteid.RoleMachine, name, []netip.Addr{machineIP(*n)})
	if err != nil {
		return err
	}
	id, err := agent.NewIdentity(name, cert, s.CA.Pool())
	if err != nil {
		return err
	}
	o := agent.DisplayOptions{Machine: name, Zone: "z1", Address: machineIP(*n), TCPPorts: []uint16{displayPort},
		Verifier: s.Verifier(), Identity: id, Logger: discard()}
	o.Desktop = agent.Desktop{Protocol: "builtin", Port: displayPort}
	if *dk != "builtin" {
		network, addr, ok := strings.Cut(*dk, ":")
		if !ok {
			return fmt.Errorf("-desktop %q: want builtin, tcp:ADDR or unix:PATH", *dk)
		}
		o.Desktop = agent.Desktop{Protocol: "vnc", Network: network, Address: addr, Port: displayPort}
	}
	d, err := agent.NewDisplay(o)
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan error, 1)
	wg.Go(func() { done <- d.Serve(ctx) })
	var lns []net.Listener
	if *straight {
		bd := desktop.New(desktop.Options{})
		info := func() desktop.Info {
			return desktop.Info{Machine: name, Zone: "z1", User: "bench", Session: "straight", Path: "direct"}
		}
		plain, err := net.Listen("tcp", straightAddr)
		if err != nil {
			return err
		}
		tl, err := net.Listen("tcp", straightTLSAddr)
		if err != nil {
			return err
		}
		tc := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: s.CA.Pool()}
		lns = append(lns, plain, tl)
		wg.Go(func() { accept(plain, func(c net.Conn) { bd.Serve(ctx, c, info) }) })
		wg.Go(func() { accept(tl, func(c net.Conn) { bd.Serve(ctx, tls.Server(c, tc), info) }) })
	}
	fmt.Printf("READY agent %s %s desktop %s GOMAXPROCS=%d\n", name, netip.AddrPortFrom(machineIP(*n), displayPort), o.Desktop, runtime.GOMAXPROCS(0))
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	for _, l := range lns {
		l.Close()
	}
	d.Close()
	cancel()
	wg.Wait()
	return nil
}

// desktopMain serves the builtin desktop's code, at a size of -width × -height, on a Unix
// socket (-listen unix:PATH) or TCP (tcp:ADDR): a VNC server an agent fronts.
func desktopMain(args []string) error {
	fs := flag.NewFlagSet("desktop", flag.ExitOnError)
	listen := fs.String("listen", "", "unix:PATH or tcp:ADDR")
	w := fs.Int("width", 256, "framebuffer width")
	h := fs.Int("height", 160, "framebuffer height")
	fs.Parse(args)
	network, addr, ok := strings.Cut(*listen, ":")
	if !ok {
		return fmt.Errorf("-listen %q: want unix:PATH or tcp:ADDR", *listen)
	}
	if network == "unix" {
		os.Remove(addr)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	bd := desktop.New(desktop.Options{Width: *w, Height: *h})
	ctx, cancel := rig.UntilStopped()
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		accept(l, func(c net.Conn) {
			bd.Serve(ctx, c, func() desktop.Info { return desktop.Info{Machine: "vda", User: "bench", Path: "agent"} })
		})
	})
	fmt.Printf("READY desktop %s %dx%d GOMAXPROCS=%d\n", *listen, *w, *h, runtime.GOMAXPROCS(0))
	<-ctx.Done()
	l.Close()
	wg.Wait()
	return nil
}

// maxOps bounds the servers' loops in count (the process lifetime bounds them in time).
const maxOps = 1 << 40

// accept serves every connection of l in a goroutine of its own until l closes; serve
// closes its connection.
func accept(l net.Listener, serve func(net.Conn)) {
	for range maxOps {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors: let some close
			continue
		}
		go serve(c)
	}
}
