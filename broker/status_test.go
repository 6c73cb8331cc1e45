package broker_test

import (
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// Machines tells each machine's evaluators as the load index uses them, the index, and why
// it takes no new session; an evaluator its group does not use is -1.
func TestMachinesShowTheirEvaluators(t *testing.T) {
	e := newEnv(t, rdsSite("horizontal", 2, "  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 4}\n"+
		"  - {name: b, address: 10.0.0.2, zone: z1, group: rds, max_sessions: 1}\n"))
	e.launch("u", "desk", "", "ep") // on a or b: a tie, broken by a stable hash
	if err := e.b.ReportLoad(t.Context(), "a", 40, 20); err != nil {
		t.Fatal(err)
	}
	if err := e.b.SetMaintenance(t.Context(), "b", true); err != nil {
		t.Fatal(err)
	}
	ms := e.b.Machines()
	if len(ms) != 2 || ms[0].Name != "a" || ms[1].Name != "b" {
		t.Fatalf("machines %+v, want a and b by name", ms)
	}
	a, b := ms[0], ms[1]
	if a.Sessions+b.Sessions != 1 {
		t.Fatalf("sessions a %d b %d, want one in all", a.Sessions, b.Sessions)
	}
	load, _, _ := e.b.MachineLoad("a")
	if a.LoadIndex != load || a.Evaluators.CPU != 4000 || a.Evaluators.Memory != 2000 || a.Reported.IsZero() {
		t.Fatalf("a: %+v, want index %d, cpu 4000, memory 2000, a report time", a, load)
	}
	if a.Sessions == 1 && (a.Evaluators.Sessions != 2500 || a.Evaluators.Logons != 5000 || a.Pending != 1) {
		t.Fatalf("a with the pending session: %+v, want sessions 2500 (1 of 4), logons 5000 (1 of 2)", a.Evaluators)
	}
	if !b.Maintenance || b.Unavailable != "maintenance" || b.MaxSessions != 1 {
		t.Fatalf("b: %+v, want in maintenance", b)
	}

	// A group without CPU, memory and logon evaluators: -1 each.
	e = newEnv(t, site("groups:\n  - {name: rds, zone_preferences: [], load: {cpu: false, memory: false, max_logons: 0}}",
		"machines:\n  - {name: a, address: 10.0.0.1, zone: z1, group: rds, max_sessions: 2}\n", manyUsers(1),
		"resources:\n  - {name: desk, groups: [{group: rds}], entitled: {everyone: true}}"))
	if ev := e.b.Machines()[0].Evaluators; ev != (broker.Evaluators{Sessions: 0, CPU: -1, Memory: -1, Logons: -1}) {
		t.Fatalf("evaluators %+v, want sessions only", ev)
	}
}
