package broker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// A pool with one single-session machine per zone; users with and without a home zone.
const (
	poolGroup    = "groups:\n  - {name: pool}\n"
	poolMachines = `machines:
  - {name: m1, address: 10.0.1.1, zone: z1, group: pool}
  - {name: m2, address: 10.0.2.1, zone: z2, group: pool}
  - {name: m3, address: 10.0.3.1, zone: z3, group: pool}
`
	users = `users:
  - {name: homer, home_zone: z3}
  - {name: nomad}
`
	resources = `resources:
  - {name: desk, groups: [{group: pool}], entitled: {everyone: true}}
  - {name: app, kind: app, home_zone: z2, groups: [{group: pool}], entitled: {everyone: true}}
  - {name: app-only, kind: app, home_zone: z2, home_zone_only: true, groups: [{group: pool}], entitled: {everyone: true}}
  - {name: browser, kind: app, ignore_user_home_zone: true, groups: [{group: pool}], entitled: {everyone: true}}
`
)

func poolWith(prefs string) string {
	g := poolGroup
	if prefs != "" {
		g = "groups:\n  - {name: pool, zone_preferences: " + prefs + "}\n"
	}
	return site(g, poolMachines, users, resources)
}

type want struct {
	outcome broker.Outcome
	step    int
	pz, src string
	machine string
	err     error
	stolen  bool
	trace   []string // substrings that must appear, in this order
}

type launchCase struct {
	name     string // the seed's sentence the case checks
	yaml     string
	sessions []broker.Session
	machines []broker.MachineState
	req      broker.LaunchRequest
	want     want
}

func full(names ...string) []broker.MachineState {
	var ms []broker.MachineState
	for _, n := range names {
		ms = append(ms, broker.MachineState{Name: n, CPU: 100})
	}
	return ms
}

func down(names ...string) []broker.MachineState {
	var ms []broker.MachineState
	for _, n := range names {
		ms = append(ms, broker.MachineState{Name: n, Down: true})
	}
	return ms
}

func runCases(t *testing.T, cases []launchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvState(t, tc.yaml, tc.sessions, tc.machines)
			before := e.b.Decide(tc.req)
			d, err := e.b.Launch(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			check(t, d, tc.want)
			if before.Outcome != d.Outcome || before.Machine != d.Machine || before.Step != d.Step {
				t.Errorf("Decide and Launch disagree:\nDecide: %s\nLaunch: %s", dump(before), dump(d))
			}
		})
	}
}

func check(t *testing.T, d broker.Decision, w want) {
	t.Helper()
	bad := d.Outcome != w.outcome || d.Step != w.step || d.PreferredZone != w.pz || d.PreferredZoneSource != w.src ||
		(w.machine != "" && d.Machine != w.machine) || d.Stolen != w.stolen
	if w.err != nil && !errors.Is(d.Err, w.err) {
		bad = true
	}
	if w.err == nil && d.Err != nil {
		bad = true
	}
	at := 0
	for _, sub := range w.trace {
		i := slices.IndexFunc(d.Trace[at:], func(l string) bool { return strings.Contains(l, sub) })
		if i < 0 {
			t.Errorf("trace lacks %q (after line %d)", sub, at)
			continue
		}
		at += i
	}
	if bad {
		t.Errorf("got  %s\nwant outcome=%s step=%d pz=%s(%s) machine=%s err=%v stolen=%v", dump(d), w.outcome, w.step, w.pz, w.src, w.machine, w.err, w.stolen)
	} else if t.Failed() {
		t.Log(dump(d))
	}
}

func TestPreferredZone(t *testing.T) {
	req := func(user, res, loc string) broker.LaunchRequest {
		return broker.LaunchRequest{User: user, Resource: res, LocationZone: loc, Endpoint: "ep"}
	}
	runCases(t, []launchCase{
		{name: "for application launches, if the application has a home zone then this is the preferred zone",
			yaml: poolWith(""), req: req("homer", "app", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z2", src: "ApplicationHome", machine: "m2"}},
		{name: "otherwise, if the user has a home zone then this is the preferred zone",
			yaml: poolWith(""), req: req("homer", "desk", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "m3"}},
		{name: "otherwise, if a user location zone is provided then this is the preferred zone",
			yaml: poolWith(""), req: req("nomad", "desk", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z1", src: "UserLocation", machine: "m1"}},
		{name: "if no zones are available then there's no preferred zone and the launch continues as before",
			yaml: poolWith(""), req: req("nomad", "desk", ""),
			want: want{outcome: broker.OutcomeNew, step: 0, trace: []string{"no preferred zone", "balance over all machines", "any zone: 3 of 3"}}},
		{name: "the order can be altered to prefer the user's location over their home zone",
			yaml: poolWith("[ApplicationHome, UserLocation, UserHome]"), req: req("homer", "desk", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z1", src: "UserLocation", machine: "m1"}},
		{name: "{UserHome} always uses the user's home zone and disregards application home or user location zones",
			yaml: poolWith("[UserHome]"), req: req("homer", "app", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "m3"}},
		{name: "{UserHome} for a user without a home zone gives no preferred zone",
			yaml: poolWith("[UserHome]"), req: req("nomad", "app", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 0, trace: []string{"→ no preferred zone"}}},
		{name: "an empty order disables zone preference for that delivery group",
			yaml: poolWith("[]"), req: req("homer", "app", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 0, trace: []string{"zone preference off", "no preferred zone"}}},
		{name: "only the selected preferred zone plays a part: the user's home zone is ignored when the app home zone is full",
			yaml: poolWith(""), req: req("homer", "app", "z1"),
			machines: append(full("m2"), broker.MachineState{Name: "m3", CPU: 50}),
			want: want{outcome: broker.OutcomeNew, step: 5, pz: "z2", src: "ApplicationHome", machine: "m1",
				trace: []string{"step 3a pool: zone z2: 0 of 1", "step 5a pool: any zone: 2 of 3", "least loaded: m1"}}},
		{name: "HomeZoneOnly: if the preferred zone is the application's home zone the launch must be satisfied from that zone or fail",
			yaml: poolWith(""), req: req("homer", "app-only", "z1"), machines: full("m2"),
			sessions: []broker.Session{{ID: "d1", User: "homer", Resource: "app-only", Machine: "m1", State: broker.StateDisconnected, Endpoint: "ep"}},
			want: want{outcome: broker.OutcomeDenied, step: 0, pz: "z2", src: "ApplicationHome", err: broker.ErrNoCapacity,
				trace: []string{"home_zone_only: only steps 1 and 3", "step 2a pool: skipped: launch must stay in z2", "step 3a", "step 4a pool: skipped", "step 5a pool: skipped", "denied"}}},
		{name: "HomeZoneOnly applies if, and only if, the preferred zone is the application's home zone",
			yaml: poolWith("[UserHome, ApplicationHome]"), req: req("homer", "app-only", "z1"), machines: full("m3"),
			want: want{outcome: broker.OutcomeNew, step: 5, pz: "z3", src: "UserHome"}},
		{name: "IgnoreUserHomeZone: the user's home zone is ignored when selecting the preferred zone",
			yaml: poolWith(""), req: req("homer", "browser", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z1", src: "UserLocation", machine: "m1",
				trace: []string{"user home zone z3 ignored (ignore_user_home_zone)"}}},
		{name: "IgnoreUserHomeZone only works with the default order",
			yaml: poolWith("[UserHome, UserLocation]"), req: req("homer", "browser", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 3, pz: "z3", src: "UserHome", machine: "m3",
				trace: []string{"ignore_user_home_zone has no effect"}}},
		{name: "UserHomeOnly: if the preferred zone is the user's home zone the launch must be satisfied from that zone or fail",
			yaml: poolWith("[ApplicationHome, UserHomeOnly, UserLocation]"), req: req("homer", "desk", "z1"), machines: full("m3"),
			want: want{outcome: broker.OutcomeDenied, pz: "z3", src: "UserHome", err: broker.ErrNoCapacity,
				trace: []string{"UserHomeOnly: only steps 1 and 3", "step 5a pool: skipped"}}},
		{name: "UserHomeOnly has no effect for a user without a configured home zone",
			yaml: poolWith("[ApplicationHome, UserHomeOnly, UserLocation]"), req: req("nomad", "desk", "z1"), machines: full("m1"),
			want: want{outcome: broker.OutcomeNew, step: 5, pz: "z1", src: "UserLocation"}},
		{name: "zone preference does not apply to private/assigned desktops",
			yaml: site("groups:\n  - {name: pool}\n  - {name: private, kind: assigned}", poolMachines,
				"  - {name: pc-homer, address: 10.0.2.9, zone: z2, group: private, assigned_user: homer}", users,
				"resources:\n  - {name: mine, groups: [{group: private}], entitled: {everyone: true}}"),
			req:  req("homer", "mine", "z1"),
			want: want{outcome: broker.OutcomeNew, step: 0, machine: "pc-homer", trace: []string{"assigned desktop: zone preference does not apply"}}},
		{name: "an assigned desktop is denied to a user who has no machine in the group",
			yaml: site("groups:\n  - {name: pool}\n  - {name: private, kind: assigned}", poolMachines,
				"  - {name: pc-homer, address: 10.0.2.9, zone: z2, group: private, assigned_user: homer}", users,
				"resources:\n  - {name: mine, groups: [{group: private}], entitled: {everyone: true}}"),
			req:  req("nomad", "mine", "z1"),
			want: want{outcome: broker.OutcomeDenied, err: broker.ErrNoMachines}},
	})
}

func TestUserHomeZone(t *testing.T) {
	cfg := func(userGroups string) string {
		return site(poolGroup, poolMachines, `users:
  - {name: own, home_zone: z1}
  - {name: one}
  - {name: several}
`, "user_groups:\n"+userGroups, resources)
	}
	groups := `  - {name: g2, members: [own, one, several], home_zone: z2}
  - {name: g3, members: [own, several], home_zone: z3}
  - {name: plain, members: [one]}
`
	t.Run("a user account's own home zone wins over its groups' home zones", func(t *testing.T) {
		d := newEnv(t, cfg(groups)).launch("own", "desk", "", "ep")
		check(t, d, want{outcome: broker.OutcomeNew, step: 3, pz: "z1", src: "UserHome", trace: []string{"home zone z1 (account)"}})
	})
	t.Run("without its own, exactly one group's home zone is the user's home zone", func(t *testing.T) {
		d := newEnv(t, cfg(groups)).launch("one", "desk", "", "ep")
		check(t, d, want{outcome: broker.OutcomeNew, step: 3, pz: "z2", src: "UserHome", trace: []string{"home zone z2 (user group g2)"}})
	})
	t.Run("with several groups of different zones the choice is deterministic and explained", func(t *testing.T) {
		first := newEnv(t, cfg(groups)).launch("several", "desk", "", "ep")
		check(t, first, want{outcome: broker.OutcomeNew, step: 3, pz: first.PreferredZone, src: "UserHome", trace: []string{"chosen by stable hash among z2 (g2), z3 (g3)"}})
		for i := 0; i < 5; i++ { // a restart builds a new broker: same answer
			again := newEnv(t, cfg(groups)).launch("several", "desk", "", "ep")
			if again.PreferredZone != first.PreferredZone {
				t.Fatalf("home zone changed across restarts: %s then %s", first.PreferredZone, again.PreferredZone)
			}
		}
		if first.PreferredZone != "z2" && first.PreferredZone != "z3" {
			t.Fatalf("home zone %q is not one of the groups'", first.PreferredZone)
		}
	})
	t.Run("the choice is re-evaluated when membership changes", func(t *testing.T) {
		// Leaving the group whose zone was chosen moves the user to the other group's zone.
		chosen := newEnv(t, cfg(groups)).launch("several", "desk", "", "ep").PreferredZone
		var left string
		if chosen == "z2" {
			left = strings.Replace(groups, "members: [own, one, several], home_zone: z2", "members: [own, one], home_zone: z2", 1)
		} else {
			left = strings.Replace(groups, "members: [own, several], home_zone: z3", "members: [own], home_zone: z3", 1)
		}
		d := newEnv(t, cfg(left)).launch("several", "desk", "", "ep")
		if d.PreferredZone == chosen || d.PreferredZone == "" {
			t.Fatalf("after leaving the group of %s the home zone is %q", chosen, d.PreferredZone)
		}
	})
	t.Run("groups that agree on one zone give that zone", func(t *testing.T) {
		same := strings.Replace(groups, "home_zone: z3", "home_zone: z2", 1)
		d := newEnv(t, cfg(same)).launch("several", "desk", "", "ep")
		check(t, d, want{outcome: broker.OutcomeNew, step: 3, pz: "z2", src: "UserHome", trace: []string{"user group g2, g3"}})
	})
}

func TestUserHomeAndUserHomeOnlyTogetherIsAConfigError(t *testing.T) {
	// "Only one of UserHome or UserHomeOnly can appear in the zone preference list."
	_, err := loadConfigErr(poolWith("[UserHome, UserHomeOnly]"))
	if err == nil || !strings.Contains(err.Error(), "UserHome and UserHomeOnly") {
		t.Fatalf("got %v, want a config error naming UserHome and UserHomeOnly", err)
	}
}
