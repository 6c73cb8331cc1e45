package drill

import (
	"bytes"
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

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// The drill runs on distributed sites, whose node processes are the frontdoor binary: the
// whole drill is tested in cmd/frontdoor (TestCIDrill), where the test binary stands in for
// it. These tests cover what needs no site.

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

// TestDrillSource: the drill site is the lab site with a short drain.
func TestDrillSource(t *testing.T) {
	src, err := drillSource(Options{Base: 61})
	if err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load("drill site", src)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Proxy.DrainTimeout.D(); d != drainTimeout {
		t.Errorf("drain_timeout %s, want %s", d, drainTimeout)
	}
	if c.Gateways[0].Address != "127.61.0.11" {
		t.Errorf("first gateway at %s, want the lab's moved to 127.61", c.Gateways[0].Address)
	}
}

// TestReport: the table, the JSON and the HTML of a report.
func TestReport(t *testing.T) {
	fault := time.Now()
	res := []Result{
		{Scenario: "frontdoor-power-off", Mode: "gateway", Criterion: "Front door power off", Expected: ExpectGateway, Pass: true,
			Actual: "back", Target: "fd-east-1", Note: "SIGKILL behind a blackhole", FaultAt: fault, End: fault.Add(3 * time.Second),
			Clients: []ClientResult{{User: "alice", Affected: true, Cut: true, CutAfter: time.Second, Back: true, BackAfter: 1010 * time.Millisecond, SameSession: true}}},
		{Scenario: "frontdoor-power-off", Mode: "direct", Criterion: "Front door power off", Expected: ExpectDirect, Pass: true, Actual: "remained",
			Note: "SIGKILL behind a blackhole", FaultAt: fault, End: fault.Add(6 * time.Second), Clients: []ClientResult{{User: "bob", Affected: true}}},
	}
	rep := Report{Started: fault, Results: res}
	var table, notes bytes.Buffer
	WriteTable(&table, rep)
	for _, want := range []string{"1.01 s", "no cut", "ticked", "unticked"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	WriteNotes(&notes, rep)
	if strings.Count(notes.String(), "SIGKILL") != 1 {
		t.Errorf("notes, once per scenario:\n%s", notes.String())
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if bytes.Count(html, []byte("<svg")) != 2 || !bytes.Contains(html, []byte("How the lab does it: SIGKILL")) {
		t.Errorf("report.html has %d timelines, want 2, and the note", bytes.Count(html, []byte("<svg")))
	}
}
