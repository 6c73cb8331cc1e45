package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/bolt"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/prometheus/client_golang/prometheus"
)

// Options say who opens the store.
type Options struct {
	// Node names the node that opens it (its presence and lease in etcd). Required for
	// etcd.
	Node string
	// Logger receives the store's logs. Default: slog.Default().
	Logger *slog.Logger
	// Registry receives the store's metrics (etcd). Default: none.
	Registry prometheus.Registerer
}

// ErrNotShared is returned by CheckShared for a site of several nodes on a store that only
// one process can use.
var ErrNotShared = errors.New("store not shared")

// Open returns the store the site configuration selects: memory; bolt at site.store.path
// (default data_dir/frontdoor.db, data_dir defaulting to ./frontdoor-data); or etcd at
// site.store.endpoints, as node o.Node.
func Open(ctx context.Context, cfg *configs.Config, o Options) (broker.Store, error) {
	switch b := cfg.Site.Store.Backend; b {
	case "memory":
		return memory.New(), nil
	case "", "bolt":
		path := cfg.Site.Store.Path
		if path == "" {
			dir := cfg.Site.DataDir
			if dir == "" {
				dir = "frontdoor-data"
			}
			path = filepath.Join(dir, "frontdoor.db")
		}
		return bolt.Open(path, bolt.Options{})
	case "etcd":
		s := cfg.Site.Store
		tc, err := etcdTLS(s)
		if err != nil {
			return nil, err
		}
		eo := etcd.Options{Endpoints: s.Endpoints, DialTimeout: s.DialTimeout.D(), Prefix: s.Prefix,
			TLS: tc, Node: o.Node, Logger: o.Logger, Registry: o.Registry, Plan: OutagePlan(cfg)}
		if cfg.Site.DataDir != "" {
			eo.CacheFile = filepath.Join(cfg.Site.DataDir, "local-host-cache.db")
		}
		return etcd.Open(ctx, eo)
	default:
		return nil, fmt.Errorf("store backend %q is not available in this build", b)
	}
}

// OutagePlan returns, for every machine of cfg, the nodes that book it while the site
// database is out of reach (store/etcd's outage mode): the nodes of its zone that serve
// launches, else those of the primary zone, by name; and its max_sessions.
func OutagePlan(cfg *configs.Config) map[string]etcd.MachinePlan {
	launchers := map[string][]string{} // by zone
	primary := ""
	for _, z := range cfg.Zones {
		if z.Primary {
			primary = z.Name
		}
	}
	for _, n := range cfg.Nodes {
		for _, l := range n.Listeners {
			if l.Kind == "launch" {
				launchers[n.Zone] = append(launchers[n.Zone], n.Name)
				break
			}
		}
	}
	for z := range launchers {
		slices.Sort(launchers[z])
	}
	plan := make(map[string]etcd.MachinePlan, len(cfg.Machines))
	byBrokers := map[string][]string{} // machines by their brokers, for the offsets
	for _, m := range cfg.Machines {
		bs := launchers[m.Zone]
		if len(bs) == 0 {
			bs = launchers[primary]
		}
		plan[m.Name] = etcd.MachinePlan{Brokers: bs, Max: m.MaxSessions}
		k := strings.Join(bs, "\x00")
		byBrokers[k] = append(byBrokers[k], m.Name)
	}
	for _, ms := range byBrokers {
		slices.Sort(ms)
		for i, m := range ms {
			p := plan[m]
			p.Offset = i
			plan[m] = p
		}
	}
	return plan
}

// CheckShared refuses to run one node of a site of several nodes on a store that is not
// shared between processes: each node would keep its own sessions and tickets, double-book
// machines and refuse the others' tickets.
func CheckShared(cfg *configs.Config) error {
	if len(cfg.Nodes) <= 1 || cfg.Site.Store.Backend == "etcd" {
		return nil
	}
	b := cfg.Site.Store.Backend
	if b == "" {
		b = "bolt"
	}
	return fmt.Errorf("%w: the site has %d nodes but site.store.backend is %s, which one process holds alone; "+
		"its nodes would double-book machines and refuse each other's tickets: set site.store.backend: etcd "+
		"with site.store.endpoints and site.store.secret_file (or run `frontdoor lab` for all nodes in one place)",
		ErrNotShared, len(cfg.Nodes), b)
}

// etcdTLS builds the client TLS configuration for etcd; nil for plain http endpoints
// without certificates.
func etcdTLS(s configs.Store) (*tls.Config, error) {
	https := false
	for _, e := range s.Endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	if !https && s.CAFile == "" && s.CertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		b, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("site.store.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("site.store.ca_file %s: no PEM certificate", s.CAFile)
		}
	}
	if s.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("site.store.cert_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
