package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// TestCandidates follows seed 001: a VDA registers with a controller in its own zone, else in
// the primary zone, never in another satellite zone.
func TestCandidates(t *testing.T) {
	site := `
zones: [{name: hq, primary: true}, {name: east}, {name: west}, {name: north}]
nodes:
  - {name: fd-hq, zone: hq, listeners: [{kind: launch, address: "127.9.1.1:9443"}]}
  - {name: fd-east, zone: east, listeners: [{kind: launch, address: "127.9.2.1:9443"}]}
  - {name: fd-west, zone: west, listeners: [{kind: launch, address: "127.9.3.1:9443"}]}
  - {name: ns-north, zone: north, listeners: [{kind: dns, address: "127.9.4.1:53"}]}
groups: [{name: g}]
machines:
  - {name: m-east, address: 127.9.2.9, zone: east, group: g}
  - {name: m-hq, address: 127.9.1.9, zone: hq, group: g}
  - {name: m-north, address: 127.9.4.9, zone: north, group: g}
`
	cfg, err := configs.Load("site.yaml", []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, machine string
		want          []string
	}{
		{"a satellite machine tries its own zone first, then the primary zone, never another satellite", "m-east", []string{"fd-east", "fd-hq"}},
		{"a primary-zone machine tries the primary zone only", "m-hq", []string{"fd-hq"}},
		{"a satellite zone without a front door falls back to the primary zone, not to a sibling", "m-north", []string{"fd-hq"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doors, err := Candidates(cfg, tt.machine)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range doors {
				got = append(got, d.Node)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Candidates(%s) = %v, want %v", tt.machine, got, tt.want)
			}
		})
	}
	if _, err := Candidates(cfg, "nope"); err == nil {
		t.Error("an unknown machine has candidates")
	}
	cfg.Nodes = cfg.Nodes[1:3] // no primary-zone front door left
	if _, err := Candidates(cfg, "m-north"); !errors.Is(err, ErrNoFrontDoor) {
		t.Errorf("no front door: %v, want ErrNoFrontDoor", err)
	}
}

func TestHostLoadIsAPercentage(t *testing.T) {
	cpu, mem := HostLoad()
	if cpu < 0 || cpu > 100 || mem < 0 || mem > 100 {
		t.Errorf("HostLoad() = %d, %d; want percentages", cpu, mem)
	}
}
