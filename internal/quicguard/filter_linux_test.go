package quicguard

import (
	"net"
	"testing"
	"time"
)

// initial is a QUIC v1 Initial's first bytes: DCID of 8, SCID of 4, then the token's length.
func initial(token byte) []byte {
	b := []byte{0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 4, 9, 9, 9, 9, token}
	return append(b, make([]byte, 64)...)
}

// A filter that keeps none drops the Initials without a token and lets through the Initials
// with one and the packets of established connections (short headers).
func TestTheFilterDropsOnlyInitialsWithoutAToken(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach(rc, 0); err != nil {
		t.Fatal(err)
	}
	s, err := net.DialUDP("udp", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []struct {
		what string
		b    []byte
		pass bool
	}{
		{"an Initial without a token", initial(0), false},
		{"an Initial with a token", initial(0x40), true},
		{"a short header", append([]byte{0x43}, make([]byte, 40)...), true},
		{"a Handshake packet", append([]byte{0xe3, 0, 0, 0, 1}, make([]byte, 40)...), true},
		{"a probe", []byte("?frontdoor-probe"), true},
	} {
		s.Write(p.b)
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if got := err == nil && n == len(p.b); got != p.pass {
			t.Errorf("%s: passed %v, want %v (%v)", p.what, got, p.pass, err)
		}
	}
	if err := detach(rc); err != nil {
		t.Fatal(err)
	}
	s.Write(initial(0))
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 2048)); err != nil {
		t.Fatalf("without the filter an Initial without a token: %v", err)
	}
}

// Past its budget a Guard lets through a share of the Initials, and all again once they
// stop coming.
func TestAGuardShedsAFloodAndLiftsWhenItEnds(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, _ := c.SyscallConn()
	g := New(rc, 100, nil)
	defer g.Close()
	flood := time.NewTicker(time.Millisecond)
	defer flood.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for g.Keep() == 1 { // 10 per millisecond: 10k a second, against a budget of 100
		if time.Now().After(deadline) {
			t.Fatal("the guard did not shed a flood of 100× its budget")
		}
		<-flood.C
		for range 10 {
			g.Note()
		}
	}
	if k := g.Keep(); k > 0.5 {
		t.Fatalf("keep %v under a flood of 100× the budget", k)
	}
	for deadline := time.Now().Add(5 * time.Second); g.Keep() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the guard still keeps %v after the flood", g.Keep())
		}
	}
}
