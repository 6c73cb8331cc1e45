//go:build linux

// Command proxy is the benchmark helper of bench/proxy.sh. It runs frontdoor's L4 proxy from
// command-line routes, or one of three load tools: "hold" opens N idle connections and keeps
// them, "sink" accepts connections and keeps them, "flood" pushes UDP datagrams through a
// proxy as fast as it can, either way, and counts what arrives.
//
//	proxy serve -tcp 127.0.0.1:16001=127.0.0.1:15201 -udp 127.0.0.1:16003=127.0.0.1:15201
//	proxy sink -listen 127.0.0.1:19000
//	proxy hold -connect 127.0.0.1:16009 -n 9900
//	proxy flood -proxy 127.0.0.1:16011 -backend 127.0.0.1:15211 -len 64 -dur 5s [-reverse]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/proxy"
)

type routes []string

func (r *routes) String() string     { return strings.Join(*r, ",") }
func (r *routes) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxy serve|sink|hold|flood [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "sink":
		err = sink(os.Args[2:])
	case "hold":
		err = hold(os.Args[2:])
	case "flood":
		err = flood(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		os.Exit(1)
	}
}

// serve runs the proxy with one listener and one single-backend pool per route.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	var tcp, tcpNoHC, udp routes
	fs.Var(&tcp, "tcp", "listen=backend for TCP (repeatable)")
	fs.Var(&tcpNoHC, "tcp-no-half-close", "listen=backend for TCP with half_close: false (repeatable)")
	fs.Var(&udp, "udp", "listen=backend for UDP (repeatable)")
	verbose := fs.Bool("v", false, "write the access log to stderr")
	deferAccept := fs.Bool("defer-accept", false, "accept TCP connections once the client has sent bytes (defer_accept)")
	blocking := fs.Bool("blocking-udp", true, "serve UDP listeners with blocking workers, a P added for each (as frontdoor serve does)")
	coalesce := fs.Duration("udp-coalesce", configs.DefaultUDPCoalesce, "the UDP listeners' udp_coalesce (frontdoor's default)")
	fs.Parse(args)
	var cfg proxy.Config
	add := func(proto string, r string, noHalfClose bool) error {
		l, b, ok := strings.Cut(r, "=")
		la, err1 := netip.ParseAddrPort(l)
		ba, err2 := netip.ParseAddrPort(b)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("bad route %q (want ip:port=ip:port)", r)
		}
		name := fmt.Sprintf("%s-%d", proto, len(cfg.Listeners))
		cfg.Listeners = append(cfg.Listeners, proxy.Listener{Name: name, Address: la, Protocol: proto, Pool: name,
			IdleTimeout: 10 * time.Minute, UDPCoalesce: *coalesce, NoHalfClose: noHalfClose,
			DeferAccept: *deferAccept && proto == proxy.TCP})
		cfg.Pools = append(cfg.Pools, proxy.Pool{Name: name, Backends: []proxy.Backend{{Address: ba}}})
		return nil
	}
	for _, r := range tcp {
		if err := add(proxy.TCP, r, false); err != nil {
			return err
		}
	}
	for _, r := range tcpNoHC {
		if err := add(proxy.TCP, r, true); err != nil {
			return err
		}
	}
	for _, r := range udp {
		if err := add(proxy.UDP, r, false); err != nil {
			return err
		}
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if *blocking && len(udp) > 0 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + proxy.UDPWorkers*len(udp))
	}
	s, err := proxy.New(cfg, proxy.Options{Logger: log, BlockingUDP: *blocking})
	if err != nil {
		return err
	}
	if err := s.Listen(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for range usr1 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Fprintf(os.Stderr, "memstats heap_inuse=%d stack_inuse=%d sys=%d goroutines=%d\n",
				m.HeapInuse, m.StackInuse, m.Sys, runtime.NumGoroutine())
			if p := os.Getenv("FRONTDOOR_HEAP_PROFILE"); p != "" {
				if f, err := os.Create(p); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
	if p := os.Getenv("FRONTDOOR_CPU_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	fmt.Fprintln(os.Stderr, "ready")
	return s.Serve(ctx)
}

// sink accepts connections and reads them until they close.
func sink(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:19000", "address to accept on")
	fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

// hold opens n connections, sends one byte on each, and keeps them open until stdin closes
// or SIGTERM.
func hold(args []string) error {
	fs := flag.NewFlagSet("hold", flag.ExitOnError)
	connect := fs.String("connect", "127.0.0.1:16009", "address to connect to")
	n := fs.Int("n", 9900, "connections")
	fs.Parse(args)
	conns := make([]net.Conn, 0, *n)
	for i := range *n {
		var c net.Conn
		var err error
		for attempt := range 20 {
			c, err = net.DialTimeout("tcp", *connect, 5*time.Second)
			if err == nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		c.Write([]byte{'x'})
		conns = append(conns, c)
	}
	fmt.Fprintf(os.Stderr, "holding %d\n", len(conns))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	for _, c := range conns {
		c.Close()
	}
	return nil
}
