// Package configs holds the site configuration of frontdoor: the YAML schema as Go structs, its
// defaults, its validation with file:line errors, and the example site configurations that ship
// with the binary (embedded with go:embed).
//
// A configuration is loaded in three steps: Parse decodes YAML strictly (an unknown key is an
// error), SetDefaults fills every field left out, and Validate checks the cross references (zones,
// groups, users, ports, durations). Load does all three and is what callers use.
package configs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Config is one frontdoor site: everything one store (one bolt file or one etcd cluster) holds.
type Config struct {
	// Site holds site-wide settings. Default: see Site.
	Site Site `yaml:"site"`
	// Zones are the site's zones: exactly one primary, any number of satellites. Required.
	Zones []Zone `yaml:"zones"`
	// Nodes are the frontdoor processes of the site and their listeners. Default: none (a
	// config without nodes can still be checked and explained, but not served).
	Nodes []Node `yaml:"nodes"`
	// Gateways are the secure gateways / connection servers that tunnel display traffic,
	// each probed on its ports. Default: none.
	Gateways []Gateway `yaml:"gateways"`
	// Machines are the VDAs (virtual desktops, RDS hosts). Default: none.
	Machines []Machine `yaml:"machines"`
	// Groups are the delivery groups (pools) that machines belong to. Default: none.
	Groups []Group `yaml:"groups"`
	// Resources are the published applications and desktops. Default: none.
	Resources []Resource `yaml:"resources"`
	// Sites are the federation sites that global resources search in order (Horizon Cloud Pod
	// Architecture). Each groups one or more zones. Default: none.
	Sites []FederationSite `yaml:"sites"`
	// Users are the user accounts. Default: none.
	Users []User `yaml:"users"`
	// UserGroups are groups of user accounts, with optional home zones. Default: none.
	UserGroups []UserGroup `yaml:"user_groups"`
	// GSLB configures the authoritative DNS server. Default: no DNS domains.
	GSLB GSLB `yaml:"gslb"`
	// Proxy configures the L4 load balancer that nodes run in front of gateways or other
	// servers (the NetScaler / F5 role). Default: none.
	Proxy Proxy `yaml:"proxy"`
	// AccessRules say who may launch what, from where and when, beyond the resources'
	// entitlements (like RD Gateway's connection and resource authorization policies). At
	// each launch (a reconnect through the launch API included; not a gateway's reconnect
	// ticket) the first rule that matches decides, allow or deny; when none matches the
	// launch is allowed (end the list with a rule for everyone to deny by default).
	// Default: none.
	AccessRules []AccessRule `yaml:"access_rules"`

	// File is the file the configuration was loaded from ("" when parsed from bytes); not
	// part of the YAML.
	File string `yaml:"-"`
	// lines maps key paths such as "machines[3].zone" to their line in File.
	lines map[string]int
}

// Site holds the settings that apply to the whole site.
type Site struct {
	// Name names the site. Default: "frontdoor".
	Name string `yaml:"name"`
	// DataDir is where a node keeps its bolt store, keys and certificates. Default: "" (serve
	// uses ./frontdoor-data; lab uses a temporary directory).
	DataDir string `yaml:"data_dir"`
	// DefaultZone is the user-location zone of clients whose address is in no zone's ranges.
	// Default: "" (such clients have no location zone).
	DefaultZone string `yaml:"default_zone"`
	// SecureGateway is the site-wide default of groups' secure_gateway: true tunnels sessions
	// through a gateway, false sends clients directly to the machine. Default: true.
	SecureGateway *bool `yaml:"secure_gateway"`
	// ShareLoadAcrossZones publishes machine load to every zone, not just the machine's own.
	// Session events are always shared. Default: false.
	ShareLoadAcrossZones bool `yaml:"share_load_across_zones"`
	// Store selects where live state (sessions, machine load, verdicts) is kept. Default: bolt.
	Store Store `yaml:"store"`
	// Tickets configures launch and reconnect tickets. Default: see Tickets.
	Tickets Tickets `yaml:"tickets"`
	// TLS configures the certificates of the launch and admin APIs. Default: internal CA.
	TLS TLS `yaml:"tls"`
	// Sessions configures session lifetimes. Default: see Sessions.
	Sessions Sessions `yaml:"sessions"`
	// AuditRetention is how long the audit log keeps an entry: every front door deletes
	// older ones each hour. At least 24h. Default: 8760h (a year).
	AuditRetention Duration `yaml:"audit_retention"`
	// Auth configures how users log in: passwords, one-time codes, how long a login
	// lasts. Default: see Auth.
	Auth Auth `yaml:"auth"`
}

// The login factors, as access rules' factors name them.
const (
	// FactorPassword is a password checked against the user's password_hash.
	FactorPassword = "password"
	// FactorCertificate is a client certificate of the site CA naming the user.
	FactorCertificate = "certificate"
	// FactorTOTP is a time-based one-time code (RFC 6238) of the user's secret in
	// site.auth.totp_file, sent with the password.
	FactorTOTP = "totp"
	// FactorOIDC is an ID token of the site's OpenID Connect provider (site.auth.oidc).
	FactorOIDC = "oidc"
	// FactorMFA is an ID token whose amr claim says the provider asked for more than one
	// factor (site.auth.oidc.mfa_methods).
	FactorMFA = "mfa"
)

// factors are the login factors there are, in the order tickets number them.
var factors = [...]string{FactorPassword, FactorCertificate, FactorTOTP, FactorOIDC, FactorMFA, FactorRADIUS}

// Factors returns the login factors there are, in the order tickets number them.
func Factors() []string { return append([]string(nil), factors[:]...) }

// CheckFactor refuses a name that is no login factor, listing those there are.
func CheckFactor(f string) error {
	if slices.Contains(factors[:], f) {
		return nil
	}
	return fmt.Errorf("%q is not a factor (%s)", f, strings.Join(factors[:], ", "))
}

// Auth configures how users log in.
type Auth struct {
	// MinPasswordCost is the lowest bcrypt cost of a user's password_hash: the loader refuses
	// a cheaper hash, which a copy of the configuration would give up to quick guessing.
	// `frontdoor hash-password` makes hashes of cost 12 (PasswordHashCost; --cost for more).
	// At least 4, bcrypt's lowest, for sites that measure the site and not bcrypt (the
	// drills, the benchmarks); below 10 every launch API logs a warning when it starts.
	// Default: 10 (bcrypt's default cost).
	MinPasswordCost int `yaml:"min_password_cost"`
	// FactorLifetime is how long a login vouches for the sessions it launched: the launch
	// API seals the login's time and this lifetime into the session's tickets, and a
	// gateway (or, in direct mode, the machine) refuses a reconnect ticket presented
	// after it; the client must then launch again, with a new login (and a new one-time
	// code). One lifetime for every factor, since a session stands on its whole login: a
	// site that wants a second factor asked again sooner than the password sets it lower.
	// At least 1m. Default: 10h, as reconnect_ttl: a working day, so that a site that sets
	// neither sees no change, and a user who launched in the morning is asked again the
	// next day, not during the day.
	FactorLifetime Duration `yaml:"factor_lifetime"`
	// TOTPFile holds the users' TOTP secrets (`frontdoor totp enroll` writes it): one line
	// "USER SECRET" per enrolled user, the secret in base32; '#' starts a comment. The
	// secrets stay out of the site configuration, which every node and operator reads: the
	// file must be readable by its owner alone (mode 0600 or stricter; the launch API
	// refuses a file that others may read), and it is read again when it changes. A user
	// with a secret there logs in with the totp factor by sending the current code in the
	// X-Frontdoor-OTP header with the password. Default: "" (no user has a TOTP secret).
	TOTPFile string `yaml:"totp_file"`
	// ClientCertificates are the operator's CAs (smart cards, a corporate PKI) whose client
	// certificates log users in beside the site CA's: see ClientCertificates. Default: none.
	ClientCertificates []ClientCertificates `yaml:"client_certificates"`
	// OIDC configures login through an OpenID Connect identity provider. Default: none.
	OIDC OIDC `yaml:"oidc"`
	// RADIUS asks the site's RADIUS servers, as a second factor or as the primary check
	// of the password (see RADIUS). Default: none (no RADIUS).
	RADIUS *RADIUS `yaml:"radius"`
}

// Store selects the state backend.
type Store struct {
	// Backend is one of memory, bolt or etcd. Default: bolt.
	Backend string `yaml:"backend"`
	// Path is the bolt file. Default: "" (DataDir/frontdoor.db).
	Path string `yaml:"path"`
	// Endpoints are the etcd client URLs; required when Backend is etcd. Default: none.
	Endpoints []string `yaml:"endpoints"`
	// DialTimeout bounds connecting to etcd. Default: 5s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// Prefix is the etcd key prefix. Default: "/frontdoor/<site name>/".
	Prefix string `yaml:"prefix"`
	// SecretFile holds the store secret (base64 of 32 random bytes, mode 0600; `frontdoor
	// init --secret FILE` makes one) that seals the site identity (ticket signing key, CA)
	// in etcd; every node of the site needs the same file. Required when Backend is etcd.
	// Default: "".
	SecretFile string `yaml:"secret_file"`
	// CAFile is the PEM CA bundle that verifies etcd's server certificates (https
	// endpoints). Default: "" (the system roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key that this node presents
	// to etcd (etcd's --client-cert-auth). Default: "" (none).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the key of CertFile. Default: "".
	KeyFile string `yaml:"key_file"`
}

// Tickets configures the signed tickets handed to clients.
type Tickets struct {
	// LaunchTTL is how long a single-use launch ticket is valid. Default: 60s.
	LaunchTTL Duration `yaml:"launch_ttl"`
	// ReconnectTTL is how long a reconnect ticket is valid. Default: 10h.
	ReconnectTTL Duration `yaml:"reconnect_ttl"`
	// KeyFile is the Ed25519 site signing key (PEM, PKCS#8). Default: "" (DataDir/site.key,
	// created on first start).
	KeyFile string `yaml:"key_file"`
}

// TLS configures certificate management.
type TLS struct {
	// Issuer is internal (a CA kept in the data dir, for lab and tests) or acme. Default: internal.
	Issuer string `yaml:"issuer"`
	// Names are the DNS names certificates are obtained for. Default: the GSLB names.
	Names []string `yaml:"names"`
	// ACME configures the ACME issuer; used only when Issuer is acme.
	ACME ACME `yaml:"acme"`
}

// ACME configures an ACME certificate authority.
type ACME struct {
	// Email is the ACME account contact. Required when TLS.Issuer is acme.
	Email string `yaml:"email"`
	// CA is the ACME directory URL. Default: "" (Let's Encrypt production).
	CA string `yaml:"ca"`
	// Challenge is dns-01 (answered by frontdoor's own DNS), http-01 or tls-alpn-01.
	// Default: dns-01.
	Challenge string `yaml:"challenge"`
	// CARoot is a PEM file of the root that signs the ACME directory's own HTTPS certificate,
	// for a private ACME CA (step-ca, Pebble). Default: "" (the system roots).
	CARoot string `yaml:"ca_root"`
}

// Sessions configures session lifetimes site-wide; groups may override the disconnect timeout.
type Sessions struct {
	// PendingTimeout is how long a launched session may stay pending before it expires and
	// frees its slot. Default: 90s.
	PendingTimeout Duration `yaml:"pending_timeout"`
	// DisconnectTimeout is how long a disconnected session is kept for reconnection.
	// Default: 1h.
	DisconnectTimeout Duration `yaml:"disconnect_timeout"`
	// ReliabilityTimeout is how long a display channel waits for its client to come back
	// through another gateway (or path) after its transport broke, the viewer's and the
	// desktop server's connections held open meanwhile (session reliability). Default: 180s.
	ReliabilityTimeout Duration `yaml:"session_reliability_timeout"`
	// ReliabilityBuffer bounds, per channel and direction, the bytes an end keeps until the
	// other end acknowledges them; when it is full the end stops reading its program (the
	// desktop server or the viewer waits), nothing is dropped. Default: 4194304 (4 MiB).
	ReliabilityBuffer int `yaml:"session_reliability_buffer"`
}

// Zone is a part of the site, usually a data centre or region.
type Zone struct {
	// Name names the zone. Required.
	Name string `yaml:"name"`
	// Primary marks the one primary zone. Default: false.
	Primary bool `yaml:"primary"`
	// Ranges are the client address ranges (CIDR, IPv4 or IPv6) whose user-location zone is
	// this zone; the longest prefix wins across zones. Default: none.
	Ranges []netip.Prefix `yaml:"ranges"`
}

// Node is one frontdoor process and what it listens on.
type Node struct {
	// Name names the node. Required.
	Name string `yaml:"name"`
	// Zone is the zone the node serves. Required.
	Zone string `yaml:"zone"`
	// ElectionPreference orders the zone's leader election after software version:
	// most_preferred, preferred, default or not_preferred. Default: default.
	ElectionPreference string `yaml:"election_preference"`
	// Listeners are the node's sockets. Default: none.
	Listeners []Listener `yaml:"listeners"`
}

// Listener is one socket of a node.
type Listener struct {
	// Kind is dns, launch (HTTPS launch API), admin (admin API, dashboard, /metrics) or
	// gateway (display traffic on 443/4172/8443). Required.
	Kind string `yaml:"kind"`
	// Address is ip:port to listen on. Required.
	Address netip.AddrPort `yaml:"address"`
	// Protocols are tcp and/or udp. Default: [udp, tcp] for dns, [tcp, udp] for gateway,
	// [tcp] for launch and admin.
	Protocols []string `yaml:"protocols"`
	// ProxyProtocolFrom lists the CIDR ranges of load balancers whose connections to a launch
	// or admin listener start with a PROXY protocol header (v1 or v2); the header's source
	// address is then the client's, for its user-location zone. Default: none (headers are
	// never read).
	ProxyProtocolFrom []netip.Prefix `yaml:"proxy_protocol_from"`
	// UDPCoalesce (dns listeners) is how long the UDP worker lets queries gather after it
	// answered a partial batch, so that one wake-up takes them all: the CPU cost per answer
	// under load falls by about half, and an answer may wait up to this long. A query that
	// finds the server idle is answered at once. "0s" turns it off. It applies where the node
	// reads UDP with a blocking worker: 64-bit Linux (amd64, arm64), an address that is a
	// specific IP (not 0.0.0.0 or ::), and serve or lab run without a GOMAXPROCS environment
	// variable; elsewhere UDP is read through the Go poller without a pause. Default: 250us.
	// At most 5ms.
	UDPCoalesce *Duration `yaml:"udp_coalesce"`
}

// Gateway is a secure gateway or connection server.
type Gateway struct {
	// Name names the gateway. Required.
	Name string `yaml:"name"`
	// Zone is the zone the gateway serves. Required.
	Zone string `yaml:"zone"`
	// Address is the host (IP address) probed and tunnelled to. Required.
	Address netip.Addr `yaml:"address"`
	// PublicAddresses are the addresses clients are given for this gateway (IPv4 and IPv6).
	// Default: [Address].
	PublicAddresses []netip.Addr `yaml:"public_addresses"`
	// Node is the frontdoor node that is this gateway, if any. Default: "" (a foreign server).
	Node string `yaml:"node"`
	// Ports are the gateway's service ports and how each is checked. Default: 443/tcp (HTTPS
	// HEAD /favicon.ico expecting 200), 4172/tcp (connect), 4172/udp (request/response),
	// 8443/tcp (TLS handshake), 8443/udp (request/response).
	Ports []GatewayPort `yaml:"ports"`
	// Monitor sets probe timing and how port verdicts combine. Default: see Monitor.
	Monitor Monitor `yaml:"monitor"`
	// QUICPort is the UDP port of the QUIC transport: clients carry their UDP channels there,
	// encrypted, as DATAGRAM frames (and all of their channels with `connect --quic`), on one
	// connection that survives a client address change. Default: 0 (no QUIC: the UDP channels
	// of this gateway's sessions need plain_udp).
	QUICPort int `yaml:"quic_port"`
	// PlainUDP lets the gateway's UDP ports take flows whose ticket and datagrams cross the
	// client's leg unencrypted, for clients that cannot speak QUIC; a node logs a warning for
	// each such gateway it runs. Default: false (the UDP ports answer health probes only).
	PlainUDP bool `yaml:"plain_udp"`
}

// GatewayPort is one port of a gateway and its health check.
type GatewayPort struct {
	// Port is the port number, 1..65535. Required.
	Port int `yaml:"port"`
	// Protocol is tcp or udp. Default: tcp.
	Protocol string `yaml:"protocol"`
	// Check is how the port is probed. Default: tcp connect for tcp, request/response for udp.
	Check Check `yaml:"check"`
	// Optional excludes the port from an all-of composite verdict (it is still probed and
	// shown); a 503 on it still makes the gateway draining. Default: false (required).
	Optional bool `yaml:"optional"`
}

// Check is one health probe.
type Check struct {
	// Kind is tcp (connect), tls (a ClientHello answered by a ServerHello; the full handshake
	// when verify_name is set), http, https, or udp (send, expect a reply).
	// Default: tcp for tcp ports, udp for udp ports.
	Kind string `yaml:"kind"`
	// ServerName is the TLS server name sent and, when VerifyName is true, checked.
	// Default: "".
	ServerName string `yaml:"server_name"`
	// VerifyName checks the certificate against ServerName, which takes a full TLS handshake
	// per probe. Default: false.
	VerifyName bool `yaml:"verify_name"`
	// Method is the HTTP method. Default: HEAD.
	Method string `yaml:"method"`
	// Path is the HTTP path. Default: /favicon.ico.
	Path string `yaml:"path"`
	// ExpectStatus is the HTTP status meaning up; 503 always means draining. Default: 200.
	ExpectStatus int `yaml:"expect_status"`
	// Send is the UDP payload sent. Default: "?frontdoor-probe" (ticket.ProbePayload).
	Send string `yaml:"send"`
	// Expect is a prefix the UDP reply must start with. Default: "" (any reply).
	Expect string `yaml:"expect"`
}

// Monitor sets how a target is probed and judged.
type Monitor struct {
	// Interval is the time between probes of one port. Default: 250ms.
	Interval Duration `yaml:"interval"`
	// Timeout bounds one probe. Default: 250ms.
	Timeout Duration `yaml:"timeout"`
	// Rise is the number of consecutive successes that mark a port up. Default: 2.
	Rise int `yaml:"rise"`
	// Fall is the number of consecutive failures that mark a port down. Default: 3.
	Fall int `yaml:"fall"`
	// Jitter starts each probe up to Jitter×Interval before its slot, 0..0.5; it adds up to
	// Jitter×Interval to the worst detection time. Every port also gets a random phase, so
	// probes of many targets never start in lockstep. Default: 0.
	Jitter float64 `yaml:"jitter"`
	// Initial is the verdict before the first probes: up or down. Default: up.
	Initial string `yaml:"initial"`
	// Mode is all (every required port must be up) or any (one port up is enough); in
	// either, a port answering 503 makes the gateway draining. Default: all.
	Mode string `yaml:"mode"`
	// PassiveFailures is how many connect failures reported by the proxy within
	// PassiveWindow mark a target down before the next probe; 0 turns passive marking off.
	// Default: 3.
	PassiveFailures int `yaml:"passive_failures"`
	// PassiveWindow is the window for PassiveFailures. Default: 5s.
	PassiveWindow Duration `yaml:"passive_window"`
}

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

// GSLB configures the authoritative DNS server.
type GSLB struct {
	// Domains are the zones (DNS zones, not site zones) frontdoor is authoritative for.
	// Default: none.
	Domains []Domain `yaml:"domains"`
	// Names are the GSLB names answered from health and the client's zone. Default: none.
	Names []GSLBName `yaml:"names"`
	// QueryLogSample logs one query in N with slog; 0 turns the query log off. Default: 0.
	QueryLogSample int `yaml:"query_log_sample"`
}

// Domain is one DNS zone served authoritatively.
type Domain struct {
	// Name is the apex, e.g. "vdi.example.com.". Required.
	Name string `yaml:"name"`
	// SOA is the start of authority. Default: see SOA.
	SOA SOA `yaml:"soa"`
	// NS are the name servers of the domain. Default: ["ns1.<name>"].
	NS []string `yaml:"ns"`
	// Records are static records. Default: none.
	Records []Record `yaml:"records"`
	// DNSSEC signs the domain's answers as they are given (ECDSA P-256, one key signing
	// both the keys and the zone), denial of existence by NSEC "black lies" (RFC 4470's
	// minimal answers): a name that does not exist answers NODATA. The key is the site's,
	// made at the first start (sealed in etcd on a site of several nodes); every node logs
	// the DS record to publish at the parent. A signed domain has no delegations (NS records
	// below its apex). Default: false.
	DNSSEC bool `yaml:"dnssec"`
}

// SOA is a start-of-authority record.
type SOA struct {
	// MName is the primary name server. Default: the first NS.
	MName string `yaml:"mname"`
	// RName is the responsible mailbox as a name. Default: "hostmaster.<domain>".
	RName string `yaml:"rname"`
	// Serial is the zone serial. Default: 1.
	Serial uint32 `yaml:"serial"`
	// Refresh is the SOA refresh. Default: 1h.
	Refresh Duration `yaml:"refresh"`
	// Retry is the SOA retry. Default: 10m.
	Retry Duration `yaml:"retry"`
	// Expire is the SOA expire. Default: 168h.
	Expire Duration `yaml:"expire"`
	// Minimum is the negative-caching TTL. Default: 30s.
	Minimum Duration `yaml:"minimum"`
	// TTL is the SOA record's own TTL. Default: 1h.
	TTL Duration `yaml:"ttl"`
}

// Record is one static DNS record.
type Record struct {
	// Name is the owner, relative to the domain ("www", "@" for the apex) or absolute
	// (ending in a dot). Required.
	Name string `yaml:"name"`
	// Type is A, AAAA, CNAME, TXT, MX, NS or CAA. Required.
	Type string `yaml:"type"`
	// TTL is the record's TTL. Default: 5m.
	TTL Duration `yaml:"ttl"`
	// Value is the record data: an address, a name, text, "preference name" for MX, or
	// "flags tag value" for CAA (ParseCAA: `0 issue "letsencrypt.org"`, which lets that
	// ACME CA alone issue for the name). Required.
	Value string `yaml:"value"`
}

// GSLBName is a name answered with the healthy front doors best for the client.
type GSLBName struct {
	// Name is the fully qualified name, inside one of the domains. Required.
	Name string `yaml:"name"`
	// Policy is failover (the best site's addresses), round_robin (rotate the best site's
	// addresses), weighted (pick by weight), or all_healthy (every healthy address, best site
	// first). Default: failover.
	Policy string `yaml:"policy"`
	// TTL is the answer TTL. Default: 5s.
	TTL Duration `yaml:"ttl"`
	// WhenNoneHealthy is fail_open (answer every address) or fail_closed (SERVFAIL).
	// Default: fail_open.
	WhenNoneHealthy string `yaml:"when_none_healthy"`
	// Initial is the state assumed before the first health verdicts: up or down.
	// Default: up.
	Initial string `yaml:"initial"`
	// Sites are the zones' front doors, in the default order for clients of no listed zone.
	// Required.
	Sites []GSLBSite `yaml:"sites"`
}

// GSLBSite is one zone's front doors behind a GSLB name.
type GSLBSite struct {
	// Zone is the site's zone. Required.
	Zone string `yaml:"zone"`
	// Gateways are the gateways whose public addresses and health make up the site.
	// Required.
	Gateways []string `yaml:"gateways"`
	// Fallback is the order of other zones tried for clients of this zone when it has
	// nothing healthy. Default: the order of Sites.
	Fallback []string `yaml:"fallback"`
	// Weight is the site's weight for the weighted policy. Default: 1.
	Weight int `yaml:"weight"`
	// LoadThreshold skips this site in fallback order when its load (percent) is above it,
	// when load is known. Default: 98.
	LoadThreshold *int `yaml:"load_threshold"`
}

// Proxy configures the L4 load balancer (TCP, TLS SNI passthrough, UDP).
type Proxy struct {
	// Listeners are the load balancer's sockets, each run by one node. Default: none.
	Listeners []ProxyListener `yaml:"listeners"`
	// Pools are the backend pools the listeners name. Default: none.
	Pools []ProxyPool `yaml:"pools"`
	// AffinityTTL is how long a client stays on the backend it last reached, across every
	// listener whose pool has affinity. Default: 30m.
	AffinityTTL Duration `yaml:"affinity_ttl"`
	// MaxConns bounds concurrent TCP connections over all listeners. Default: 50000.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerClient bounds concurrent connections from one client address; 0 is no
	// bound. Default: 0.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// MaxFlows bounds UDP flows over all listeners. Default: 65536.
	MaxFlows int `yaml:"max_flows"`
	// DrainTimeout is how long a node that is told to stop (SIGTERM, SIGINT) lets established
	// proxy connections and flows, and the sessions of the gateways it hosts, finish once it
	// takes no new ones; then it closes the rest. 0
	// closes them at once. A second signal stops the node at once. Default: 30s.
	DrainTimeout *Duration `yaml:"drain_timeout"`
}

// ProxyListener is one load-balanced socket.
type ProxyListener struct {
	// Name names the listener. Required.
	Name string `yaml:"name"`
	// Node is the node that runs the listener. Required.
	Node string `yaml:"node"`
	// Address is ip:port to listen on. Required.
	Address netip.AddrPort `yaml:"address"`
	// Protocol is tcp, tls (routed by SNI without terminating TLS) or udp. Default: tcp.
	Protocol string `yaml:"protocol"`
	// Pool is the pool for connections no route matches. Required unless routes cover all.
	Pool string `yaml:"pool"`
	// Routes send TLS connections to pools by server name, first match wins. Default: none.
	Routes []ProxyRoute `yaml:"routes"`
	// ProxyProtocolFrom are the CIDR ranges of peers whose connections start with a PROXY
	// header (tcp and tls). Default: none.
	ProxyProtocolFrom []netip.Prefix `yaml:"proxy_protocol_from"`
	// IdleTimeout ends a connection or flow idle this long. Default: 1h (tcp, tls), 60s (udp).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxConns bounds this listener's connections or flows; 0 is no bound of its own.
	// Default: 0.
	MaxConns int `yaml:"max_conns"`
	// UDPCoalesce (udp) is how long the listener's workers let datagrams gather after they
	// moved a partial batch, so that one wake-up relays them all: the clients' datagrams to
	// the backends, and the backends' replies to the clients. About half the CPU per datagram
	// under load, and a datagram may wait up to this long more. "0s" turns it off. It applies
	// where the node serves UDP with blocking workers (see Listener.UDPCoalesce for when).
	// Default: 250us. At most 5ms.
	UDPCoalesce *Duration `yaml:"udp_coalesce"`
	// HalfClose (tcp, tls) passes a backend's FIN on to the client and keeps the client's
	// direction open until the client closes too (TCP half-close). false ends the connection
	// once the backend has closed and all it sent has reached the client's socket, as nginx
	// stream does by default: a system call and a wake-up less per connection, and bytes the
	// client sends after that are refused. A client's FIN is passed on either way, since the
	// backend may still answer. The VDI protocols (TLS, PCoIP, Blast) never half-close.
	// Default: true.
	HalfClose *bool `yaml:"half_close"`
	// DeferAccept (tcp, tls) hands a connection to the proxy only once the client has sent
	// its first bytes (TCP_DEFER_ACCEPT), sparing a wait and a wake-up per connection. For
	// protocols where the client speaks first, as in TLS, HTTP, PCoIP and Blast; a client
	// that stays silent is handed over after about the handshake timeout (5s).
	// Default: true for tls listeners, false for tcp.
	DeferAccept *bool `yaml:"defer_accept"`
}

// ProxyRoute routes TLS connections by server name.
type ProxyRoute struct {
	// ServerNames are exact names or one-label wildcards ("*.example.com"). Required.
	ServerNames []string `yaml:"server_names"`
	// Pool is where matching connections go. Required.
	Pool string `yaml:"pool"`
}

// ProxyPool is a set of backends.
type ProxyPool struct {
	// Name names the pool. Required.
	Name string `yaml:"name"`
	// Balance is least_conn, round_robin, weighted or source_hash. Default: least_conn.
	Balance string `yaml:"balance"`
	// Affinity keeps a client on the backend it reached through any pool with affinity (the
	// same gateway on 443, 4172 and 8443) while that backend is healthy. Default: false.
	Affinity bool `yaml:"affinity"`
	// SendProxy sends a PROXY header to backends: "" (none), v1 or v2 (v2 carries the client's
	// zone). Default: "".
	SendProxy string `yaml:"send_proxy"`
	// ConnectTimeout bounds dialing one backend. Default: 3s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// Backends are the pool's members. Required.
	Backends []ProxyBackend `yaml:"backends"`
}

// ProxyBackend is a pool member: a gateway's port (its health verdict steers the pool) or
// any address.
type ProxyBackend struct {
	// Gateway names a configured gateway; its address and composite health verdict are used.
	// Default: "" (use Address).
	Gateway string `yaml:"gateway"`
	// Port is the gateway's port; required with Gateway.
	Port int `yaml:"port"`
	// Address is ip:port of a backend that is no configured gateway (not health-checked).
	// Default: none.
	Address netip.AddrPort `yaml:"address"`
	// Weight is the backend's share, 1..1000. Default: 1.
	Weight int `yaml:"weight"`
}
