//go:build linux

package main

// The flood: what a forged first datagram costs a server before it is dropped. The flood
// process captures the first datagram a real client of the protocol sends (a DTLS ClientHello
// without cookie, a QUIC Initial without token, or for plain UDP a 64-byte datagram) and sends
// it N times through a raw socket, each time from another spoofed source in 127.200.0.0/16,
// so every one looks like a new client that cannot see the answer. A second raw socket counts
// the server's answers (HelloVerifyRequest, Retry, echo) to those sources.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/frontdoor-vdi/frontdoor/bench/internal/capture"
	"github.com/frontdoor-vdi/frontdoor/bench/internal/kernel"
	"github.com/pion/dtls/v3"
	"github.com/quic-go/quic-go"
)

// firstDatagram is the first datagram a client of proto sends to addr.
func firstDatagram(proto string, ra *net.UDPAddr, c *certs) ([]byte, error) {
	cc := capture.New(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000})
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	switch proto {
	case "plain":
		return make([]byte, 64), nil
	case "dtls", "dtls-sl":
		dc, err := dtls.ClientWithOptions(cc, ra, dtlsClientOptions(c)...)
		if err != nil {
			return nil, err
		}
		go dc.HandshakeContext(ctx)
		defer dc.Close()
	case "quic":
		tr := &quic.Transport{Conn: cc}
		defer func() { cc.Close(); tr.Close() }() // Close waits for the read loop
		go tr.Dial(ctx, ra, quicClientTLS(c, false), quicConfig())
	default:
		return nil, fmt.Errorf("unknown proto %q", proto)
	}
	select {
	case b := <-cc.First():
		return b, nil
	case <-ctx.Done():
		return nil, errors.New("no first datagram")
	}
}

type floodResult struct {
	Sent    int64   `json:"sent"`
	Replies int64   `json:"replies"`
	Seconds float64 `json:"seconds"`
	Bytes   int     `json:"bytes"` // size of the forged datagram
	Err     string  `json:"err,omitempty"`
}

// runFlood sends n forged first datagrams at rate per second, marks START/END around the
// sending and SETTLED after settle more, counting the server's answers the whole time.
func runFlood(proto, addr string, c *certs, n, rate int, settle time.Duration) floodResult {
	var r floodResult
	ra, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	payload, err := firstDatagram(proto, ra, c)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Bytes = len(payload)
	sfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
	if err != nil {
		r.Err = "raw socket (needs root): " + err.Error()
		return r
	}
	defer syscall.Close(sfd)
	rfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_UDP)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	syscall.SetsockoptInt(rfd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 32<<20)
	syscall.SetsockoptTimeval(rfd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Usec: 100_000})
	var replies atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	sport := uint16(ra.Port)
	go func() { // counts answers from the server's port to the spoofed sources
		defer close(done)
		buf := make([]byte, 65536)
		for !stop.Load() {
			m, _, err := syscall.Recvfrom(rfd, buf, 0)
			if err != nil || m < 28 {
				continue
			}
			ihl := int(buf[0]&0x0f) * 4
			if m < ihl+8 || buf[16] != 127 || buf[17] != 200 {
				continue
			}
			if binary.BigEndian.Uint16(buf[ihl:]) == sport {
				replies.Add(1)
			}
		}
	}()

	pkt := make([]byte, 28+len(payload))
	ip, udp := pkt[:20], pkt[20:28]
	ip[0], ip[8], ip[9] = 0x45, 64, syscall.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(pkt)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	copy(ip[16:20], ra.IP.To4())
	binary.BigEndian.PutUint16(udp[2:], sport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(pkt[28:], payload)
	to := &syscall.SockaddrInet4{Port: 0, Addr: [4]byte(ra.IP.To4())}

	const batch = 10
	interval := time.Duration(float64(time.Second) * batch / float64(rate))
	mark("START")
	t0 := time.Now()
	limit := t0.Add(time.Duration(float64(time.Second)*float64(n)/float64(rate)) + 10*time.Second)
	next := t0
	for r.Sent < int64(n) && time.Now().Before(limit) {
		for i := 0; i < batch && r.Sent < int64(n); i++ {
			ip[12], ip[13], ip[14], ip[15] = 127, 200, byte(mrand.IntN(256)), byte(1+mrand.IntN(254))
			binary.BigEndian.PutUint16(udp[0:], uint16(1024+mrand.IntN(64000)))
			binary.BigEndian.PutUint16(ip[4:], uint16(r.Sent))
			if err := syscall.Sendto(sfd, pkt, 0, to); err != nil {
				if r.Err == "" {
					r.Err = err.Error()
				}
				continue
			}
			r.Sent++
		}
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	r.Seconds = time.Since(t0).Seconds()
	mark("END")
	time.Sleep(settle)
	mark("SETTLED")
	stop.Store(true)
	<-done
	syscall.Close(rfd)
	r.Replies = replies.Load()
	return r
}

// statelessHVR answers every DTLS ClientHello without a cookie with a HelloVerifyRequest whose
// cookie is HMAC-SHA256(secret, client address, ClientHello without cookie), keeping no state,
// and checks the cookie of every ClientHello that has one (RFC 6347 4.2.1). This is the work a
// stateless front of a DTLS server must do per forged ClientHello. It cannot hand the verified
// ClientHello on to pion/dtls v3: pion keeps its own random cookie per remote address and
// starts every server handshake at message_seq 0.
func statelessHVR(uc *net.UDPConn) error {
	secret := make([]byte, 32)
	rand.Read(secret)
	mac := hmac.New(sha256.New, secret)
	buf := make([]byte, 2048)
	out := make([]byte, 0, 64)
	var sum [sha256.Size]byte
	for {
		n, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		b := buf[:n]
		// record header: type(1) version(2) epoch(2) seq(6) length(2); handshake header:
		// type(1) length(3) message_seq(2) fragment_offset(3) fragment_length(3).
		if len(b) < 13+12+2+32+2 || b[0] != 22 || b[3] != 0 || b[4] != 0 || b[13] != 1 {
			continue
		}
		rl := int(binary.BigEndian.Uint16(b[11:]))
		if 13+rl > len(b) {
			continue
		}
		body := b[25 : 13+rl]
		sidEnd := 2 + 32 + 1 + int(body[34])
		if sidEnd >= len(body) {
			continue
		}
		cookieEnd := sidEnd + 1 + int(body[sidEnd])
		if cookieEnd > len(body) {
			continue
		}
		mac.Reset()
		a := from.Addr().As16()
		mac.Write(a[:])
		var p [2]byte
		binary.BigEndian.PutUint16(p[:], from.Port())
		mac.Write(p[:])
		mac.Write(body[:sidEnd])
		mac.Write(body[cookieEnd:])
		cookie := mac.Sum(sum[:0])[:20]
		if cookieEnd > sidEnd+1 {
			_ = hmac.Equal(cookie, body[sidEnd+1:cookieEnd]) // a real server hands a match on
			continue
		}
		out = out[:0]
		out = append(out, 22, 0xfe, 0xfd)
		out = append(out, b[3:11]...) // epoch 0 and the ClientHello's record sequence number
		out = binary.BigEndian.AppendUint16(out, 12+3+20)
		out = append(out, 3, 0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 23) // hello_verify_request, seq 0
		out = append(out, 0xfe, 0xff, 20)
		out = append(out, cookie...)
		uc.WriteToUDPAddrPort(out, from)
	}
}

// udpDrops: datagrams dropped so far at the full receive queue of the UDP sockets bound to
// port (the last column of /proc/net/udp).
func udpDrops(port int) int64 {
	return kernel.UDPDrops(func(a netip.AddrPort) bool { return int(a.Port()) == port })
}
