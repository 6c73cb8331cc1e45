package broker_test

import (
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// Seed 002's federation: India (connecting), UK and US as India's preferred sites, EU as a
// remaining site.
func federation(res string) string {
	return `zones: [{name: india, primary: true}, {name: uk}, {name: us}, {name: eu}]
sites:
  - {name: India, zones: [india], preferred_sites: [UK, US]}
  - {name: UK, zones: [uk]}
  - {name: US, zones: [us]}
  - {name: EU, zones: [eu]}
groups: [{name: pool}]
machines:
  - {name: vda-india, address: 10.0.1.1, zone: india, group: pool}
  - {name: vda-uk, address: 10.0.2.1, zone: uk, group: pool}
  - {name: vda-us, address: 10.0.3.1, zone: us, group: pool}
  - {name: vda-eu, address: 10.0.4.1, zone: eu, group: pool}
users: [{name: priya}, {name: sam, home_site: US}]
resources:
  - {name: desk, groups: [{group: pool}], entitled: {everyone: true}, ` + res + `}
`
}

func load(pairs ...any) []broker.MachineState {
	var ms []broker.MachineState
	for i := 0; i < len(pairs); i += 2 {
		ms = append(ms, broker.MachineState{Name: pairs[i].(string), CPU: pairs[i+1].(int)})
	}
	return ms
}

func TestSiteSearch(t *testing.T) {
	priya := broker.LaunchRequest{User: "priya", Resource: "desk", LocationZone: "india", Endpoint: "ep"}
	on := "global: true, use_preferred_sites: true, load_distribution: load_index"
	for _, tc := range []struct {
		name     string
		res      string
		req      broker.LaunchRequest
		machines []broker.MachineState
		site     string
		trace    string
	}{
		{"the user's connecting site comes first", on, priya, nil, "India", "India (connecting site)"},
		{"scenario 1: no session in the current site India, the session comes from the first preferred site UK",
			on, priya, load("vda-india", 100, "vda-uk", 50, "vda-us", 50), "UK", "UK (preferred site 1, load 50%)"},
		{"scenario 2: India full and UK overloaded, the session comes from the second preferred site US",
			on, priya, load("vda-india", 100, "vda-uk", 99, "vda-us", 50), "US", "preferred site UK skipped: load 99% (load_index) is above load_threshold 98%"},
		{"a load threshold of 49 skips a site at 50%",
			on + ", load_threshold: 49", priya, load("vda-india", 100, "vda-uk", 50, "vda-us", 10, "vda-eu", 40), "US", "preferred site UK skipped"},
		{"the home site comes before the preferred sites",
			on, broker.LaunchRequest{User: "sam", Resource: "desk", LocationZone: "india"}, load("vda-india", 100), "US", "India (connecting site), US (home site), UK (preferred site 1"},
		{"the remaining sites follow, ordered by the load distribution policy",
			on, priya, load("vda-india", 100, "vda-uk", 100, "vda-us", 100, "vda-eu", 10), "EU", "EU (remaining, load 10% (load_index))"},
		{"use_preferred_sites false keeps the old order: connecting, home, then the remaining by policy",
			"global: true, load_distribution: load_index", priya, load("vda-india", 100, "vda-uk", 50, "vda-us", 50, "vda-eu", 20), "EU", "use_preferred_sites off"},
		{"without a load distribution policy the threshold is not applied",
			"global: true, use_preferred_sites: true", priya, load("vda-india", 100, "vda-uk", 99), "UK", "load_threshold needs load_distribution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvState(t, federation(tc.res), nil, tc.machines)
			d := e.launch(tc.req.User, tc.req.Resource, tc.req.LocationZone, "ep")
			if d.Outcome != broker.OutcomeNew || d.Site != tc.site || !traceHas(d, tc.trace) {
				t.Fatalf("got site %q\n%s\nwant site %s and trace %q", d.Site, dump(d), tc.site, tc.trace)
			}
		})
	}
	t.Run("an existing session is reconnected wherever it is", func(t *testing.T) {
		e := newEnvState(t, federation(on), []broker.Session{{ID: "s", User: "priya", Resource: "desk", Machine: "vda-eu", State: broker.StateDisconnected}}, nil)
		d := e.launch("priya", "desk", "india", "ep")
		if d.Outcome != broker.OutcomeReconnect || d.Site != "EU" {
			t.Fatal(dump(d))
		}
	})
	t.Run("random remaining order is stable for one clock reading", func(t *testing.T) {
		e := newEnvState(t, federation("global: true"), nil, load("vda-india", 100))
		a := e.b.Decide(priya)
		b := e.b.Decide(priya)
		if a.Site != b.Site || !strings.Contains(strings.Join(a.Trace, "\n"), "random order") {
			t.Fatalf("%s\n%s", dump(a), dump(b))
		}
	})
}
