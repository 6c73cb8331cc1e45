package health

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

func TestTargetsFromTheLabConfig(t *testing.T) {
	cfg, err := configs.Lab()
	if err != nil {
		t.Fatal(err)
	}
	targets, err := TargetsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(cfg.Gateways) + len(cfg.Machines); len(targets) != want {
		t.Fatalf("%d targets, want %d", len(targets), want)
	}
	byName := map[string]Target{}
	for _, tg := range targets {
		byName[tg.Name] = tg
	}
	gw := byName["gw-hq-1"]
	wantPorts := []struct {
		id   PortID
		kind Kind
	}{{TCP(10443), KindHTTPS}, {TCP(4172), KindTCP}, {UDP(4172), KindUDP}, {TCP(8443), KindTLS}, {UDP(8443), KindUDP},
		{UDP(4433), KindUDP}} // the quic_port
	if len(gw.Ports) != len(wantPorts) {
		t.Fatalf("gw-hq-1 ports %+v", gw.Ports)
	}
	for i, w := range wantPorts {
		p := gw.Ports[i]
		if p.ID != w.id || p.Check.Kind != w.kind || p.Optional {
			t.Errorf("gw-hq-1 port %d: %+v, want required %v %v", i, p, w.id, w.kind)
		}
	}
	if p := gw.Ports[0].Check; p.Method != "HEAD" || p.Path != "/favicon.ico" || p.ExpectStatus != 200 {
		t.Errorf("https check %+v, want HEAD /favicon.ico 200", p)
	}
	if string(gw.Ports[2].Check.Send) != "?frontdoor-probe" {
		t.Errorf("udp payload %q", gw.Ports[2].Check.Send)
	}
	if gw.Monitor != DefaultMonitor() {
		t.Errorf("gw-hq-1 monitor %+v, want the defaults %+v", gw.Monitor, DefaultMonitor())
	}
	vda := byName["vda-hq-1"]
	if vda.Kind != "machine" || len(vda.Ports) != 4 || vda.Ports[0].Optional || !vda.Ports[1].Optional {
		t.Errorf("vda-hq-1: %+v; want 4 display ports, udp optional", vda)
	}
	// The Checker takes them as they are.
	c, err := New(targets, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Eligible("gw-hq-1") || c.Eligible("nope") {
		t.Error("eligibility before probes: want known targets up, unknown ones not")
	}
	c.Close()
}

func TestMonitorFromConfig(t *testing.T) {
	m := MonitorFromConfig(configs.Monitor{Interval: configs.Duration(time.Second), Fall: 5, Initial: "down", Mode: "any", Jitter: 0.2})
	want := DefaultMonitor()
	want.Interval, want.Fall, want.InitialDown, want.Mode, want.Jitter, want.PassiveFailures = time.Second, 5, true, ModeAny, 0.2, 0
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
}

func TestTargetsFromConfigRejectsNameCollisions(t *testing.T) {
	cfg := &configs.Config{
		Gateways: []configs.Gateway{{Name: "x", Address: netip.MustParseAddr("127.0.0.1")}},
		Machines: []configs.Machine{{Name: "x", Address: netip.MustParseAddr("127.0.0.2")}},
	}
	if _, err := TargetsFromConfig(cfg); !errors.Is(err, ErrInvalidTarget) {
		t.Errorf("got %v, want ErrInvalidTarget", err)
	}
}
