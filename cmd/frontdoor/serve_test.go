package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/miekg/dns"
)

const serveConfig = `
site: {name: t, default_zone: hq}
zones:
  - {name: hq, primary: true, ranges: [127.0.0.0/8]}
  - {name: east, ranges: [10.2.0.0/16]}
nodes:
  - name: fd-1
    zone: hq
    listeners:
      - {kind: dns, address: "127.0.0.1:PORT1"}
      - {kind: dns, address: "127.0.0.1:PORT2", protocols: [udp]}
gateways:
  - {name: gw-hq, zone: hq, address: 127.1.0.11}
  - {name: gw-east, zone: east, address: 127.2.0.11}
gslb:
  domains: [{name: vdi.test.}]
  names:
    - name: desktop.vdi.test.
      initial: down
      sites:
        - {zone: hq, gateways: [gw-hq]}
        - {zone: east, gateways: [gw-east]}
`

// freePort returns a port that is free for both udp and tcp on 127.0.0.1 right now.
func freePort(t *testing.T) string {
	t.Helper()
	for try := 0; try < 20; try++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		pc.Close()
		if err == nil {
			ln.Close()
			return fmt.Sprint(port)
		}
	}
	t.Fatal("no free port")
	return ""
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	body = strings.NewReplacer("PORT1", "15301", "PORT2", "15302").Replace(body)
	f := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestServeAnswersUntilCancelled(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	for p2 == p1 {
		p2 = freePort(t)
	}
	file := writeConfig(t, strings.NewReplacer("PORT1", p1, "PORT2", p2).Replace(serveConfig))
	ready := make(chan *node.Node, 1)
	cmd := newServeCmdWith(func(s *node.Node) { ready <- s })
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--config", file, "--data", t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var s *node.Node
	select {
	case s = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped before listening: %v\n%s", err, stderr.String())
	}
	var dnsUDP []string
	var dnsTCP int
	for _, e := range s.Endpoints() {
		switch {
		case e.Kind == "dns" && e.Network == "udp":
			dnsUDP = append(dnsUDP, e.Address)
		case e.Kind == "dns":
			dnsTCP++
		}
	}
	if len(dnsUDP) != 2 || dnsTCP != 1 {
		t.Fatalf("dns sockets: udp %v, %d tcp; want two udp and one tcp (the second listener udp only)", dnsUDP, dnsTCP)
	}
	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("desktop.vdi.test.", dns.TypeA)
		var r *dns.Msg
		var err error
		for try := 0; try < 3 && r == nil; try++ {
			r, _, err = c.Exchange(m, dnsUDP[0])
		}
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		// No gateway answers (none runs here): before the first verdicts the initial state
		// (down) holds, after them the verdicts are down; either way the name fails open.
		if len(r.Answer) != 2 || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: got %v, want both addresses (fail open)", proto, r)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v, want a clean exit", err)
	}
	if !strings.Contains(stderr.String(), "dns listening") {
		t.Fatalf("log lacks the listening line:\n%s", stderr.String())
	}
}

func TestServeErrors(t *testing.T) {
	twoNodes := strings.Replace(serveConfig, "gateways:", `  - name: fd-2
    zone: east
gateways:`, 1)
	tests := []struct {
		name, config string
		args         []string
		want         string
	}{
		{name: "a missing --config is an error", args: []string{}, want: "required flag"},
		{name: "an unknown node is named", config: serveConfig, args: []string{"--node", "nope"}, want: `no node "nope"`},
		{name: "several nodes need --node", config: twoNodes, want: "--node: the config has 2 nodes: choose one (fd-1, fd-2)"},
		{name: "a node without listeners or gateways has nothing to serve", config: twoNodes, args: []string{"--node", "fd-2"}, want: "nothing to serve"},
		{name: "a node of several on a store not shared is refused, naming etcd", config: twoNodes, args: []string{"--node", "fd-1"}, want: "set site.store.backend: etcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.config != "" {
				args = append([]string{"--config", writeConfig(t, tt.config)}, args...)
			}
			cmd := newServeCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(args)
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// serve raises GOMAXPROCS for its blocking workers while it runs, and gives the Ps back when
// it stops: run again and again in one process (as the tests do), it would otherwise raise
// it each time, until the runtime runs out of threads.
func TestServeGivesBackTheProcsItTook(t *testing.T) {
	p1, p2 := freePort(t), freePort(t)
	for p2 == p1 {
		p2 = freePort(t)
	}
	file := writeConfig(t, strings.NewReplacer("PORT1", p1, "PORT2", p2).Replace(serveConfig))
	before := runtime.GOMAXPROCS(0)
	for range 2 {
		sv := startServe(t, file)
		if runtime.GOMAXPROCS(0) <= before && os.Getenv("GOMAXPROCS") == "" {
			t.Fatalf("serve runs with GOMAXPROCS %d, as before it: no P for its workers", runtime.GOMAXPROCS(0))
		}
		sv.stop()
		<-sv.done
		if got := runtime.GOMAXPROCS(0); got != before {
			t.Fatalf("after serve stopped GOMAXPROCS is %d, before it %d", got, before)
		}
	}
}
