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
	"golang.org/x/crypto/bcrypt"
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

// TestDrillSource: the drill site is the lab site with the storm's users and a short drain.
func TestDrillSource(t *testing.T) {
	src, err := drillSource(Options{Base: 61, Launches: 30})
	if err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load("drill site", src)
	if err != nil {
		t.Fatal(err)
	}
	storm := 0
	for _, u := range c.Users {
		if strings.HasPrefix(u.Name, "storm-") {
			storm++
		}
	}
	if storm != 30 {
		t.Errorf("%d storm users, want 30", storm)
	}
	if c.Site.Auth.MinPasswordCost != bcrypt.MinCost {
		t.Errorf("min_password_cost %d, want %d for the storm users' hashes", c.Site.Auth.MinPasswordCost, bcrypt.MinCost)
	}
	if d := c.Proxy.DrainTimeout.D(); d != drainTimeout {
		t.Errorf("drain_timeout %s, want %s", d, drainTimeout)
	}
	if c.Gateways[0].Address != netip.MustParseAddr("127.61.0.11") {
		t.Errorf("first gateway at %s, want the lab's moved to 127.61", c.Gateways[0].Address)
	}
}

// TestGatewayAdmissions counts the gateways' "channel admitted" lines of launch tickets.
func TestGatewayAdmissions(t *testing.T) {
	log := `time=2026-01-01T00:00:00Z level=INFO msg="channel admitted" node=fd-hq-1 component=gateway gateway=gw-hq-1 session=s1 kind=launch channel=4172/tcp client=127.0.0.1:1 machine=rds-hq-1
time=2026-01-01T00:00:00Z level=INFO msg="channel admitted" node=fd-hq-1 component=gateway gateway=gw-hq-1 session=s1 kind=reconnect channel=4172/tcp client=127.0.0.1:2 machine=rds-hq-1
time=2026-01-01T00:00:00Z level=WARN msg="channel denied" node=fd-hq-1 component=gateway gateway=gw-hq-1 session=s2 channel=4172/tcp reason="launch ticket already used for this channel"
time=2026-01-01T00:00:00Z level=INFO msg="channel admitted" node=fd-hq-1 component=gateway gateway=gw-hq-1 session=s2 kind=launch channel=4172/tcp client=127.0.0.1:3 machine=rds-hq-1
time=2026-01-01T00:00:00Z level=INFO msg="channel admitted" node=fd-hq-1 component=gateway gateway=gw-hq-1 session=other kind=launch channel=4172/tcp client=127.0.0.1:4 machine=rds-hq-1
`
	path := filepath.Join(t.TempDir(), "node.log")
	if err := os.WriteFile(path, []byte(log+log), 0o600); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	if err := gatewayAdmissions(path, map[string]launchResult{"s1": {}, "s2": {}}, per); err != nil {
		t.Fatal(err)
	}
	if per["s1 4172/tcp"] != 2 || per["s2 4172/tcp"] != 2 || len(per) != 2 {
		t.Errorf("admissions %v; want s1 and s2 twice each (the log twice over), reconnects and other sessions left out", per)
	}
}

// TestReport: the table, the JSON and the HTML of a report, with a storm's counts in its row.
func TestReport(t *testing.T) {
	fault := time.Now()
	counts := &LaunchCounts{Launches: 200, FrontDoors: 6, Killed: "fd-east-1", InFlight: 16, Retried: 20, Sessions: 60, Denied: 140,
		Presented: 60, AdmittedOnce: 60, GatewayAdmissions: 60, Found: 60, Busiest: "rds-hq-1", BusiestHeld: 20, BusiestMax: 20}
	if !counts.OK() {
		t.Fatalf("counts %+v not OK", counts)
	}
	res := []Result{
		{Scenario: "node-killed-mid-launch", Mode: "gateway", Criterion: "A node killed", Expected: ExpectGateway, Pass: true,
			Actual: "back; " + counts.String(), Target: "fd-east-1", Note: "SIGKILL in a launch storm", FaultAt: fault, End: fault.Add(3 * time.Second), Launches: counts,
			Clients: []ClientResult{{User: "alice", Affected: true, Cut: true, CutAfter: 20 * time.Millisecond, Back: true, BackAfter: 130 * time.Millisecond, SameSession: true}}},
		{Scenario: "etcd-member-down", Mode: "gateway", Quiet: true, Criterion: "An etcd member down", Pass: true, Actual: "Nothing seen",
			FaultAt: fault, End: fault.Add(6 * time.Second), Clients: []ClientResult{{User: "bob", Affected: true}}},
	}
	rep := Report{Started: fault, Results: res}
	var table, notes bytes.Buffer
	WriteTable(&table, rep)
	for _, want := range []string{"200 launches through 6 front doors, 16 in flight when fd-east-1 was killed", "0 lost", "0 machines over max_sessions", "0.13 s", "no cut"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	WriteNotes(&notes, rep)
	if !strings.Contains(notes.String(), "node-killed-mid-launch: SIGKILL in a launch storm.") || strings.Count(notes.String(), "\n") != 1 {
		t.Errorf("notes:\n%s", notes.String())
	}
	dir := t.TempDir()
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if bytes.Count(html, []byte("<svg")) != 2 || !bytes.Contains(html, []byte("How the lab does it: SIGKILL")) {
		t.Errorf("report.html has %d timelines, want 2, and the note", bytes.Count(html, []byte("<svg")))
	}
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if !bytes.Contains(js, []byte(`"over_max": 0`)) || !bytes.Contains(js, []byte(`"killed": "fd-east-1"`)) {
		t.Errorf("report.json lacks the counts:\n%s", js)
	}

	// A drill that failed before its failure was injected has no fault time: its timeline is
	// the run's own, not one tick a second from the year 1 (which ran the drill out of memory).
	failed := Result{Scenario: "gateway-shutdown", Mode: "direct", Criterion: "A gateway shut down", Actual: "drill error: ticket denied",
		Start: fault, End: fault.Add(6 * time.Second), Error: "ticket denied"}
	var page bytes.Buffer
	if err := WriteHTML(&page, Report{Started: fault, Results: []Result{failed}}); err != nil {
		t.Fatal(err)
	}
	if page.Len() > 64<<10 {
		t.Errorf("the page of a drill that failed early is %d bytes", page.Len())
	}
}
