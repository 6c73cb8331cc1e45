//go:build unix

package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSilenceHeld: a UDP flow's silence cuts the link unless this process was itself late
// within the last timeout, and never past three timeouts.
func TestSilenceHeld(t *testing.T) {
	const timeout = time.Second
	tick := time.Unix(1000, 0)
	never := func(time.Time) time.Duration { return 0 }
	busy := func(time.Time) time.Duration { return 400 * time.Millisecond }
	slightly := func(time.Time) time.Duration { return 100 * time.Millisecond }
	for _, tt := range []struct {
		name    string
		silent  time.Duration
		late    time.Duration // how long before tick the last late tick came (0: none)
		starved func(time.Time) time.Duration
		held    bool
	}{
		{"on time: a dead gateway", 1200 * time.Millisecond, 0, never, false},
		{"on time, without the runtime's meter", 1200 * time.Millisecond, 0, nil, false},
		{"this process stood still just now", 1500 * time.Millisecond, 1, never, true},
		{"this process stood still, then was on time for a whole timeout", 2500 * time.Millisecond, 1200 * time.Millisecond, never, false},
		{"its goroutines waited for a CPU", 1200 * time.Millisecond, 0, busy, true},
		{"a short wait for a CPU holds nothing", 1200 * time.Millisecond, 0, slightly, false},
		{"three timeouts cut even a starved process", 3 * time.Second, 1, busy, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var late time.Time
			if tt.late > 0 {
				late = tick.Add(-tt.late)
			}
			got := silenceHeld(timeout, tt.silent, tick, late, 700*time.Millisecond, tt.starved)
			if (got > 0) != tt.held {
				t.Fatalf("silenceHeld = %v, want held %v", got, tt.held)
			}
		})
	}
}

// TestAClientThatStoodStillKeepsItsSession: a client process stopped for longer than the
// keepalive timeout (SIGSTOP: a starved CPU, a debugger, a laptop's lid) finds its flow's
// echo missing when it runs again, because it sent nothing while it stood still; it does not
// read that as a dead gateway. A machine that then really goes silent is still a cut.
func TestAClientThatStoodStillKeepsItsSession(t *testing.T) {
	if port := os.Getenv("FRONTDOOR_TEST_STALL_PORT"); port != "" {
		stallChild(t, port)
		return
	}
	t.Parallel() // it waits on a child process, on a port of its own
	conn, mute := startMuteMachine(t)
	port := conn.LocalAddr().(*net.UDPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAClientThatStoodStillKeepsItsSession$")
	cmd.Env = append(os.Environ(), "FRONTDOOR_TEST_STALL_PORT="+strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if kind, ok := strings.CutPrefix(sc.Text(), "event "); ok {
				events <- kind
			}
		}
	}()
	next := func(within time.Duration) string {
		select {
		case kind, ok := <-events:
			if !ok {
				t.Fatal("the client process ended")
			}
			return kind
		case <-time.After(within):
			return ""
		}
	}
	if kind := next(10 * time.Second); kind != string(EventUp) {
		t.Fatalf("first event %q, want up", kind)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1600 * time.Millisecond) // the fault: the process stands still past the 1 s timeout
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if kind := next(2 * time.Second); kind != "" {
		t.Fatalf("event %q after the client process stood still 1.6 s; want none: its gateway answered all along", kind)
	}
	mute(true)
	if kind := next(5 * time.Second); kind != string(EventCut) {
		t.Fatalf("event %q after the machine went silent; want cut", kind)
	}
}

// stallChild is the client process of TestAClientThatStoodStillKeepsItsSession: it holds a
// session of one UDP flow to the parent's machine and prints its events until stdin closes.
func stallChild(t *testing.T, port string) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	d := &Descriptor{SessionID: "s-stall", Mode: ModeGateway, Machine: "vda-9",
		Gateways:     []GatewayEndpoint{{Name: "gw-9", Addresses: []netip.Addr{netip.MustParseAddr("127.0.70.9")}}},
		LaunchTicket: "launch-token", ReconnectTicket: "reconnect-token"}
	sess, err := Open(context.Background(), Options{Descriptor: d, Channels: []Channel{{Port: uint16(p), Proto: "udp"}}, Logger: quiet,
		OnEvent: func(e Event) { fmt.Printf("event %s\n", e.Kind) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	bufio.NewReader(os.Stdin).ReadByte() // until the parent closes stdin
}
