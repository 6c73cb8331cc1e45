package configs

import "net/netip"

// Machine is a VDA: a virtual desktop or multi-session host.
type Machine struct {
	// Name names the machine. Required.
	Name string `yaml:"name"`
	// Address is the machine's IP address. Required.
	Address netip.Addr `yaml:"address"`
	// Zone is the machine's zone. Required.
	Zone string `yaml:"zone"`
	// Group is the machine's delivery group. Required.
	Group string `yaml:"group"`
	// DisplayPorts are the display protocol ports as "port/protocol". Default:
	// [4172/tcp, 4172/udp, 8443/tcp, 8443/udp].
	DisplayPorts []string `yaml:"display_ports"`
	// MaxSessions is the most sessions the machine holds at once. Default: 1.
	MaxSessions int `yaml:"max_sessions"`
	// Maintenance (drain) lets the machine accept reconnects but no new sessions.
	// Default: false.
	Maintenance bool `yaml:"maintenance"`
	// AssignedUser is the owner of a private desktop; only for machines of assigned groups.
	// Default: "" (unassigned).
	AssignedUser string `yaml:"assigned_user"`
	// Desktop overrides the group's desktop for this machine; keys left out are the
	// group's (its server only when the protocol is the group's). Default: the group's.
	Desktop *Desktop `yaml:"desktop"`
}

// Group is a delivery group: a set of machines and how sessions are placed on them.
type Group struct {
	// Name names the group. Required.
	Name string `yaml:"name"`
	// Kind is shared (pooled; zone preference applies) or assigned (private desktops; each
	// user goes to their machine). Default: shared.
	Kind string `yaml:"kind"`
	// ZonePreferences is the ordered list that picks the preferred zone, from ApplicationHome,
	// UserHome or UserHomeOnly (not both), and UserLocation. An empty list turns zone
	// preference off. Default: [ApplicationHome, UserHome, UserLocation].
	ZonePreferences *[]string `yaml:"zone_preferences"`
	// SessionReconnection is always, disconnected_only or same_endpoint_only.
	// Default: always.
	SessionReconnection string `yaml:"session_reconnection"`
	// SecureGateway tunnels the group's sessions through a gateway (true) or sends clients
	// straight to the machine (false). Default: site.secure_gateway.
	SecureGateway *bool `yaml:"secure_gateway"`
	// DisconnectTimeout overrides site.sessions.disconnect_timeout for this group.
	// Default: "" (the site's).
	DisconnectTimeout Duration `yaml:"disconnect_timeout"`
	// Load sets how new sessions are spread over the group's machines. Default: see LoadPolicy.
	Load LoadPolicy `yaml:"load"`
	// Desktop is the desktop server the agents of the group's machines front. Default: see
	// Desktop (the agent's builtin desktop).
	Desktop Desktop `yaml:"desktop"`
}

// LoadPolicy configures the load index of a group's machines.
type LoadPolicy struct {
	// Policy is horizontal (least loaded first) or vertical (pack the most loaded machine
	// that still has room). Default: horizontal.
	Policy string `yaml:"policy"`
	// CPU adds a CPU evaluator (percent busy reported by the agent). Default: true.
	CPU *bool `yaml:"cpu"`
	// Memory adds a memory evaluator (percent used reported by the agent). Default: true.
	Memory *bool `yaml:"memory"`
	// MaxLogons is the number of logons in flight at which the concurrent-logons evaluator
	// reports full; 0 turns it off. Default: 2.
	MaxLogons *int `yaml:"max_logons"`
}

// Resource is a published application or desktop.
type Resource struct {
	// Name names the resource. Required.
	Name string `yaml:"name"`
	// Kind is app or desktop. Default: desktop.
	Kind string `yaml:"kind"`
	// Groups are the delivery groups publishing the resource, tried by priority. Required.
	Groups []ResourceGroup `yaml:"groups"`
	// HomeZone is an application's home zone (applications only). Default: "".
	HomeZone string `yaml:"home_zone"`
	// HomeZoneOnly: when the preferred zone is the home zone, only that zone may satisfy the
	// launch (steps 1 and 3). Needs HomeZone. Default: false.
	HomeZoneOnly bool `yaml:"home_zone_only"`
	// IgnoreUserHomeZone skips the user's home zone when picking the preferred zone; only for
	// applications without a home zone, effective only with the default zone_preferences.
	// Default: false.
	IgnoreUserHomeZone bool `yaml:"ignore_user_home_zone"`
	// Global makes the resource a global entitlement searched across federation sites.
	// Default: false.
	Global bool `yaml:"global"`
	// UsePreferredSites searches the connecting site's preferred_sites after the connecting
	// and home sites (global resources only). Default: false.
	UsePreferredSites bool `yaml:"use_preferred_sites"`
	// LoadThreshold skips a preferred site whose load (percent) exceeds it, 0..100.
	// Default: 98.
	LoadThreshold *int `yaml:"load_threshold"`
	// LoadDistribution is the session load distribution policy: "" (random), load_index or
	// session_count. Required for LoadThreshold to take effect. Default: "".
	LoadDistribution string `yaml:"load_distribution"`
	// Entitled names who may launch the resource. Required (a resource nobody may launch is
	// a mistake).
	Entitled Entitlement `yaml:"entitled"`
}

// ResourceGroup is one publishing group of a resource.
type ResourceGroup struct {
	// Group names the delivery group. Required.
	Group string `yaml:"group"`
	// Priority orders the groups, lowest first; 0 is the highest, as in Citrix. Default: the
	// position in the list (1, 2, ...).
	Priority *int `yaml:"priority"`
}

// Prio returns the group's priority (after SetDefaults: never absent).
func (rg ResourceGroup) Prio() int {
	if rg.Priority == nil {
		return 0
	}
	return *rg.Priority
}

// Entitlement names users and user groups.
type Entitlement struct {
	// Everyone entitles every configured user. Default: false.
	Everyone bool `yaml:"everyone"`
	// Users are user accounts. Default: none.
	Users []string `yaml:"users"`
	// UserGroups are user groups. Default: none.
	UserGroups []string `yaml:"user_groups"`
}

// AccessRule is one rule of access_rules. A rule matches a launch when every condition it
// sets holds: one of its users or user groups (or everyone), one of its resources, one of
// its zones or client ranges, and its days and hours.
type AccessRule struct {
	// Name names the rule in traces, explain and denials. Required.
	Name string `yaml:"name"`
	// Action is allow or deny. Required.
	Action string `yaml:"action"`
	// Entitlement says who the rule is for (everyone, users, user_groups). At least one of
	// them is required.
	Entitlement `yaml:",inline"`
	// Resources are the resources it covers. Default: none (every resource).
	Resources []string `yaml:"resources"`
	// Zones are the user-location zones it covers. Default: none (any zone, and clients in
	// none).
	Zones []string `yaml:"zones"`
	// ClientRanges are the client addresses it covers (CIDR). With Zones too, a client in
	// either matches. Default: none (any address).
	ClientRanges []netip.Prefix `yaml:"client_ranges"`
	// Days are the days of the week it covers in TimeZone: mon, tue, wed, thu, fri, sat,
	// sun. Default: none (every day).
	Days []string `yaml:"days"`
	// Hours is the time of day it covers in TimeZone, "HH:MM-HH:MM", start included, end
	// excluded; a window past midnight ("22:00-06:00") counts on the day it starts and the
	// next morning. Default: "" (all day).
	Hours string `yaml:"hours"`
	// TimeZone is the IANA time zone of Days and Hours. Default: UTC.
	TimeZone string `yaml:"time_zone"`
	// Factors are the login factors an allow rule requires (password, certificate, totp,
	// oidc, mfa, radius; all of them): a launch the rule matches whose login lacks one is
	// denied, naming the rule and the missing factors. A deny rule takes none. Default: none (any login).
	Factors []string `yaml:"factors"`
}

// FederationSite is a site of a federation (a Horizon CPA site) made of zones.
type FederationSite struct {
	// Name names the site. Required.
	Name string `yaml:"name"`
	// Zones are the zones in this site; a zone is in at most one site. Required.
	Zones []string `yaml:"zones"`
	// PreferredSites are searched in order after the connecting and home sites.
	// Default: none.
	PreferredSites []string `yaml:"preferred_sites"`
}

// PasswordPlaceholder is the password_hash the reference configuration ships, which the
// loader refuses: a copy of the reference has no known password.
const PasswordPlaceholder = "REPLACE-with-frontdoor-hash-password"

// User is a user account.
type User struct {
	// Name is the login name. Required.
	Name string `yaml:"name"`
	// PasswordHash is a bcrypt hash for HTTP Basic authentication (`frontdoor
	// hash-password` makes one); PasswordPlaceholder is refused. Default: "" (no password
	// login but through RADIUS of role primary; else client certificates only).
	PasswordHash string `yaml:"password_hash"`
	// HomeZone is the account's own home zone; it wins over any group's. Default: "".
	HomeZone string `yaml:"home_zone"`
	// HomeSite is the account's federation home site. Default: "".
	HomeSite string `yaml:"home_site"`
	// Admin lets the user call the admin API and change things in the console. Default: false.
	Admin bool `yaml:"admin"`
	// Monitor lets the user read the admin API and the console without changing anything
	// (an admin may do both). Default: false.
	Monitor bool `yaml:"monitor"`
	// OIDCSubject binds the account to the identity of the site's OpenID Connect provider
	// (site.auth.oidc) whose ID tokens carry this subject (sub): only such a token signs in
	// as this user. A listed user without one is never reached by single sign-on, whatever
	// name a token gives. Default: "" (no single sign-on as this user).
	OIDCSubject string `yaml:"oidc_subject"`
}

// UserGroup is a group of user accounts.
type UserGroup struct {
	// Name names the group. Required.
	Name string `yaml:"name"`
	// Members are user names. Default: none.
	Members []string `yaml:"members"`
	// HomeZone is the group's home zone, used for members without their own. Default: "".
	HomeZone string `yaml:"home_zone"`
}
