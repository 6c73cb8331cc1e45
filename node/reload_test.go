package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
	"github.com/frontdoor-vdi/frontdoor/proxy"
	"github.com/frontdoor-vdi/frontdoor/ticket"
)

// reloadSite is a one-node site with a tcp proxy listener on TCPPORT and EXTRA appended to
// the proxy's listeners.
const reloadSite = `
site: {name: reload-test}
zones: [{name: hq, primary: true, ranges: [127.0.0.0/8]}]
nodes: [{name: fd, zone: hq}]
proxy:
  listeners:
    - {name: t, node: fd, address: "127.0.0.1:TCPPORT", protocol: tcp, pool: p}
EXTRA
  pools: [{name: p, backends: [{address: "127.0.0.1:9"}]}]
`

func loadSite(t *testing.T, tcpPort int, extra string) *configs.Config {
	t.Helper()
	body := strings.NewReplacer("TCPPORT", fmt.Sprint(tcpPort), "EXTRA", extra).Replace(reloadSite)
	cfg, err := configs.Load("site.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startNode builds a node of cfg with o's options (a new data dir unless o names one) and
// opens its sockets; it is closed when the test ends.
func startNode(t *testing.T, cfg *configs.Config, o Options) *Node {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	o.Config, o.Logger = cfg, slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if err := r.Listen(); err != nil {
		t.Fatal(err)
	}
	return r
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// testAddProcs is what `frontdoor serve` passes as Options.Procs.Add.
func testAddProcs(delta int) { runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)+delta, 1)) }

// A reload that adds a udp listener served by blocking workers asks its owner for a P for
// each worker (Options.Procs.Add), and one that removes it gives them back.
func TestReloadKeepsAPForEachBlockingUDPWorker(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	tcpPort := freeTCPPort(t)
	cfg := loadSite(t, tcpPort, "")
	r := startNode(t, cfg, Options{Procs: Procs{BlockingUDP: true, Add: testAddProcs}})
	base := runtime.GOMAXPROCS(0)
	udp := fmt.Sprintf(`    - {name: u, node: fd, address: "127.0.0.1:%d", protocol: udp, pool: p}`, freeUDPPort(t))
	if err := r.Reload(loadSite(t, tcpPort, udp)); err != nil {
		t.Fatal(err)
	}
	if !r.proxy.Addr("u").IsValid() {
		t.Fatal("the reload did not open the udp listener")
	}
	want := base + proxy.UDPWorkers
	if !rawio.Supported {
		want = base
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("GOMAXPROCS after adding a udp listener: %d, want %d", got, want)
	}
	if err := r.Reload(loadSite(t, tcpPort, "")); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("GOMAXPROCS after removing it: %d, want %d", got, base)
	}
}

// A reload applies new zone ranges: the node maps a client address to its new zone.
func TestReloadAppliesZoneRanges(t *testing.T) {
	tcpPort := freeTCPPort(t)
	r := startNode(t, loadSite(t, tcpPort, ""), Options{})
	if z := r.zones.Zone(netAddr("10.9.0.1")); z == "hq" {
		t.Fatalf("10.9.0.1 in %q before the reload", z)
	}
	moved := loadSite(t, tcpPort, "")
	moved.Zones[0].Ranges = append(moved.Zones[0].Ranges, netip.MustParsePrefix("10.9.0.0/16"))
	if err := r.Reload(moved); err != nil {
		t.Fatal(err)
	}
	if z := r.zones.Zone(netAddr("10.9.0.1")); z != "hq" {
		t.Fatalf("10.9.0.1 in %q after the reload, want hq", z)
	}
}

// A reload is refused whole, and changes nothing, when it touches a part that takes a restart,
// removes the node's last proxy listener, or cannot open a new listener.
func TestReloadRefusesWhatItCannotApply(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	tcpPort := freeTCPPort(t)
	cfg := loadSite(t, tcpPort, "")
	r := startNode(t, cfg, Options{Procs: Procs{BlockingUDP: true, Add: testAddProcs}})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	moved := loadSite(t, tcpPort, "")
	moved.Nodes[0].Zone = "elsewhere"
	noListener := loadSite(t, tcpPort, "")
	noListener.Proxy.Listeners = nil
	// A new udp listener (its Ps come first) and new zone ranges, with a listener that
	// cannot open: none of it may stay.
	busy := loadSite(t, tcpPort, fmt.Sprintf("    - {name: b, node: fd, address: %q, protocol: tcp, pool: p}\n"+
		"    - {name: u, node: fd, address: \"127.0.0.1:%d\", protocol: udp, pool: p}", taken.Addr().String(), freeUDPPort(t)))
	busy.Zones[0].Ranges = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/16")}
	badRange := loadSite(t, tcpPort, "")
	badRange.Zones[0].Ranges = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}
	renamed := loadSite(t, tcpPort, "")
	renamed.GSLB.Names = []configs.GSLBName{{Name: "desktop.example.test."}}
	sampled := loadSite(t, tcpPort, "")
	sampled.GSLB.QueryLogSample = 10
	procs := runtime.GOMAXPROCS(0)
	for name, c := range map[string]struct {
		cfg  *configs.Config
		want string
	}{
		"nodes":         {moved, "nodes changed, which takes a restart"},
		"last listener": {noListener, "last proxy listener"},
		"address taken": {busy, "address already in use"},
		"bad range":     {badRange, "zones"},
		"gslb names":    {renamed, "the set of gslb.names changed"},
		"query log":     {sampled, "gslb.query_log_sample changed"},
	} {
		err := r.Reload(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Reload = %v, want an error naming %q", name, err, c.want)
		}
		if r.proxy.Addr("b").IsValid() {
			t.Errorf("%s: a refused reload opened a listener", name)
		}
		if z := r.zones.Zone(netAddr("127.5.0.1")); z != "hq" {
			t.Errorf("%s: a refused reload changed the zones: 127.5.0.1 is in %q", name, z)
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("%s: a refused reload left GOMAXPROCS at %d, want %d", name, got, procs)
		}
	}
}

// A node told to stop before its proxy and its gateway started serving stops cleanly, and
// refuses reloads once it drains.
func TestServeStoppedAtOnceDrainsCleanly(t *testing.T) {
	for i := range 20 {
		health, channel := freeTCPPort(t), freeTCPPort(t)
		for channel == health { // a port freed by the first pick can come back
			channel = freeTCPPort(t)
		}
		body := strings.NewReplacer("TCPPORT", fmt.Sprint(freeTCPPort(t)), "EXTRA", "").Replace(reloadSite) +
			fmt.Sprintf("gateways: [{name: gw, zone: hq, node: fd, address: 127.0.99.7, ports: [{port: %d, check: {kind: https}}, {port: %d}]}]\n",
				health, channel)
		cfg, err := configs.Load("site.yaml", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		r := startNode(t, cfg, Options{Drain: true})
		if r.gateways["gw"] == nil {
			t.Fatal("the node runs no gateway")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.Serve(ctx); err != nil {
			t.Fatalf("round %d: Serve with its context done = %v, want nil", i, err)
		}
		if err := r.Reload(cfg); err == nil || !strings.Contains(err.Error(), "stopping") {
			t.Fatalf("round %d: Reload after the drain = %v, want a refusal", i, err)
		}
	}
}

func netAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// Finding L4 of the security review: a site of one node kept its ticket ledger in memory, so
// a restart forgot revocations (a logged-off session's tickets opened channels again),
// supersede marks and single uses. On bolt the ledger is in the file: a revocation made
// before a restart holds after it.
func TestARevocationOutlivesARestartOfOneNode(t *testing.T) {
	cfg := loadSite(t, freeTCPPort(t), "")
	dir := t.TempDir()
	r := startNode(t, cfg, Options{DataDir: dir})
	if err := r.verifier.Revoke("s-ended", time.Hour); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r = startNode(t, cfg, Options{DataDir: dir})
	if !r.verifier.Revoked(ticket.Claims{Session: "s-ended", Issued: time.Now().Add(-time.Minute)}) {
		t.Fatal("after a restart the ended session's tickets are no longer revoked")
	}
	if r.verifier.Revoked(ticket.Claims{Session: "s-live", Issued: time.Now().Add(-time.Minute)}) {
		t.Fatal("a session never revoked is revoked")
	}
}
