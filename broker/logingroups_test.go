package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// loginGroupsSite: engineers (home zone z2) may launch the CAD desktop; alice is listed, in
// staff (home zone z1).
var loginGroupsSite = site(`groups:
  - {name: g}
machines:
  - {name: m1, address: 10.0.1.1, zone: z1, group: g, max_sessions: 10}
  - {name: m2, address: 10.0.2.1, zone: z2, group: g, max_sessions: 10}
users:
  - {name: alice}
user_groups:
  - {name: staff, members: [alice], home_zone: z1}
  - {name: engineers, home_zone: z2}
resources:
  - {name: cad, groups: [{group: g}], entitled: {user_groups: [engineers]}}
  - {name: desktop, groups: [{group: g}], entitled: {everyone: true}}
`)

// Groups a login vouches for (an identity provider's claim) count as the user's: a user the
// configuration does not list launches through them, with their home zone; a listed user
// gains their entitlements; groups the site does not have are ignored, and a login with none
// of the site's is no user of it.
func TestLoginGroups(t *testing.T) {
	cases := []struct {
		name     string
		user     string
		groups   []string
		resource string
		err      error  // nil: a new session
		machine  string // the machine chosen, with no location zone (the home zone decides)
		trace    string
	}{
		{"an unlisted user in engineers launches CAD in the group's home zone", "bob", []string{"engineers"}, "cad", nil, "m2", "home zone z2 (user group engineers)"},
		{"an unlisted user's groups give everyone's resources too", "bob", []string{"engineers", "unknown-group"}, "desktop", nil, "m2", "user groups from the login: engineers, unknown-group"},
		{"a listed user gains a group's entitlement", "alice", []string{"engineers"}, "cad", nil, "", "user alice"},
		{"a listed user without it is not entitled", "alice", nil, "cad", broker.ErrNotEntitled, "", ""},
		{"an unlisted user with none of the site's groups is no user", "mallory", []string{"wheel"}, "desktop", broker.ErrUnknownUser, "", ""},
		{"nor is one with no groups", "mallory", nil, "desktop", broker.ErrUnknownUser, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, loginGroupsSite)
			d, err := e.b.Launch(context.Background(), broker.LaunchRequest{User: tc.user, Groups: tc.groups, Resource: tc.resource, Endpoint: "pc"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.err != nil {
				if d.Outcome != broker.OutcomeDenied || !errors.Is(d.Err, tc.err) {
					t.Fatalf("got %s; want denied with %v", dump(d), tc.err)
				}
				return
			}
			if d.Outcome != broker.OutcomeNew {
				t.Fatalf("got %s; want a new session", dump(d))
			}
			if tc.machine != "" && d.Machine != tc.machine {
				t.Fatalf("machine %s, want %s\n%s", d.Machine, tc.machine, dump(d))
			}
			if !strings.Contains(strings.Join(d.Trace, "\n"), tc.trace) {
				t.Fatalf("the trace lacks %q:\n%s", tc.trace, dump(d))
			}
		})
	}
}
