package node

import (
	"slices"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// A site of one node holds an election of one: its node leads its zone and, as no other
// zone has a node, probes the targets of every zone, primary or not, and those of none.
func TestASiteOfOneNodeProbesEveryZone(t *testing.T) {
	cfg, err := configs.Load("one.yaml", []byte(`
site: {name: one}
zones:
  - {name: east, primary: true, ranges: [127.1.0.0/16]}
  - {name: hq, ranges: [127.2.0.0/16]}
  - {name: west, ranges: [127.3.0.0/16]}
nodes: [{name: fd, zone: hq}]
gateways:
  - {name: gw-east, zone: east, address: 127.1.0.11}
  - {name: gw-west, zone: west, address: 127.3.0.11}
groups: [{name: g, kind: shared}]
resources: [{name: desk, kind: desktop, groups: [{group: g}], entitled: {everyone: true}}]
machines:
  - {name: m-east, address: 127.1.1.1, zone: east, group: g, display_ports: [8443/tcp]}
  - {name: m-west, address: 127.3.1.1, zone: west, group: g, display_ports: [8443/tcp]}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := startNode(t, cfg, Options{})
	got := r.Probes()
	for _, want := range []string{"gw-east", "gw-west", "m-east", "m-west"} {
		if !slices.Contains(got, want) {
			t.Errorf("the node probes %v, not %s", got, want)
		}
	}
	if rev, leading := r.role.elector.Leading(); !leading || rev == 0 {
		t.Errorf("the node of a site of one leads its zone: %d, %v", rev, leading)
	}
}
