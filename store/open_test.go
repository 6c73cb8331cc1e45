package store_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store"
)

func TestOpenPicksTheConfiguredBackend(t *testing.T) {
	for _, tc := range []struct{ backend, path, wantErr string }{
		{"memory", "", ""},
		{"bolt", filepath.Join(t.TempDir(), "fd.db"), ""},
		{"zookeeper", "", `store backend "zookeeper" is not available in this build`},
	} {
		cfg := &configs.Config{}
		cfg.Site.Store.Backend, cfg.Site.Store.Path = tc.backend, tc.path
		st, err := store.Open(t.Context(), cfg, store.Options{})
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: got %v, want %q", tc.backend, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		st.Close()
	}
}

// TestOutagePlan: a machine's outage brokers are its zone's launch nodes, else the primary
// zone's, by name; machines with the same brokers are dealt out (offsets 0, 1, 2, ...), so
// that each node of a zone owns the one slot of every other single-session desktop.
func TestOutagePlan(t *testing.T) {
	cfg, err := configs.Load("site.yaml", []byte(`
zones: [{name: hq, primary: true}, {name: east}, {name: north}]
nodes:
  - {name: fd-hq-b, zone: hq, listeners: [{kind: launch, address: "127.9.1.2:9443"}]}
  - {name: fd-hq-a, zone: hq, listeners: [{kind: launch, address: "127.9.1.1:9443"}]}
  - {name: fd-east, zone: east, listeners: [{kind: launch, address: "127.9.2.1:9443"}]}
  - {name: ns-east, zone: east, listeners: [{kind: dns, address: "127.9.2.2:53"}]}
groups: [{name: g}]
machines:
  - {name: hq-2, address: 127.9.1.9, zone: hq, group: g}
  - {name: hq-1, address: 127.9.1.8, zone: hq, group: g}
  - {name: north-1, address: 127.9.4.9, zone: north, group: g, max_sessions: 4}
  - {name: east-1, address: 127.9.2.9, zone: east, group: g}
`))
	if err != nil {
		t.Fatal(err)
	}
	plan := store.OutagePlan(cfg)
	want := map[string]string{
		"hq-1":    "[fd-hq-a fd-hq-b] max 1 offset 0",
		"hq-2":    "[fd-hq-a fd-hq-b] max 1 offset 1",
		"north-1": "[fd-hq-a fd-hq-b] max 4 offset 2", // no node in north: the primary zone's
		"east-1":  "[fd-east] max 1 offset 0",         // the DNS-only node books nothing
	}
	for m, w := range want {
		p := plan[m]
		if got := fmt.Sprintf("%v max %d offset %d", p.Brokers, p.Max, p.Offset); got != w {
			t.Errorf("%s: %s, want %s", m, got, w)
		}
	}
}
