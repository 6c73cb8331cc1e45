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
