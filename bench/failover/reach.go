//go:build linux

package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// runReach checks that the first target listed in portsFile answers on host: a TCP connect to
// its tcp port, a TLS handshake on its tls port and an echoed datagram from its udp port. Each
// of these needs packets in both directions, so it also checks the path back to the prober.
func runReach(portsFile string, host netip.Addr) error {
	ps, err := readPorts(portsFile)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return fmt.Errorf("%s lists no targets", portsFile)
	}
	p := ps[0]
	const wait = 2 * time.Second
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(host, p.tcp).String(), wait)
	if err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	c.Close()
	d := &net.Dialer{Timeout: wait}
	tc, err := tls.DialWithDialer(d, "tcp", netip.AddrPortFrom(host, p.tls).String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	tc.Close()
	uc, err := net.Dial("udp", netip.AddrPortFrom(host, p.udp).String())
	if err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	defer uc.Close()
	msg, buf := []byte("reach"), make([]byte, 64)
	uc.SetDeadline(time.Now().Add(wait))
	if _, err := uc.Write(msg); err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	n, err := uc.Read(buf)
	if err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	if !bytes.Equal(buf[:n], msg) {
		return fmt.Errorf("udp: echo %q, sent %q", buf[:n], msg)
	}
	fmt.Printf("reach %v: tcp %d, tls %d, udp %d answer\n", host, p.tcp, p.tls, p.udp)
	return nil
}
