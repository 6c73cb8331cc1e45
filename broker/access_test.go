package broker_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
)

// accessSite: staff (alice) and contractors (carol); a desktop and a browser; rules for
// contractors' office hours in Berlin, and no browser from zone z3 or from 198.51.100.0/24.
var accessSite = site(`groups:
  - {name: g}
machines:
  - {name: m1, address: 10.0.1.1, zone: z1, group: g, max_sessions: 10}
users:
  - {name: alice}
  - {name: carol}
user_groups:
  - {name: staff, members: [alice]}
  - {name: contractors, members: [carol]}
resources:
  - {name: desktop, groups: [{group: g}], entitled: {everyone: true}}
  - {name: browser, kind: app, groups: [{group: g}], entitled: {everyone: true}}
access_rules:
  - {name: contractors-office-hours, action: allow, user_groups: [contractors], days: [mon, tue, wed, thu, fri], hours: "08:00-18:00", time_zone: Europe/Berlin}
  - {name: contractors-otherwise, action: deny, user_groups: [contractors]}
  - {name: no-browser-from-z3, action: deny, everyone: true, resources: [browser], zones: [z3], client_ranges: [198.51.100.0/24, "::ffff:203.0.113.0/120"]}
`)

// The first access rule that matches decides; none matching allows; the trace or the
// denial names the rule.
func TestAccessRules(t *testing.T) {
	thu := time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC) // a Thursday; Berlin is UTC+1 in January
	cases := []struct {
		name     string
		user     string
		resource string
		zone     string
		client   string
		at       time.Duration // after Thursday 00:00 UTC
		denied   bool
		rule     string // in the reason (denied) or the trace (allowed); "" for no rule
	}{
		{"a contractor in office hours is allowed by the rule for them", "carol", "desktop", "z1", "", 9 * time.Hour, false, "rule contractors-office-hours allows it"},
		{"a contractor after hours falls through to the deny rule", "carol", "desktop", "z1", "", 17 * time.Hour, true, "contractors-otherwise"},
		{"office hours are Berlin's: 07:30 UTC is 08:30 there", "carol", "desktop", "z1", "", 7*time.Hour + 30*time.Minute, false, "contractors-office-hours"},
		{"a contractor on a Saturday is denied", "carol", "desktop", "z1", "", 2*24*time.Hour + 10*time.Hour, true, "contractors-otherwise"},
		{"staff may not launch the browser from zone z3", "alice", "browser", "z3", "", 9 * time.Hour, true, "no-browser-from-z3"},
		{"nor from a client range of the rule, whatever its zone", "alice", "browser", "", "198.51.100.7", 9 * time.Hour, true, "no-browser-from-z3"},
		{"an IPv4-mapped client address is its IPv4 address", "alice", "browser", "", "::ffff:198.51.100.7", 9 * time.Hour, true, "no-browser-from-z3"},
		{"an IPv4-mapped range is the IPv4 range it means", "alice", "browser", "", "203.0.113.9", 9 * time.Hour, true, "no-browser-from-z3"},
		{"staff launch the browser from z1: no rule matches", "alice", "browser", "z1", "192.0.2.1", 9 * time.Hour, false, "no access rule matched"},
		{"staff launch the desktop from z3: the rule is for the browser only", "alice", "desktop", "z3", "", 9 * time.Hour, false, "no access rule matched"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, accessSite)
			e.clock.Advance(thu.Add(tc.at).Sub(e.clock.Now()))
			req := broker.LaunchRequest{User: tc.user, Resource: tc.resource, LocationZone: tc.zone, Endpoint: "pc"}
			if tc.client != "" {
				req.Client = netip.MustParseAddr(tc.client)
			}
			d, err := e.b.Launch(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Outcome == broker.OutcomeDenied; got != tc.denied {
				t.Fatalf("denied %v, want %v\n%s", got, tc.denied, dump(d))
			}
			if tc.denied {
				if !errors.Is(d.Err, broker.ErrAccessDenied) || !strings.Contains(d.Reason, tc.rule) {
					t.Fatalf("err %v, reason %q; want %v naming %s", d.Err, d.Reason, broker.ErrAccessDenied, tc.rule)
				}
				return
			}
			if !strings.Contains(strings.Join(d.Trace, "\n"), tc.rule) {
				t.Fatalf("the trace does not say %q:\n%s", tc.rule, dump(d))
			}
		})
	}
}

// A reconnect is a launch: after hours the contractor's own disconnected session is not
// handed back either, and it stays for the morning.
func TestAccessRulesApplyToReconnects(t *testing.T) {
	e := newEnv(t, accessSite)
	e.clock.Advance(time.Hour) // Thursday 10:00 in Berlin
	d := e.launch("carol", "desktop", "z1", "pc")
	if d.Outcome != broker.OutcomeNew {
		t.Fatalf("the first launch: %s", dump(d))
	}
	e.connect(d.Session)
	e.disconnect(d.Session)
	e.clock.Advance(9 * time.Hour) // 19:00 in Berlin
	if d := e.launch("carol", "desktop", "z1", "pc"); d.Outcome != broker.OutcomeDenied || !errors.Is(d.Err, broker.ErrAccessDenied) {
		t.Fatalf("the reconnect after hours: %s", dump(d))
	}
	if s, ok := e.b.Session(d.Session); !ok || s.State != broker.StateDisconnected {
		t.Fatalf("the session after the denied reconnect: %+v, %v; want it kept, disconnected", s, ok)
	}
}

// An allow rule's factors must all be in the login: a launch the rule matches without one is
// denied, naming the rule and what the login lacks; with them all it is allowed, and the
// trace says so. A rule whose other conditions do not match asks nothing.
func TestAccessRulesRequireFactors(t *testing.T) {
	factorSite := site(`site:
  auth: {totp_file: totp-secrets}
groups:
  - {name: g}
machines:
  - {name: m1, address: 10.0.1.1, zone: z1, group: g, max_sessions: 10}
users:
  - {name: alice}
  - {name: carol}
user_groups:
  - {name: staff, members: [alice]}
resources:
  - {name: desktop, groups: [{group: g}], entitled: {everyone: true}}
access_rules:
  - {name: staff-two-factors, action: allow, user_groups: [staff], factors: [password, totp]}
`)
	cases := []struct {
		name    string
		user    string
		factors []string
		denied  bool
		want    string
	}{
		{"a password alone is denied by the rule, which names what lacks", "alice", []string{"password"}, true,
			`access rule "staff-two-factors" (user group staff) requires the login factors password, totp: the login has password, lacks totp`},
		{"a login of no factor lacks both", "alice", nil, true, "the login has none, lacks password, totp"},
		{"password and code are allowed", "alice", []string{"password", "totp"}, false, "the login has the factors it requires: password, totp"},
		{"more factors than the rule asks are fine", "alice", []string{"certificate", "password", "totp"}, false, "rule staff-two-factors allows it"},
		{"a user the rule is not for is asked nothing", "carol", []string{"password"}, false, "no access rule matched"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, factorSite)
			d, err := e.b.Launch(context.Background(), broker.LaunchRequest{User: tc.user, Resource: "desktop", LocationZone: "z1", Endpoint: "pc", Factors: tc.factors})
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Outcome == broker.OutcomeDenied; got != tc.denied {
				t.Fatalf("denied %v, want %v\n%s", got, tc.denied, dump(d))
			}
			text := strings.Join(d.Trace, "\n")
			if tc.denied {
				if !errors.Is(d.Err, broker.ErrAccessDenied) {
					t.Fatalf("err %v, want %v", d.Err, broker.ErrAccessDenied)
				}
				text = d.Reason
			}
			if !strings.Contains(text, tc.want) {
				t.Fatalf("got %q, want it to say %q", text, tc.want)
			}
		})
	}
}
