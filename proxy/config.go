package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
)

// Balance policies of a pool.
const (
	// LeastConn picks the backend with the fewest active connections per unit of weight.
	LeastConn = "least_conn"
	// RoundRobin cycles over the eligible backends.
	RoundRobin = "round_robin"
	// Weighted is smooth weighted round robin: backend i gets Weight_i of every sum(Weight) picks.
	Weighted = "weighted"
	// SourceHash maps a client address to a backend by rendezvous hashing, so that removing one
	// backend moves only that backend's clients.
	SourceHash = "source_hash"
)

// Listener protocols.
const (
	// TCP forwards a TCP stream to a backend of the listener's pool.
	TCP = "tcp"
	// TLS peeks at the ClientHello, routes by server name, and forwards the stream untouched.
	TLS = "tls"
	// UDP forwards datagrams per client flow.
	UDP = "udp"
)

// Config is what a Server listens on and forwards to. Zero fields take the defaults documented
// on each field; SetDefaults fills them and Validate checks the result.
type Config struct {
	// Listeners are the sockets the server accepts on. Required (at least one).
	Listeners []Listener
	// Pools are the backend pools that listeners and routes name. Required (at least one).
	Pools []Pool
	// Limits bounds connections and flows. Default: see Limits.
	Limits Limits
	// AffinityTTL is how long a client address stays bound to the backend it last reached, in
	// pools with Affinity set; each new connection refreshes it. 0 takes the default; a
	// negative value turns affinity off. Default: 30m.
	AffinityTTL time.Duration
	// AffinityMax bounds the affinity table (client addresses). Default: 100000.
	AffinityMax int
}

// Listener is one socket.
type Listener struct {
	// Name names the listener in metrics and logs. Default: "<protocol>/<address>".
	Name string
	// Address is the IP address and port to listen on; port 0 picks a free port. Required.
	Address netip.AddrPort
	// Protocol is tcp, tls (SNI passthrough) or udp. Default: tcp.
	Protocol string
	// Pool is the pool connections go to when no route matches. Required unless every
	// connection is routed by Routes (then a ClientHello without a matching name is refused).
	Pool string
	// Routes route TLS connections by server name (tls listeners only), first match wins.
	// Default: none.
	Routes []Route
	// ProxyTrusted are the peer prefixes that must start each connection with a PROXY v1 or
	// v2 header, whose source address then stands for the client. Peers outside these
	// prefixes are never parsed for a header. tcp and tls only. Default: none.
	ProxyTrusted []netip.Prefix
	// IdleTimeout closes a TCP connection after this long with no byte in either direction,
	// and ends a UDP flow after this long without a datagram. Default: 1h for tcp and tls,
	// 60s for udp.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds reading the PROXY header and the TLS ClientHello.
	// Default: 5s.
	HandshakeTimeout time.Duration
	// MaxClientHello bounds the bytes read to find the ClientHello's server name (tls only).
	// Default: 16384.
	MaxClientHello int
	// KeepAlive turns on TCP keepalive probes at this interval on client and backend sockets
	// (tcp and tls); 0 leaves them off, as HAProxy does by default, and IdleTimeout ends
	// dead connections. Default: 0.
	KeepAlive time.Duration
	// MaxConns bounds this listener's concurrent connections (tcp, tls) or flows (udp);
	// 0 means only the global limits apply. Default: 0.
	MaxConns int
	// NoHalfClose (tcp, tls) ends a connection once the backend has closed its side and all
	// it sent has been written to the client, closing both sockets, as nginx stream does
	// without proxy_half_close; a client's FIN is still passed on to the backend, which may
	// answer. Default: false (TCP half-close: each side's FIN is passed on and the other
	// direction stays open until its side closes too).
	NoHalfClose bool
	// DeferAccept (tcp, tls) accepts a connection only once the client has sent its first
	// bytes (TCP_DEFER_ACCEPT), which spares a wait for them and a wake-up per connection;
	// for protocols where the client speaks first (TLS, HTTP, PCoIP, Blast). A client that
	// sends nothing is accepted after about HandshakeTimeout. Linux only: elsewhere a
	// listener with it does not open (an error names the key). Default: false.
	DeferAccept bool
	// SocketBuffer sets SO_RCVBUF and SO_SNDBUF of udp sockets (listener and per-flow
	// backend sockets) in bytes; the kernel caps it at net.core.[rw]mem_max. Default: 4 MiB.
	SocketBuffer int
	// MaxDatagram is the largest datagram forwarded whole (udp only); longer ones are
	// dropped and counted as errors{reason="udp_truncated"}. Default: 4096.
	MaxDatagram int
	// Batch is the number of datagrams moved per recvmmsg/sendmmsg call (udp only).
	// Default: 64.
	Batch int
	// UDPCoalesce, with Options.BlockingUDP, is how long each of the listener's workers (one
	// for the clients' datagrams, one for the backends' replies) pauses after moving a batch
	// smaller than a full one, so that the datagrams arriving meanwhile are read with one
	// wake-up instead of one each (like a network card's interrupt moderation): a datagram
	// may wait up to this long more while datagrams keep coming; one that finds the worker
	// idle is relayed at once. Default: 0 (no pause). At most 5ms.
	UDPCoalesce time.Duration
}

// Route sends TLS connections whose server name matches to a pool.
type Route struct {
	// ServerNames are exact names ("desktop.example.com") or one-label wildcards
	// ("*.example.com"), compared case-insensitively. Required.
	ServerNames []string
	// Pool is the pool matching connections go to. Required.
	Pool string
}

// Pool is a set of backends and how connections are spread over them.
type Pool struct {
	// Name names the pool. Required, unique.
	Name string
	// Backends are the pool's members. Default: none (the pool refuses connections).
	Backends []Backend
	// Balance is least_conn, round_robin, weighted or source_hash. Default: least_conn.
	Balance string
	// Affinity keeps a client on the backend (by name) it reached through any listener's
	// pool with Affinity set, while that backend is up. Default: false.
	Affinity bool
	// SendProxy sends a PROXY protocol header to backends: "" (none), "v1" or "v2" (v2 carries
	// the client's zone in a TLV, see proxyproto.TLVZone). tcp and tls only. Default: "".
	SendProxy string
	// ConnectTimeout bounds dialing one backend. Default: 3s.
	ConnectTimeout time.Duration
	// Retries is how many other backends are tried after a failed connect. Default: 2.
	Retries int
}

// Backend is one member of a pool.
type Backend struct {
	// Name identifies the backend across pools (for affinity and health): the same gateway
	// on ports 443, 4172 and 8443 has the same name in three pools. Default: Address.
	Name string
	// Address is the backend's IP address and port. Required.
	Address netip.AddrPort
	// Weight is the backend's share in weighted and least_conn balancing, 1..1000.
	// Default: 1.
	Weight int
}

// Limits bounds what the server holds at once.
type Limits struct {
	// MaxConns bounds concurrent TCP and TLS connections over all listeners; further
	// connections are closed at accept. Default: 50000.
	MaxConns int
	// MaxConnsPerClient bounds concurrent connections from one client IP address; 0 means
	// unlimited. Default: 0.
	MaxConnsPerClient int
	// MaxFlows bounds UDP flows over all listeners; datagrams that would open another flow
	// are dropped. Default: 65536.
	MaxFlows int
	// MaxFlowsPerClient bounds UDP flows from one client IP address; 0 means unlimited.
	// Default: 0.
	MaxFlowsPerClient int
}

// SetDefaults fills the fields left at their zero value. Those a config file sets (the
// proxy section) take the defaults of configs.Proxy.SetDefaults, their one home; the rest
// are the proxy's own.
func (c *Config) SetDefaults() {
	d := c.fileDefaults()
	if c.AffinityTTL == 0 {
		c.AffinityTTL = d.AffinityTTL.D()
	}
	if c.AffinityMax == 0 {
		c.AffinityMax = 100000
	}
	if c.Limits.MaxConns == 0 {
		c.Limits.MaxConns = d.MaxConns
	}
	if c.Limits.MaxFlows == 0 {
		c.Limits.MaxFlows = d.MaxFlows
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Protocol == "" {
			l.Protocol = d.Listeners[i].Protocol
		}
		if l.Name == "" {
			l.Name = l.Protocol + "/" + l.Address.String()
		}
		if l.IdleTimeout == 0 {
			l.IdleTimeout = d.Listeners[i].IdleTimeout.D()
		}
		if l.HandshakeTimeout == 0 {
			l.HandshakeTimeout = 5 * time.Second
		}
		if l.MaxClientHello == 0 {
			l.MaxClientHello = 16384
		}
		if l.SocketBuffer == 0 {
			l.SocketBuffer = 4 << 20
		}
		if l.Batch == 0 {
			l.Batch = 64
		}
		if l.MaxDatagram == 0 {
			l.MaxDatagram = 4096
		}
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		if p.Balance == "" {
			p.Balance = d.Pools[i].Balance
		}
		if p.ConnectTimeout == 0 {
			p.ConnectTimeout = d.Pools[i].ConnectTimeout.D()
		}
		if p.Retries == 0 {
			p.Retries = 2
		}
		for j := range p.Backends {
			b := &p.Backends[j]
			if b.Name == "" {
				b.Name = b.Address.String()
			}
			if b.Weight == 0 {
				b.Weight = d.Pools[i].Backends[j].Weight
			}
		}
	}
}

// fileDefaults returns what configs makes of a proxy section shaped like c with every
// key left out.
func (c *Config) fileDefaults() configs.Proxy {
	d := configs.Proxy{Listeners: make([]configs.ProxyListener, len(c.Listeners)), Pools: make([]configs.ProxyPool, len(c.Pools))}
	for i, l := range c.Listeners {
		d.Listeners[i].Protocol = l.Protocol
	}
	for i, p := range c.Pools {
		d.Pools[i].Backends = make([]configs.ProxyBackend, len(p.Backends))
	}
	d.SetDefaults()
	return d
}

// Validate checks a Config after SetDefaults.
func (c *Config) Validate() error {
	if len(c.Listeners) == 0 {
		return fmt.Errorf("proxy config: no listeners")
	}
	pools := make(map[string]bool, len(c.Pools))
	for i, p := range c.Pools {
		if p.Name == "" {
			return fmt.Errorf("pools[%d]: name is required", i)
		}
		if pools[p.Name] {
			return fmt.Errorf("pools[%d]: duplicate pool %q", i, p.Name)
		}
		pools[p.Name] = true
		switch p.Balance {
		case LeastConn, RoundRobin, Weighted, SourceHash:
		default:
			return fmt.Errorf("pool %s: unknown balance %q (least_conn, round_robin, weighted, source_hash)", p.Name, p.Balance)
		}
		switch p.SendProxy {
		case "", "v1", "v2":
		default:
			return fmt.Errorf("pool %s: send_proxy %q is not v1 or v2", p.Name, p.SendProxy)
		}
		if p.Retries < 0 {
			return fmt.Errorf("pool %s: retries %d is negative", p.Name, p.Retries)
		}
		names := make(map[string]bool, len(p.Backends))
		for j, b := range p.Backends {
			if !b.Address.IsValid() || b.Address.Port() == 0 {
				return fmt.Errorf("pool %s: backends[%d]: address %q is not ip:port", p.Name, j, b.Address)
			}
			if b.Weight < 1 || b.Weight > 1000 {
				return fmt.Errorf("pool %s: backend %s: weight %d is not 1..1000", p.Name, b.Name, b.Weight)
			}
			if names[b.Name] {
				return fmt.Errorf("pool %s: duplicate backend %q", p.Name, b.Name)
			}
			names[b.Name] = true
		}
	}
	seen := make(map[string]bool, len(c.Listeners))
	for i, l := range c.Listeners {
		if !l.Address.IsValid() {
			return fmt.Errorf("listeners[%d]: address is required", i)
		}
		if seen[l.Name] {
			return fmt.Errorf("listeners[%d]: duplicate listener %q", i, l.Name)
		}
		seen[l.Name] = true
		switch l.Protocol {
		case TCP, TLS, UDP:
		default:
			return fmt.Errorf("listener %s: unknown protocol %q (tcp, tls, udp)", l.Name, l.Protocol)
		}
		if l.Pool != "" && !pools[l.Pool] {
			return fmt.Errorf("listener %s: unknown pool %q", l.Name, l.Pool)
		}
		if len(l.Routes) > 0 && l.Protocol != TLS {
			return fmt.Errorf("listener %s: routes need protocol tls", l.Name)
		}
		if l.Pool == "" && len(l.Routes) == 0 {
			return fmt.Errorf("listener %s: needs a pool or routes", l.Name)
		}
		if len(l.ProxyTrusted) > 0 && l.Protocol == UDP {
			return fmt.Errorf("listener %s: proxy_trusted is for tcp and tls listeners", l.Name)
		}
		for j, r := range l.Routes {
			if !pools[r.Pool] {
				return fmt.Errorf("listener %s: routes[%d]: unknown pool %q", l.Name, j, r.Pool)
			}
			if len(r.ServerNames) == 0 {
				return fmt.Errorf("listener %s: routes[%d]: no server names", l.Name, j)
			}
			for _, n := range r.ServerNames {
				if n == "" || strings.Contains(n[1:], "*") || (n[0] == '*' && !strings.HasPrefix(n, "*.")) {
					return fmt.Errorf("listener %s: routes[%d]: bad server name %q", l.Name, j, n)
				}
			}
		}
		if l.MaxClientHello < 512 || l.MaxClientHello > 1<<20 {
			return fmt.Errorf("listener %s: max_client_hello %d is not 512..1048576", l.Name, l.MaxClientHello)
		}
		if l.MaxDatagram < 512 || l.MaxDatagram > 65535 {
			return fmt.Errorf("listener %s: max_datagram %d is not 512..65535", l.Name, l.MaxDatagram)
		}
		if l.UDPCoalesce < 0 || l.UDPCoalesce > 5*time.Millisecond {
			return fmt.Errorf("listener %s: udp_coalesce %s is not 0..5ms", l.Name, l.UDPCoalesce)
		}
		if l.Batch < 1 || l.Batch > 1024 {
			return fmt.Errorf("listener %s: batch %d is not 1..1024", l.Name, l.Batch)
		}
	}
	if c.Limits.MaxConns < 0 || c.Limits.MaxConnsPerClient < 0 || c.Limits.MaxFlows < 0 || c.Limits.MaxFlowsPerClient < 0 {
		return fmt.Errorf("proxy config: negative limit")
	}
	return nil
}
