package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/internal/rfb"
)

// capture records every packet on the loopback interface (an AF_PACKET socket, which needs
// CAP_NET_RAW) until stop, at most maxCapture bytes.
type capture struct {
	fd   int
	done chan struct{}

	mu      sync.Mutex
	packets [][]byte
	size    int
}

const maxCapture = 1 << 30

func startCapture(t *testing.T) *capture {
	t.Helper()
	proto := int(htons(syscall.ETH_P_ALL))
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, proto)
	if err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("capturing on loopback needs CAP_NET_RAW (root): %v", err)
		}
		t.Fatalf("capture socket: %v", err)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: lo.Index}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<20)
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	c := &capture{fd: fd, done: make(chan struct{})}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 1<<16+64)
		for {
			select {
			case <-c.done:
				return
			default:
			}
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil || n <= 0 {
				continue // the receive timeout, to look at done
			}
			c.mu.Lock()
			if c.size < maxCapture {
				c.packets = append(c.packets, bytes.Clone(buf[:n]))
				c.size += n
			}
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.stop(); <-stopped; syscall.Close(fd) })
	return c
}

func (c *capture) stop() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// find returns how many packets hold needle.
func (c *capture) find(needle []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.packets {
		if bytes.Contains(p, needle) {
			n++
		}
	}
	return n
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// marker is a random string that appears nowhere unless a test sends it.
func marker(t *testing.T, what string) []byte {
	b := make([]byte, 12)
	rand.Read(b)
	return []byte(what + "-" + hex.EncodeToString(b))
}

// pushThrough sends a marker through the session's TCP channel 8443 and UDP channel 4172 and
// reads each back from the machine's echo; it returns the markers.
func pushThrough(ctx context.Context, t *testing.T, s *client.Session, what string) [][]byte {
	t.Helper()
	tcp, udp := marker(t, what+"-tcp"), marker(t, what+"-udp")
	c, err := s.Attach(ctx, 8443)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The marker rides to the desktop as a viewer's clipboard text; the update asked for
	// after it comes back only once the desktop has read past it.
	v, err := rfb.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CutText(string(tcp)); err != nil {
		t.Fatal(err)
	}
	if err := v.RequestAll(false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ReadMessage(); err != nil {
		t.Fatalf("the desktop did not answer after the TCP marker: %v", err)
	}
	for try := 0; ; try++ {
		if try == 20 {
			t.Fatal("the UDP marker did not come back")
		}
		if err := s.WriteDatagram(4172, udp); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		b, err := s.ReadDatagram(rctx, 4172)
		cancel()
		if err == nil && bytes.Equal(b, udp) {
			break
		}
	}
	return [][]byte{tcp, udp}
}

// TestNoTicketAndNoUserByteOnTheWire captures the loopback interface while sessions run
// through the lab in gateway mode (over a reconnect through another gateway) and in direct
// mode, and finds neither a ticket nor any of the bytes the user sent through the tunnel in
// any packet. The lab's DNS name, which DNS carries in the clear, must be found: the capture
// saw the traffic.
func TestNoTicketAndNoUserByteOnTheWire(t *testing.T) {
	l, _ := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	capt := startCapture(t)
	launcher := func(user string) *client.Launcher {
		return &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.41.0.1:5353", User: user, Password: "lab",
			Resource: "desktop", Endpoint: user + "-laptop", RootCAs: l.CA().Pool()}
	}
	var secrets [][]byte
	keep := func(d *client.Descriptor) {
		for _, tok := range []string{d.LaunchTicket, d.ReconnectTicket} {
			if tok == "" {
				continue
			}
			secrets = append(secrets, []byte(tok))
			if m := len(tok) / 2; m > 12 {
				secrets = append(secrets, []byte(tok[m-12:m+12])) // a piece of it, where a frame split it
			}
		}
	}

	// Gateway mode: the launch ticket opens the channels, the reconnect ticket reopens them
	// through another gateway once the first one's node is killed.
	s, desc, _, events := openSession(ctx, t, l, launcher("alice"), client.Options{})
	if desc.Mode != client.ModeGateway {
		t.Fatalf("mode %s, want gateway", desc.Mode)
	}
	keep(desc)
	secrets = append(secrets, pushThrough(ctx, t, s, "gateway")...)
	via, _ := s.Via()
	if err := l.Signal(nodeOf(t, l, via), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if back := waitEvent(t, events, client.EventBack, 20*time.Second); back.Ticket != "reconnect" {
		t.Fatalf("back with the %s ticket, want the reconnect ticket", back.Ticket)
	}
	secrets = append(secrets, pushThrough(ctx, t, s, "reconnected")...)
	rotated := s.Descriptor() // the reconnect ticket the gateways handed out last
	if rotated.ReconnectTicket == desc.ReconnectTicket {
		t.Fatal("the gateways did not rotate the reconnect ticket")
	}
	keep(&rotated)

	// Direct mode.
	if err := adminAPI(t, l).SecureGateway(ctx, "", false); err != nil {
		t.Fatalf("toggle: %v", err)
	}
	s2, d2, _, _ := openSession(ctx, t, l, launcher("dave"), client.Options{})
	if d2.Mode != client.ModeDirect {
		t.Fatalf("mode %s after the toggle, want direct", d2.Mode)
	}
	keep(d2)
	secrets = append(secrets, pushThrough(ctx, t, s2, "direct")...)
	s.Close()
	s2.Close()
	time.Sleep(200 * time.Millisecond) // the last packets reach the capture
	capt.stop()

	if n := capt.find([]byte("\x07desktop\x03vdi\x03lab\x04test")); n == 0 {
		t.Fatal("the capture holds no DNS query for desktop.vdi.lab.test: it saw nothing")
	}
	for _, sec := range secrets {
		if n := capt.find(sec); n > 0 {
			t.Errorf("%d captured packets hold %q", n, sec)
		}
	}
	t.Logf("%d packets captured; %d secrets looked for", len(capt.packets), len(secrets))
}
