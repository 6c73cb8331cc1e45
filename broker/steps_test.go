package broker_test

import (
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// Two groups publishing one desktop; hi has priority 1 and is listed second to show that
// priority, not list order, decides. Two single-session machines per group per zone z1, z3.
func twoGroups(reconnection string) string {
	g := "groups:\n  - {name: hi}\n  - {name: lo}\n"
	if reconnection != "" {
		g = "groups:\n  - {name: hi, session_reconnection: " + reconnection + "}\n  - {name: lo, session_reconnection: " + reconnection + "}\n"
	}
	return site(g, `machines:
  - {name: hi1, address: 10.0.1.1, zone: z1, group: hi}
  - {name: hi3, address: 10.0.3.1, zone: z3, group: hi}
  - {name: lo1, address: 10.0.1.2, zone: z1, group: lo}
  - {name: lo3, address: 10.0.3.2, zone: z3, group: lo}
`, users, `resources:
  - {name: desk, groups: [{group: lo, priority: 2}, {group: hi, priority: 1}], entitled: {everyone: true}}
`)
}

func sess(id, machine string, st broker.State, endpoint string) broker.Session {
	return broker.Session{ID: id, User: "homer", Resource: "desk", Machine: machine, State: st, Endpoint: endpoint}
}

func TestLaunchOrder(t *testing.T) {
	req := broker.LaunchRequest{User: "homer", Resource: "desk", LocationZone: "z1", Endpoint: "laptop"}
	noreq := broker.LaunchRequest{User: "nomad", Resource: "desk", Endpoint: "laptop"}
	C, D := broker.StateConnected, broker.StateDisconnected
	runCases(t, []launchCase{
		{name: "1. an existing session in the preferred zone suitable for reconnection is used",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("c3", "hi3", C, "laptop"), sess("d1", "hi1", D, "laptop")},
			want: want{outcome: broker.OutcomeReconnect, step: 1, pz: "z3", src: "UserHome", machine: "hi3"}},
		{name: "2. a disconnected session in any zone suitable for reconnection is used before a new session in the preferred zone",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "desk-pc")},
			want: want{outcome: broker.OutcomeReconnect, step: 2, pz: "z3", src: "UserHome", machine: "hi1"}},
		{name: "3. an available VDA in the preferred zone gets a new session before a connected session elsewhere",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("c1", "hi1", C, "desk-pc")},
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "hi3"}},
		{name: "4. a connected session in any zone is used, stealing it to the user's current endpoint",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("c1", "hi1", C, "desk-pc")}, machines: full("hi3", "lo3"),
			want: want{outcome: broker.OutcomeReconnect, step: 4, pz: "z3", src: "UserHome", machine: "hi1", stolen: true,
				trace: []string{`moved from endpoint "desk-pc" to "laptop"`}}},
		{name: "5. an available VDA in any zone gets a new session",
			yaml: twoGroups(""), req: req, machines: full("hi3", "lo3"),
			want: want{outcome: broker.OutcomeNew, step: 5, pz: "z3", src: "UserHome", machine: "hi1"}},
		{name: "each step is attempted in each delivery group by priority: 1a, 1b, 2a, 2b, 3a",
			yaml: twoGroups(""), req: req, machines: full("hi3"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "lo3",
				trace: []string{"step 1a hi", "step 1b lo", "step 2a hi", "step 2b lo", "step 3a hi", "step 3b lo", "choice: new session on lo3"}}},
		{name: "1b: a session in the preferred zone of the lower priority group beats a disconnected session of the higher one",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "laptop"), sess("c3", "lo3", C, "laptop")},
			want: want{outcome: broker.OutcomeReconnect, step: 1, pz: "z3", src: "UserHome", machine: "lo3", trace: []string{"step 1a hi: no session in z3"}}},
		{name: "2b: a disconnected session in the lower priority group beats a new session in the higher one",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("d1", "lo1", D, "laptop")},
			want: want{outcome: broker.OutcomeReconnect, step: 2, pz: "z3", src: "UserHome", machine: "lo1"}},
		{name: "with no preferred zone, an existing session is reconnected",
			yaml: twoGroups(""), req: noreq, sessions: []broker.Session{{ID: "c", User: "nomad", Resource: "desk", Machine: "lo3", State: C, Endpoint: "laptop"}},
			want: want{outcome: broker.OutcomeReconnect, step: 0, machine: "lo3"}},
		{name: "with no preferred zone and no session, load is balanced over all machines of the first group",
			yaml: twoGroups(""), req: noreq, machines: []broker.MachineState{{Name: "hi1", CPU: 30}},
			want: want{outcome: broker.OutcomeNew, step: 0, machine: "hi3"}},
		{name: "SameEndpointOnly: a disconnected session of another endpoint is ignored and the launch continues with step 3",
			yaml: twoGroups("same_endpoint_only"), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "desk-pc")},
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "hi3",
				trace: []string{`step 2a hi: skipped disconnected session d1 on hi1: endpoint "desk-pc" is not "laptop" (same_endpoint_only)`}}},
		{name: "SameEndpointOnly: a disconnected session of the same endpoint is reconnected",
			yaml: twoGroups("same_endpoint_only"), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "laptop")},
			want: want{outcome: broker.OutcomeReconnect, step: 2, pz: "z3", src: "UserHome", machine: "hi1"}},
		{name: "DisconnectedOnly: a connected session is not stolen; a new session goes anywhere",
			yaml: twoGroups("disconnected_only"), req: req, sessions: []broker.Session{sess("c1", "hi1", C, "desk-pc")}, machines: full("hi3", "lo3"),
			want: want{outcome: broker.OutcomeNew, step: 5, pz: "z3", src: "UserHome", machine: "lo1",
				trace: []string{"step 4a hi: skipped connected session c1 on hi1: connected, and group hi reconnects disconnected sessions only", "step 5a hi", "step 5b lo"}}},
		{name: "maintenance (drain) accepts reconnects",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "laptop")},
			machines: []broker.MachineState{{Name: "hi1", Maintenance: ptr(true)}},
			want:     want{outcome: broker.OutcomeReconnect, step: 2, pz: "z3", src: "UserHome", machine: "hi1"}},
		{name: "maintenance (drain) takes no new session",
			yaml: twoGroups(""), req: req, machines: []broker.MachineState{{Name: "hi3", Maintenance: ptr(true)}},
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "lo3", trace: []string{"skipped hi3 (maintenance)"}}},
		{name: "a machine marked down is not available, not even for reconnection",
			yaml: twoGroups(""), req: req, sessions: []broker.Session{sess("d1", "hi1", D, "laptop")}, machines: down("hi1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "hi3", trace: []string{"skipped disconnected session d1 on hi1: machine is down"}}},
		{name: "everything full is a denial with a reason",
			yaml: twoGroups(""), req: req, machines: full("hi1", "hi3", "lo1", "lo3"),
			want: want{outcome: broker.OutcomeDenied, pz: "z3", src: "UserHome", err: broker.ErrNoCapacity,
				trace: []string{"step 5b lo: any zone: 0 of 2 machines available; skipped lo1 (load index 10000), lo3 (load index 10000)", "denied: no session to reconnect and no available machine"}}},
	})
}

func ptr[T any](v T) *T { return &v }

func TestBadInput(t *testing.T) {
	y := site("groups:\n  - {name: pool}\n  - {name: empty}", poolMachines, users,
		"user_groups:\n  - {name: staff, members: [homer]}",
		`resources:
  - {name: desk, groups: [{group: pool}], entitled: {user_groups: [staff]}}
  - {name: hollow, groups: [{group: empty}], entitled: {everyone: true}}
`)
	for _, tc := range []struct {
		name     string
		user, rs string
		err      error
		reason   string
	}{
		{"an unknown user is denied", "mallory", "desk", broker.ErrUnknownUser, `user "mallory" is not a user of the site`},
		{"an unknown resource is denied", "homer", "nope", broker.ErrUnknownResource, `resource "nope" is not published`},
		{"a user not entitled is denied", "nomad", "desk", broker.ErrNotEntitled, `user "nomad" is not entitled to "desk"`},
		{"a resource with no machines is denied", "homer", "hollow", broker.ErrNoMachines, `resource "hollow" has no machines`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, y)
			d := e.launch(tc.user, tc.rs, "z1", "ep")
			if d.Outcome != broker.OutcomeDenied || d.Err != tc.err || d.Reason != tc.reason || !traceHas(d, "denied: "+tc.reason) {
				t.Fatalf("got %s\nwant denied %v %q", dump(d), tc.err, tc.reason)
			}
		})
	}
	t.Run("a home-zone-only launch whose home zone no longer exists is denied", func(t *testing.T) {
		cfg := loadConfig(t, poolWith(""))
		for i := range cfg.Resources {
			if cfg.Resources[i].Name == "app-only" {
				cfg.Resources[i].HomeZone = "gone"
			}
		}
		b, err := broker.New(t.Context(), cfg, newMem(), newClock().Now)
		if err != nil {
			t.Fatal(err)
		}
		d := b.Decide(broker.LaunchRequest{User: "homer", Resource: "app-only", LocationZone: "z1"})
		check(t, d, want{outcome: broker.OutcomeDenied, pz: "gone", src: "ApplicationHome", err: broker.ErrZoneMissing,
			trace: []string{"zone gone does not exist in the site"}})
	})
	t.Run("a location zone the site does not have is ignored", func(t *testing.T) {
		d := newEnv(t, poolWith("")).launch("nomad", "desk", "atlantis", "ep")
		check(t, d, want{outcome: broker.OutcomeNew, step: 0, trace: []string{`location zone "atlantis" is not a zone of the site: ignored`}})
	})
}

// Priority 0 is the highest, as in Citrix: it is kept, not replaced by the list position
// (which would put the group listed first, here lo at 1, before it).
func TestPriorityZeroIsTheHighest(t *testing.T) {
	y := strings.Replace(twoGroups(""), "[{group: lo, priority: 2}, {group: hi, priority: 1}]", "[{group: lo}, {group: hi, priority: 0}]", 1)
	req := broker.LaunchRequest{User: "homer", Resource: "desk", LocationZone: "z1", Endpoint: "laptop"}
	runCases(t, []launchCase{{name: "the group of priority 0 is tried first", yaml: y, req: req,
		want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "hi3"}}})
}
