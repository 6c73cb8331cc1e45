package configs

import (
	"testing"
	"time"
)

// site.auth.radius: absent keys take their defaults, retries 0 is kept (no resend), and the
// role covers the users it names, the members of the groups it names, or everyone.
func TestRADIUSDefaultsAndCover(t *testing.T) {
	const base = "zones: [{name: hq, primary: true}]\nusers: [{name: alice}, {name: bob}, {name: carol}]\nuser_groups: [{name: staff, members: [bob]}]\n"
	for _, tt := range []struct {
		name, radius string
		role         string
		timeout      time.Duration
		retries      int
		nas          string
		requireMA    bool
		covered      []string
	}{
		{"absent keys take their defaults and cover everyone", `{servers: ["127.0.0.1:1812"], secret_file: s}`,
			RADIUSRoleFactor, DefaultRADIUSTimeout, DefaultRADIUSRetries, "lab", true, []string{"alice", "bob", "carol"}},
		{"retries 0 is kept, and a site may take unsigned answers", `{servers: ["127.0.0.1:1812"], secret_file: s, retries: 0, timeout: 500ms, require_message_authenticator: false, nas_identifier: fd}`,
			RADIUSRoleFactor, 500 * time.Millisecond, 0, "fd", false, []string{"alice", "bob", "carol"}},
		{"users and user groups cover their users and members only", `{servers: ["127.0.0.1:1812"], secret_file: s, role: primary, users: [alice], user_groups: [staff]}`,
			RADIUSRolePrimary, DefaultRADIUSTimeout, DefaultRADIUSRetries, "lab", true, []string{"alice", "bob"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("t.yaml", []byte("site: {name: lab, auth: {radius: "+tt.radius+"}}\n"+base))
			if err != nil {
				t.Fatal(err)
			}
			r := c.Site.Auth.RADIUS
			if r.Role != tt.role || r.Timeout.D() != tt.timeout || *r.Retries != tt.retries || r.NASIdentifier != tt.nas || *r.RequireMessageAuthenticator != tt.requireMA {
				t.Fatalf("role %s, timeout %s, retries %d, nas %q, require MA %v; want %s, %s, %d, %q, %v",
					r.Role, r.Timeout, *r.Retries, r.NASIdentifier, *r.RequireMessageAuthenticator, tt.role, tt.timeout, tt.retries, tt.nas, tt.requireMA)
			}
			var got []string
			for _, u := range c.Users {
				if r.Covers(c, u.Name) {
					got = append(got, u.Name)
				}
			}
			if len(got) != len(tt.covered) {
				t.Fatalf("covers %v, want %v", got, tt.covered)
			}
			for i := range got {
				if got[i] != tt.covered[i] {
					t.Fatalf("covers %v, want %v", got, tt.covered)
				}
			}
		})
	}
	c, err := Load("t.yaml", []byte(base))
	if err != nil || c.Site.Auth.RADIUS != nil {
		t.Fatalf("a site without site.auth.radius: %v, %+v; want no RADIUS", err, c.Site.Auth.RADIUS)
	}
}
