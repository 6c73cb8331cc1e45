package drill

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCIDrill runs a CI-sized drill: a gateway powered off with the secure gateway ticked, the
// black-screen port failure, and a front door shut down with it unticked. It checks what the
// drill promises — back in the SAME session by itself, never a loop, and no cut at all in direct
// mode — and leaves the timing (≤ 3 s) to the drill's own table: timing is measured, not
// asserted in tests.
func TestCIDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("drill runs whole sites; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	var results []Result
	for _, c := range []struct{ scenario, mode string }{
		{"gateway-power-off", "gateway"},
		{"port-down", "gateway"},
		{"frontdoor-shutdown", "direct"},
	} {
		rep, err := Run(ctx, Options{Scenarios: []string{c.scenario}, Modes: []string{c.mode}, Base: 81, Observe: 8 * time.Second, Progress: &progress})
		if err != nil {
			t.Fatalf("%s/%s: %v\n%s", c.scenario, c.mode, err, progress.String())
		}
		results = append(results, rep.Results...)
	}
	for _, r := range results {
		if r.Error != "" {
			t.Errorf("%s/%s: %s", r.Scenario, r.Mode, r.Error)
			continue
		}
		affected := 0
		for _, c := range r.Clients {
			if !c.Affected {
				continue
			}
			affected++
			switch r.Mode {
			case "direct":
				if c.Cut {
					t.Errorf("%s/direct: %s was cut; a direct session must not see a front door failure", r.Scenario, c.User)
				}
			case "gateway":
				if !c.Cut || !c.Back || !c.SameSession || c.Relaunched {
					t.Errorf("%s/gateway: %s cut=%v back=%v same=%v relaunched=%v; want cut, then back in the same session with its reconnect ticket",
						r.Scenario, c.User, c.Cut, c.Back, c.SameSession, c.Relaunched)
				}
				if c.ViaAfter == r.Target {
					t.Errorf("%s/gateway: %s is back through the failed gateway %s", r.Scenario, c.User, r.Target)
				}
			}
		}
		if affected == 0 {
			t.Errorf("%s/%s: no client was on the failed front door", r.Scenario, r.Mode)
		}
	}

	// The table and the report files.
	var table bytes.Buffer
	rep := Report{Started: time.Now(), Results: results}
	WriteTable(&table, rep)
	if !strings.Contains(table.String(), "CRITERION") || strings.Count(table.String(), "\n") != len(results)+1 {
		t.Errorf("table:\n%s", table.String())
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if bytes.Count(html, []byte("<svg")) != len(results) || !bytes.Contains(html, []byte(`class="fault"`)) {
		t.Errorf("report.html has %d timelines for %d results", bytes.Count(html, []byte("<svg")), len(results))
	}
	t.Logf("\n%s", table.String())
}

// wirePair returns a TCP listener on an inner loopback address and a wire from a public one
// to it, on the same port.
func wirePair(t *testing.T, publicIP, innerIP string) (net.Listener, *Wire, string) {
	t.Helper()
	ln, err := net.Listen("tcp", innerIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	w, err := NewWire(netip.MustParseAddr(publicIP), netip.MustParseAddr(innerIP), []uint16{port}, nil)
	if err != nil {
		t.Skipf("public side of the wire on port %d: %v", port, err)
	}
	t.Cleanup(func() { w.Close() })
	return ln, w, netip.AddrPortFrom(netip.MustParseAddr(publicIP), port).String()
}

// TestWireBlackholeHidesAHostsDeath: a host that dies behind a powered-off wire (its process
// killed: the kernel closes its connections) leaves its clients' connections open and silent,
// as a power-off does; without the blackhole the client sees the close.
func TestWireBlackholeHidesAHostsDeath(t *testing.T) {
	for _, blackhole := range []bool{true, false} {
		ln, w, addr := wirePair(t, "127.91.0.1", "127.91.0.101")
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		host := <-accepted
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(host, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("through the wire: %q, %v", buf, err)
		}
		w.Blackhole(blackhole)
		host.Close() // the host's process dies
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.Read(buf)
		var ne net.Error
		timedOut := errors.As(err, &ne) && ne.Timeout()
		if blackhole && !timedOut {
			t.Errorf("blackholed: the client read %v; want silence (a timeout)", err)
		}
		if !blackhole && timedOut {
			t.Errorf("no blackhole: the client saw nothing of the host's close")
		}
	}
}

// TestWireStopUDP: a stopped UDP port answers port unreachable, which the client's
// connected socket reports.
func TestWireStopUDP(t *testing.T) {
	up, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.91.0.102:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	port := uint16(up.LocalAddr().(*net.UDPAddr).Port)
	w, err := NewWire(netip.MustParseAddr("127.91.0.2"), netip.MustParseAddr("127.91.0.102"), nil, []uint16{port})
	if err != nil {
		t.Skipf("public side of the wire on udp port %d: %v", port, err)
	}
	defer w.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := up.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			up.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.91.0.2"), port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	c.Write([]byte("echo"))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "echo" {
		t.Fatalf("echo through the wire: %q, %v", buf[:n], err)
	}
	w.StopUDP(port)
	var refused bool
	for i := 0; i < 5 && !refused; i++ {
		c.Write([]byte("echo"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(buf)
		refused = errors.Is(err, syscall.ECONNREFUSED)
	}
	if !refused {
		t.Error("a stopped UDP port did not answer port unreachable")
	}
}
