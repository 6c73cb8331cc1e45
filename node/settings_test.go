package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/internal/testkit"
)

// TestOneNodeKeepsItsSettingsInItsStore: a site of one node keeps its settings — the
// secure-gateway switches, machine revocations and health overrides — in its bolt file, as a
// site of several keeps them in etcd, and follows them the same way. The files where it kept
// the first two before are moved in at the first start, once.
func TestOneNodeKeepsItsSettingsInItsStore(t *testing.T) {
	cfg, err := configs.Load("one.yaml", []byte(oneNodeSite+`
gateways: [{name: gw, zone: hq, address: 127.0.99.21}]
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	revokedAt := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	writeJSON(t, filepath.Join(dir, oldModesFile), map[string]bool{"desktops": false})
	writeJSON(t, filepath.Join(dir, oldRevokedFile), map[string]time.Time{"vda-1": revokedAt})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *Node {
		t.Helper()
		n, err := New(context.Background(), Options{Config: cfg, DataDir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	mode := func(n *Node) string {
		return n.broker.Decide(broker.LaunchRequest{User: "admin", Resource: "desktop", LocationZone: "hq"}).Mode
	}

	n := open()
	for _, f := range []string{oldModesFile, oldRevokedFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s is still in the data dir after the first start: %v", f, err)
		}
	}
	if got := mode(n); got != "direct" {
		t.Errorf("a launch's mode after the switch was moved in: %q, want direct", got)
	}
	if got := n.revokedMachines.at("vda-1"); !got.Equal(revokedAt) {
		t.Errorf("vda-1 revoked before %v, want %v", got, revokedAt)
	}
	if _, err := n.override("gw", "drain"); err != nil {
		t.Fatal(err)
	}
	rev, err := n.RevokeMachine(t.Context(), "vda-1") // again: from now on
	if err != nil {
		t.Fatal(err)
	}
	if err := n.broker.SetMaintenance(t.Context(), "vda-1", false); err != nil { // a launch may land on it
		t.Fatal(err)
	}
	n.Close()

	n = open()
	defer n.Close()
	if got := mode(n); got != "direct" {
		t.Errorf("a launch's mode after a restart: %q, want direct", got)
	}
	if got := n.revokedMachines.at("vda-1"); !got.Equal(rev.Before) {
		t.Errorf("after a restart vda-1 is revoked before %v, want %v", got, rev.Before)
	}
	testkit.WaitFor(t, "gw's drain override after a restart", func() bool {
		st, ok := n.health.Status("gw")
		return ok && st.Override == health.OverrideDrain
	})
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
