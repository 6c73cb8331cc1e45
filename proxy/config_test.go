package proxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	cfg := Config{
		Listeners: []Listener{{Address: netip.MustParseAddrPort("127.0.0.1:443"), Pool: "p"},
			{Address: netip.MustParseAddrPort("127.0.0.1:4172"), Protocol: UDP, Pool: "p"}},
		Pools: []Pool{{Name: "p", Backends: []Backend{{Address: netip.MustParseAddrPort("127.0.0.2:443")}}}},
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	l, u, p := cfg.Listeners[0], cfg.Listeners[1], cfg.Pools[0]
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"listener name", l.Name, "tcp/127.0.0.1:443"},
		{"tcp idle timeout", l.IdleTimeout, time.Hour},
		{"udp idle timeout", u.IdleTimeout, 60 * time.Second},
		{"balance", p.Balance, LeastConn},
		{"backend name", p.Backends[0].Name, "127.0.0.2:443"},
		{"weight", p.Backends[0].Weight, 1},
		{"max conns", cfg.Limits.MaxConns, 50000},
		{"affinity ttl", cfg.AffinityTTL, 30 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestConfigValidateRejects(t *testing.T) {
	ok := func() Config {
		return Config{
			Listeners: []Listener{{Name: "l", Address: netip.MustParseAddrPort("127.0.0.1:443"), Protocol: TLS, Pool: "p"}},
			Pools:     []Pool{{Name: "p", Backends: []Backend{{Address: netip.MustParseAddrPort("127.0.0.2:443")}}}},
		}
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"no listeners", "no listeners", func(c *Config) { c.Listeners = nil }},
		{"an unknown pool", "unknown pool", func(c *Config) { c.Listeners[0].Pool = "x" }},
		{"an unknown balance", "unknown balance", func(c *Config) { c.Pools[0].Balance = "random" }},
		{"an unknown protocol", "unknown protocol", func(c *Config) { c.Listeners[0].Protocol = "sctp" }},
		{"routes on tcp", "routes need protocol tls", func(c *Config) {
			c.Listeners[0].Protocol = TCP
			c.Listeners[0].Routes = []Route{{ServerNames: []string{"a"}, Pool: "p"}}
		}},
		{"a bad wildcard", "bad server name", func(c *Config) {
			c.Listeners[0].Routes = []Route{{ServerNames: []string{"a.*.com"}, Pool: "p"}}
		}},
		{"a duplicate backend", "duplicate backend", func(c *Config) { c.Pools[0].Backends = append(c.Pools[0].Backends, c.Pools[0].Backends[0]) }},
		{"a bad send_proxy", "send_proxy", func(c *Config) { c.Pools[0].SendProxy = "v3" }},
		{"proxy_trusted on udp", "proxy_trusted", func(c *Config) {
			c.Listeners[0].Protocol = UDP
			c.Listeners[0].ProxyTrusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}},
		{"a weight out of range", "weight", func(c *Config) { c.Pools[0].Backends[0].Weight = 5000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			c.SetDefaults()
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
