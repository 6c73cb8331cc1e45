package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/client"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/frontdoor-vdi/frontdoor/wire"
)

// startProcessLab runs a distributed lab of src, whose node processes are this test binary
// standing in for frontdoor, until the test ends, and waits until every node takes launches.
func startProcessLab(ctx context.Context, t *testing.T, src []byte) *lab.Lab {
	t.Helper()
	l, err := lab.New(ctx, lab.Options{Processes: true, Source: src, Binary: os.Args[0], Env: []string{"FRONTDOOR_TEST_MAIN=1"},
		HeartbeatInterval: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- l.Serve(sctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("lab Serve: %v", err)
		}
	})
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDistributedLabSessionOutlivesItsNode runs the lab as a distributed site (a 3-member
// etcd, one serve process per node), launches a desktop and streams through a gateway, then
// kills (SIGKILL) the node process that hosts that gateway: the session lives on in etcd, the
// client is back in the SAME session through another node's gateway, and the admin status
// lists the store's members and the nodes still running.
func TestDistributedLabSessionOutlivesItsNode(t *testing.T) {
	testkit.Site(t)
	src, err := lab.MovedSource(51, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l := startProcessLab(ctx, t, src)

	ln := &client.Launcher{Name: "desktop.vdi.lab.test", DNSServer: "127.51.0.1:5353", User: "alice", Password: "lab",
		Resource: "desktop", Endpoint: "alice-laptop", RootCAs: l.CA().Pool()}
	var desc *client.Descriptor
	for deadline := time.Now().Add(20 * time.Second); ; {
		// The nodes' first probes decide when GSLB answers and gateways are offered.
		if desc, _, err = ln.Launch(ctx); err == nil && len(desc.Gateways) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no launch with two gateways within 20s: %v %+v", err, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
	events := make(chan client.Event, 64)
	s, err := client.Open(ctx, client.Options{Descriptor: desc, RootCAs: l.CA().Pool(), Relaunch: ln.Relaunch, Logger: quiet,
		KeepaliveTimeout: 3 * time.Second, OnEvent: func(e client.Event) {
			select {
			case events <- e:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("TCP echo through the gateway: %v", err)
	}
	// The check's stream gave way to the link's idle channel again: a kill while that one's
	// admission is under way takes the rotated ticket with it, and the client comes back
	// by a new launch (same session) instead — not what this test looks at.
	for deadline := time.Now().Add(10 * time.Second); !s.Holding(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session holds no idle channel 10s after the check")
		}
	}
	via, _ := s.Via()
	victim := ""
	for _, g := range l.Config.Gateways {
		if g.Name == via {
			victim = g.Node
		}
	}
	if victim == "" || victim == "fd-hq-1" {
		t.Fatalf("session %s via %q (node %q): want a gateway of a node without the admin API", desc.SessionID, via, victim)
	}
	t.Logf("session %s on %s via %s (node %s); killing node %s", desc.SessionID, desc.Machine, via, victim, victim)
	killed := time.Now()
	if err := l.Signal(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for back := false; !back; {
		select {
		case e := <-events:
			if e.Kind != client.EventBack {
				continue
			}
			if !e.SameSession || e.Relaunched || e.Via == via {
				t.Fatalf("back: %+v; want the same session through another gateway", e)
			}
			t.Logf("back in session %s via %s %s after the kill", desc.SessionID, e.Via, time.Since(killed).Round(time.Millisecond))
			back = true
		case <-deadline:
			t.Fatal("the client was not back within 30s of its gateway's node being killed")
		}
	}
	if _, err := s.CheckDesktop(ctx); err != nil {
		t.Fatalf("TCP echo after the reconnect: %v", err)
	}
	snap, _ := l.Site().Load(ctx)
	found := false
	for _, se := range snap.Sessions {
		found = found || se.ID == desc.SessionID
	}
	if !found {
		t.Fatalf("session %s is gone from the site database", desc.SessionID)
	}

	// The admin status names the store's members and, once the dead node's lease is gone,
	// the five nodes that run.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: l.TLSClientConfig()}}
	var st struct {
		Store struct {
			Backend string `json:"backend"`
			Members []struct {
				Healthy, Leader bool
			} `json:"members"`
			Nodes []struct{ Name string } `json:"nodes"`
		} `json:"store"`
	}
	for wait := time.Now().Add(15 * time.Second); ; {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.51.0.1:9090/v1/admin/status", nil)
		req.SetBasicAuth("admin", "lab")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The members' status is asked of each member with a 2 s bound: on a loaded machine a
		// round may miss them.
		if len(st.Store.Nodes) == 5 && len(st.Store.Members) == 3 {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("status lists %d nodes and %d members 15s after a kill, want 5 and 3: %+v", len(st.Store.Nodes), len(st.Store.Members), st.Store)
		}
		time.Sleep(250 * time.Millisecond)
	}
	leaders := 0
	for _, m := range st.Store.Members {
		if !m.Healthy {
			t.Errorf("status: an unhealthy member: %+v", st.Store.Members)
		}
		if m.Leader {
			leaders++
		}
	}
	if st.Store.Backend != "etcd" || len(st.Store.Members) != 3 || leaders != 1 {
		t.Fatalf("status store %+v, want etcd with 3 healthy members and one leader", st.Store)
	}
	for _, n := range st.Store.Nodes {
		if n.Name == victim {
			t.Fatalf("the killed node %s is still listed", victim)
		}
	}

	// An operator drains gw-west-1 at hq's admin API: the override is the site's, so the
	// node that hosts it (fd-west-1, another process) puts it in drain mode, and "auto"
	// lifts it again.
	health := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "https://127.53.0.11:10443/favicon.ico", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("health port of gw-west-1: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, step := range []struct {
		override string
		want     int
	}{{"drain", http.StatusServiceUnavailable}, {"auto", http.StatusOK}} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://127.51.0.1:9090/v1/admin/health",
			strings.NewReader(`{"gateway": "gw-west-1", "override": "`+step.override+`"}`))
		req.SetBasicAuth("admin", "lab")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("override %s: %s %s", step.override, resp.Status, body)
		}
		for wait := time.Now().Add(5 * time.Second); health() != step.want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(wait) {
				t.Fatalf("gw-west-1's health port answers %d 5s after %q at hq, want %d", health(), step.override, step.want)
			}
		}
	}
}

// TestTwoSitesRunAsSeparateServeProcesses runs configs/two-sites.yaml, moved to loopback, as
// one serve process per node over an embedded etcd: a launch at the London front door and a
// launch of the same user at the New York one land in the one session the site has.
func TestTwoSitesRunAsSeparateServeProcesses(t *testing.T) {
	testkit.Site(t)
	b, err := configs.Shipped("two-sites.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := regexp.MustCompile(`(?m)^  store:\n(    .*\n)+`).ReplaceAllString(string(b), "") // the lab brings its etcd
	src = strings.NewReplacer("10.10.", "127.110.", "10.20.", "127.120.", "10.30.", "127.130.", "10.40.", "127.140.",
		`:53"`, `:5353"`, `:443"`, `:10443"`).Replace(src)
	hash := `password_hash: "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"` // "lab"
	src = strings.NewReplacer("{name: erin, home_site: emea}", "{name: erin, home_site: emea, "+hash+"}").Replace(src)
	// Its connection servers are foreign servers the lab does not run: their probes find them
	// down, so the launches here are direct.
	src = strings.Replace(src, "  secure_gateway: true\n", "  secure_gateway: false\n", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := startProcessLab(ctx, t, []byte(src))
	launch := func(url string) (id, machine string) {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.110.0.50")}} // a client in London
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: l.TLSClientConfig(), DialContext: d.DialContext}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/launch", strings.NewReader(`{"resource":"global-desktop","endpoint":"erin-pc"}`))
		req.SetBasicAuth("erin", "lab")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var desc wire.Descriptor
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &desc) != nil || desc.SessionID == "" {
			t.Fatalf("launch at %s: %s %s", url, resp.Status, body)
		}
		return desc.SessionID, desc.Machine
	}
	id1, m1 := launch("https://127.110.0.1:10443")
	var id2, m2 string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// The New York node learns of the session through its watch.
		if id2, m2 = launch("https://127.130.0.1:10443"); id2 == id1 || time.Now().After(deadline) {
			break
		}
	}
	if id2 != id1 || m2 != m1 {
		t.Fatalf("London launched %s on %s, New York %s on %s: want the same session", id1, m1, id2, m2)
	}
	nodes := l.Site().Presence().Nodes()
	if len(nodes) != 2 || nodes["fd-london"].PID == nodes["fd-newyork"].PID {
		t.Fatalf("present nodes %+v, want fd-london and fd-newyork in two processes", nodes)
	}
}
