package configs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// FactorRADIUS is a login the site's RADIUS servers accepted (site.auth.radius): the
// one-time passcode sent beside the password (role factor), or the password itself (role
// primary).
const FactorRADIUS = "radius"

// The roles of site.auth.radius.
const (
	// RADIUSRoleFactor sends the one-time passcode of the X-Frontdoor-OTP header to the
	// RADIUS servers once the local password (or client certificate) checks: a second
	// factor, as RSA SecurID, Duo or an Azure MFA NPS server give.
	RADIUSRoleFactor = "factor"
	// RADIUSRolePrimary sends the password to the RADIUS servers instead of comparing it
	// with a bcrypt hash, for the users it covers that have no password_hash.
	RADIUSRolePrimary = "primary"
)

// The defaults and bounds of site.auth.radius.
const (
	// DefaultRADIUSTimeout is how long a send waits for its answer by default.
	DefaultRADIUSTimeout = 2 * time.Second
	// DefaultRADIUSRetries is how many times a request is sent again to a silent server
	// by default, before the next server is asked.
	DefaultRADIUSRetries = 1
	// MaxRADIUSRetries bounds retries.
	MaxRADIUSRetries = 5
	// MinRADIUSTimeout and MaxRADIUSTimeout bound timeout.
	MinRADIUSTimeout = 100 * time.Millisecond
	MaxRADIUSTimeout = 10 * time.Second
	// MaxRADIUSWait bounds the longest a login may wait for the RADIUS servers (every
	// server silent: servers × (1 + retries) × timeout): clients give up on a launch after
	// 10 s (frontdoor connect does), and a login that outlived them would be lost work.
	MaxRADIUSWait = 10 * time.Second
)

// RADIUS configures the site's RADIUS servers (RFC 2865), for sites that run one: as a
// second factor beside the local password, or as the primary check of the password.
// frontdoor sends Access-Request packets of PAP (User-Password) with a Message-Authenticator
// (RFC 3579), and checks every answer's Response Authenticator and Message-Authenticator
// before it believes it. Access-Challenge (a further prompt: a next tokencode, a new PIN)
// is not supported: such a login is refused with a 401 that says so.
type RADIUS struct {
	// Servers are the RADIUS servers' address:port (an IP address: the login path does
	// not wait for DNS), asked in order: the next one when a server does not answer
	// (after retries) or refuses the packets at once (port unreachable). Required.
	Servers []netip.AddrPort `yaml:"servers"`
	// SecretFile holds the shared secret of every server (the file's bytes, a trailing
	// newline dropped). It must be readable by its owner alone (mode 0600 or stricter;
	// the launch API refuses a file that others may read), and it is read again when it
	// changes. The secret never goes in the site configuration, which every node and
	// operator reads. Required.
	SecretFile string `yaml:"secret_file"`
	// Role is factor (the passcode in X-Frontdoor-OTP is the RADIUS servers' to check,
	// after the local password; the login gets the radius factor beside password) or
	// primary (the password of a covered user without a password_hash is the RADIUS
	// servers' to check; the login's factor is radius, not password, which names a bcrypt
	// check). Default: factor.
	Role string `yaml:"role"`
	// Users and UserGroups are the users the role covers: with neither, every user. In
	// role factor a covered user's one-time code goes to RADIUS, never to the TOTP file.
	// Default: none (every user).
	Users      []string `yaml:"users"`
	UserGroups []string `yaml:"user_groups"`
	// Timeout is how long a request waits for an answer before it is sent again (or the
	// next server asked); at least 100ms, at most 10s. Default: 2s.
	Timeout Duration `yaml:"timeout"`
	// Retries is how many times a request is sent again to a server that did not answer
	// within the timeout, before the next server is asked; 0..5. With every server silent
	// a login waits servers × (1 + retries) × timeout, which must stay within 10s.
	// Default: 1.
	Retries *int `yaml:"retries"`
	// NASIdentifier is the NAS-Identifier of the requests, by which the servers tell this
	// site from their other clients. Default: the site's name.
	NASIdentifier string `yaml:"nas_identifier"`
	// RequireMessageAuthenticator refuses answers without a Message-Authenticator (RFC
	// 3579), as the answers to requests that carry one should have since the BlastRADIUS
	// attack (CVE-2024-3596) on unsigned answers; false takes them from servers too old to
	// sign, with only the Response Authenticator checked. Default: true.
	RequireMessageAuthenticator *bool `yaml:"require_message_authenticator"`
}

// setDefaults fills in the keys of site.auth.radius the file left out; site names the
// site (the default NAS-Identifier).
func (r *RADIUS) setDefaults(site string) {
	setStr(&r.Role, RADIUSRoleFactor)
	setDur(&r.Timeout, DefaultRADIUSTimeout)
	if r.Retries == nil {
		r.Retries = intPtr(DefaultRADIUSRetries)
	}
	setStr(&r.NASIdentifier, site)
	if r.RequireMessageAuthenticator == nil {
		r.RequireMessageAuthenticator = boolPtr(true)
	}
}

// validateRADIUS checks site.auth.radius against the users and user groups.
func (k *checker) validateRADIUS(users, ugroups map[string]int) {
	r := k.c.Site.Auth.RADIUS
	if r == nil {
		return
	}
	const p = "site.auth.radius"
	if len(r.Servers) == 0 {
		k.errf(p, "at least one server is required (servers: [address:port, ...])")
	}
	seen := map[netip.AddrPort]int{}
	for i, s := range r.Servers {
		sp := fmt.Sprintf("%s.servers[%d]", p, i)
		k.hostPort(sp, s)
		if j, dup := seen[s]; dup && s.IsValid() {
			k.errf(sp, "server %s is listed twice (also servers[%d])", s, j)
		}
		seen[s] = i
	}
	if r.SecretFile == "" {
		k.errf(p, "secret_file is required: a file of mode 0600 that holds the shared secret (the secret never goes in the configuration)")
	}
	k.oneOf(p+".role", r.Role, RADIUSRoleFactor, RADIUSRolePrimary)
	for i, u := range r.Users {
		k.ref(fmt.Sprintf("%s.users[%d]", p, i), "user", u, users)
	}
	for i, g := range r.UserGroups {
		k.ref(fmt.Sprintf("%s.user_groups[%d]", p, i), "user group", g, ugroups)
	}
	if r.Role == RADIUSRoleFactor && len(r.Users) == 0 && len(r.UserGroups) == 0 && k.c.Site.Auth.TOTPFile != "" {
		k.errf(p+".role", "role factor covers every user, so no one-time code would be checked against site.auth.totp_file: name the RADIUS users (users, user_groups) or drop totp_file")
	}
	t := r.Timeout.D()
	if t < MinRADIUSTimeout || t > MaxRADIUSTimeout {
		k.errf(p+".timeout", "%s is outside %s..%s", t, MinRADIUSTimeout, MaxRADIUSTimeout)
	}
	n := *r.Retries
	if n < 0 || n > MaxRADIUSRetries {
		k.errf(p+".retries", "%d is outside 0..%d", n, MaxRADIUSRetries)
	}
	if wait := time.Duration(len(r.Servers)*(1+n)) * t; n >= 0 && t >= MinRADIUSTimeout && wait > MaxRADIUSWait {
		k.errf(p+".timeout", "with every server silent a login would wait %s (%d servers × %d sends × %s), more than %s, after which clients give up: lower timeout or retries",
			wait, len(r.Servers), 1+n, t, MaxRADIUSWait)
	}
	if len(r.NASIdentifier) > 253 {
		k.errf(p+".nas_identifier", "is %d bytes long, more than a RADIUS attribute holds (253)", len(r.NASIdentifier))
	}
}

// Covers says whether the role of site.auth.radius covers user: every user when it names
// no users and no user groups, else those it names and the members of the groups it names.
func (r *RADIUS) Covers(c *Config, user string) bool {
	if len(r.Users) == 0 && len(r.UserGroups) == 0 || slices.Contains(r.Users, user) {
		return true
	}
	return slices.ContainsFunc(c.UserGroups, func(g UserGroup) bool {
		return slices.Contains(r.UserGroups, g.Name) && slices.Contains(g.Members, user)
	})
}

// userNote says, for the summary, what RADIUS checks of u: "" when nothing (r may be nil).
func (r *RADIUS) userNote(c *Config, u User) string {
	switch {
	case r == nil || !r.Covers(c, u.Name):
		return ""
	case r.Role == RADIUSRoleFactor:
		return "one-time code by RADIUS"
	case u.PasswordHash == "":
		return "password by RADIUS"
	}
	return "" // role primary leaves a user's own password_hash alone
}

// summary describes site.auth.radius in a line for the summary.
func (r *RADIUS) summary() string {
	servers := make([]string, len(r.Servers))
	for i, s := range r.Servers {
		servers[i] = s.String()
	}
	who := "every user"
	if len(r.Users)+len(r.UserGroups) > 0 {
		who = strings.Join(append(append([]string(nil), r.Users...), r.UserGroups...), ", ")
	}
	signed := "signed answers only"
	if r.RequireMessageAuthenticator != nil && !*r.RequireMessageAuthenticator {
		signed = "unsigned answers taken"
	}
	sends := fmt.Sprintf("sent %d times %s apart", 1+*r.Retries, r.Timeout)
	if *r.Retries == 0 {
		sends = fmt.Sprintf("sent once, %s for the answer", r.Timeout)
	}
	return fmt.Sprintf("radius: role %s for %s; servers %s in order, each %s; NAS-Identifier %q; %s",
		r.Role, who, strings.Join(servers, ", "), sends, r.NASIdentifier, signed)
}
