//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// flood pushes UDP datagrams through a proxy as fast as one sender can and counts what comes
// out, to find the proxy's saturation rate where iperf3's one datagram per system call cannot:
// forward, the client floods the proxy and flood counts at the backend address; -reverse, the
// backend floods the proxy's flow once the client's first datagram reached it, and flood
// counts at the client. Sends and receives use sendmmsg and recvmmsg in batches of 64. It
// prints "sent N received M seconds S".
func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	proxyAddr := fs.String("proxy", "127.0.0.1:16011", "the proxy's UDP listener")
	backendAddr := fs.String("backend", "127.0.0.1:15211", "the address the proxy forwards to; flood binds it")
	size := fs.Int("len", 64, "datagram bytes")
	dur := fs.Duration("dur", 5*time.Second, "how long to send")
	reverse := fs.Bool("reverse", false, "the backend sends, the client receives")
	fs.Parse(args)
	// Sender and receiver each get a thread: with one P the sender, which never blocks on
	// loopback, would starve the receiver between preemptions.
	runtime.GOMAXPROCS(2)

	ba, err := netip.ParseAddrPort(*backendAddr)
	if err != nil {
		return err
	}
	pa, err := netip.ParseAddrPort(*proxyAddr)
	if err != nil {
		return err
	}
	backend, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ba))
	if err != nil {
		return err
	}
	defer backend.Close()
	client, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(pa))
	if err != nil {
		return err
	}
	defer client.Close()
	for _, c := range []*net.UDPConn{backend, client} {
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
	}

	from, to := ipv4.NewPacketConn(client), ipv4.NewPacketConn(backend)
	var dst net.Addr // nil: the client's socket is connected
	if *reverse {
		// The client's datagram opens the proxy's flow; the backend then floods its source.
		peer := make(chan net.Addr, 1)
		go func() {
			buf := make([]byte, 2048)
			_, a, err := backend.ReadFrom(buf)
			if err == nil {
				peer <- a
			}
		}()
		for dst == nil {
			client.Write([]byte("start"))
			select {
			case dst = <-peer:
			case <-time.After(50 * time.Millisecond):
			}
		}
		from, to = to, from
	}

	var received atomic.Int64
	done := make(chan error, 1)
	go func() { done <- count(to, *size, &received) }()
	ms := make([]ipv4.Message, 64)
	payload := make([]byte, *size)
	for i := range ms {
		ms[i].Buffers, ms[i].Addr = [][]byte{payload}, dst
	}
	var sent int64
	start := time.Now()
	for time.Since(start) < *dur {
		n, err := from.WriteBatch(ms, 0)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			// ECONNREFUSED from an ICMP error of an earlier datagram: go on.
			continue
		}
		sent += int64(n)
	}
	secs := time.Since(start).Seconds()
	// What is still on its way arrives within the grace period.
	time.Sleep(300 * time.Millisecond)
	if *reverse {
		client.SetReadDeadline(time.Now())
	} else {
		backend.SetReadDeadline(time.Now())
	}
	<-done
	fmt.Printf("sent %d received %d seconds %.3f\n", sent, received.Load(), secs)
	return nil
}

// count reads datagrams of size bytes from c until its read deadline passes.
func count(c *ipv4.PacketConn, size int, n *atomic.Int64) error {
	ms := make([]ipv4.Message, 64)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, size+1)}
	}
	for {
		k, err := c.ReadBatch(ms, 0)
		if err != nil {
			return err
		}
		for _, m := range ms[:k] {
			if m.N == size {
				n.Add(1)
			}
		}
	}
}
