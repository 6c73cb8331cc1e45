package broker_test

import (
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// TestLoadStaysInItsZone follows seed 003: without share_load_across_zones a node's broker
// uses the CPU and memory only of machines that report in its own zone; the others are
// placed by their sessions alone, and the trace says so. With it, the load of every zone
// counts.
func TestLoadStaysInItsZone(t *testing.T) {
	ms := "  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 10}\n" +
		"  - {name: b, address: 10.0.0.2, zone: z2, group: rds, max_sessions: 10}\n"
	// a (z1) is busy, b (z2) idle, both as their agents reported in their own zones.
	states := []broker.MachineState{
		{Name: "a", CPU: 90, Memory: 90, Reported: newClock().Now(), LoadZone: "z1"},
		{Name: "b", CPU: 5, Memory: 5, Reported: newClock().Now(), LoadZone: "z2"},
	}
	// A group that looks at CPU and memory, with no zone preference: load alone decides.
	yaml := func(share bool) string {
		s := "site: {share_load_across_zones: false}\n"
		if share {
			s = "site: {share_load_across_zones: true}\n"
		}
		return s + site("groups:\n  - {name: rds, zone_preferences: [], load: {cpu: true, memory: true}}",
			"machines:\n"+ms, manyUsers(2), "resources:\n  - {name: desk, groups: [{group: rds}], entitled: {everyone: true}}")
	}
	for _, tt := range []struct {
		name    string
		share   bool
		zone    string
		machine string
		note    string
	}{
		// At a z2 node a's CPU and memory are hidden (index 0 from its sessions) while b's
		// 5% counts: a.
		{"z2 node, load kept in its zone", false, "z2", "a", "its CPU and memory stay in zone z1 (share_load_across_zones is off)"},
		// At a z1 node it is the other way round: a at 90% and b hidden (0): b.
		{"z1 node, load kept in its zone", false, "z1", "b", "its CPU and memory stay in zone z2 (share_load_across_zones is off)"},
		// Shared: both loads count at either node: b, the idle one.
		{"z2 node, load shared", true, "z2", "b", ""},
		{"z1 node, load shared", true, "z1", "b", "with CPU and memory shared from zone z2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvStateOpts(t, yaml(tt.share), nil, states, broker.WithZone(tt.zone))
			d := e.b.Decide(broker.LaunchRequest{User: "u", Resource: "desk"})
			if d.Machine != tt.machine {
				t.Fatalf("placed on %s, want %s\n%s", d.Machine, tt.machine, dump(d))
			}
			if tt.note != "" && !traceHas(d, tt.note) {
				t.Errorf("the trace does not say which load it used (%q):\n%s", tt.note, strings.Join(d.Trace, "\n"))
			}
			if tt.note == "" && traceHas(d, "share_load_across_zones") {
				t.Errorf("the trace speaks of another zone's load for a machine of this zone:\n%s", strings.Join(d.Trace, "\n"))
			}
		})
	}
}
