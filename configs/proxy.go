package configs

import "net/netip"

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
