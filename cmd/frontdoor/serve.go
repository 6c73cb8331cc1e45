package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command { return newServeCmdWith(nil) }

// newServeCmdWith builds the serve command; listening, when set, is called with the node's
// runtime once every socket is open (tests use it to learn the ports).
func newServeCmdWith(listening func(*node.Node)) *cobra.Command {
	var file, name, data string
	var rebinds, storeEndpoints []string
	c := &cobra.Command{
		Use:   "serve --config FILE [--node NAME] [--data DIR]",
		Short: "Run one node of a site: DNS, launch and admin APIs, the gateways it hosts, health, the broker",
		Long: `Run one node of a site: DNS, launch and admin APIs, the gateways it hosts, health, the broker
and the proxy's listeners.

Signals:
  SIGHUP           reload the config file: the proxy's listeners, pools, routes, limits and
                   drain timeout, the GSLB domains and the answers of the GSLB names, and the
                   zones' client ranges. Established connections stay where they are. A config
                   that changes anything else (the set of GSLB names too), or does not load, is
                   refused and logged; the running one stays.
  SIGTERM, SIGINT  stop: the proxy takes no new connections or UDP flows and the gateways no
                   new sessions (their health ports answer 503), and what is established may
                   finish for up to proxy.drain_timeout (default 30s); the node's DNS and
                   APIs stop at once. A second signal stops at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Watched from the start: a SIGHUP's default action would end the process. One
			// that comes while the node starts is applied once it runs.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			load := func() (*configs.Config, error) { return loadServed(file, storeEndpoints) }
			cfg, err := load()
			if err != nil {
				return err
			}
			n, err := node.Pick(cfg, name)
			if err != nil {
				return fmt.Errorf("--node: %w", err)
			}
			if !servesSomething(cfg, n) {
				return fmt.Errorf("node %s has no listener and hosts no gateway: nothing to serve", n.Name)
			}
			if err := store.CheckShared(cfg); err != nil {
				return err
			}
			rebind, err := parseRebinds(rebinds)
			if err != nil {
				return err
			}
			if data == "" {
				data = cfg.Site.DataDir
			}
			if data == "" {
				data = "frontdoor-data"
			}
			if data, err = filepath.Abs(data); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("node", n.Name)
			procs, restore := reserveProcs(cfg, n.Name)
			defer restore()
			rt, err := node.New(cmd.Context(), node.Options{Config: cfg, Node: n.Name, DataDir: data,
				Logger: log, Registry: prometheus.NewRegistry(), Procs: procs, Drain: true, Version: versionString(), Rebind: rebind})
			if err != nil {
				return err
			}
			if err := rt.Listen(); err != nil {
				return err
			}
			for _, e := range rt.Endpoints() {
				switch e.Kind {
				case "gateway":
					log.Info("gateway running", "gateway", e.Name, "address", e.Address)
				case "launch", "admin":
					log.Info(e.Kind+" listening", "address", "https://"+e.Address)
				case "proxy":
					log.Info("proxy listening", "listener", e.Name, e.Network, e.Address)
				default:
					log.Info(e.Kind+" listening", e.Network, e.Address)
				}
			}
			log.Info("data", "dir", data, "ca", filepath.Join(data, "ca.pem"))
			if listening != nil {
				listening(rt)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			go reloadOnHUP(ctx, hup, file, load, rt, log)
			err = rt.Serve(cmd.Context())
			log.Info("stopped")
			return err
		},
	}
	c.Flags().StringVar(&file, "config", "", "site configuration file (required)")
	c.Flags().StringVar(&name, "node", "", "node to run (default: the only node of the config)")
	c.Flags().StringVar(&data, "data", "", "data directory: store, site key, CA, certificates (default: site.data_dir, else ./frontdoor-data)")
	// Hidden: the drill puts each front door behind a fault-injection wire that owns the
	// configured address and forwards to the one the node really binds.
	c.Flags().StringArrayVar(&storeEndpoints, "store-endpoint", nil, "an etcd client URL this node uses instead of site.store.endpoints: the members or proxies nearest it (repeatable)")
	c.Flags().StringArrayVar(&rebinds, "rebind", nil, "listen on INNER wherever the config says PUBLIC (PUBLIC=INNER, repeatable)")
	_ = c.Flags().MarkHidden("rebind")
	_ = c.MarkFlagRequired("config")
	return c
}

// parseRebinds turns --rebind PUBLIC=INNER flags into node.Options.Rebind; nil for none.
func parseRebinds(flags []string) (func(netip.Addr) netip.Addr, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	m := map[netip.Addr]netip.Addr{}
	for _, f := range flags {
		pub, in, ok := strings.Cut(f, "=")
		a, err1 := netip.ParseAddr(pub)
		b, err2 := netip.ParseAddr(in)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--rebind %q: want PUBLIC=INNER, two IP addresses", f)
		}
		m[a.Unmap()] = b.Unmap()
	}
	return func(a netip.Addr) netip.Addr {
		if b, ok := m[a.Unmap()]; ok {
			return b
		}
		return a
	}, nil
}

// reloadOnHUP reloads the config file into rt at each SIGHUP until ctx ends. A config that
// does not load, or that Reload refuses, is logged and changes nothing.
// loadServed loads the config file, with this node's own etcd endpoints when given.
func loadServed(file string, storeEndpoints []string) (*configs.Config, error) {
	cfg, err := configs.LoadFile(file)
	if err != nil || len(storeEndpoints) == 0 {
		return cfg, err
	}
	if cfg.Site.Store.Backend != "etcd" {
		return nil, fmt.Errorf("--store-endpoint: the site's store is %s, not etcd", cfg.Site.Store.Backend)
	}
	for _, e := range storeEndpoints {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--store-endpoint %q: want http(s)://host:port", e)
		}
	}
	cfg.Site.Store.Endpoints = storeEndpoints
	return cfg, nil
}

func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, file string, load func() (*configs.Config, error), rt *node.Node, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		cfg, err := load()
		if err == nil {
			err = rt.Reload(cfg)
		}
		if err != nil {
			log.Error("reload failed; the running configuration stays", "config", file, "err", err)
			continue
		}
		log.Info("reloaded", "config", file)
	}
}

// servesSomething reports whether node n has a listener or hosts a gateway.
func servesSomething(cfg *configs.Config, n configs.Node) bool {
	if len(n.Listeners) > 0 {
		return true
	}
	for _, g := range cfg.Gateways {
		if g.Node == n.Name {
			return true
		}
	}
	return false
}

// reserveProcs adds to GOMAXPROCS one P for each blocking UDP worker of the named nodes
// (node.UDPWorkers: DNS listeners and udp proxy listeners) and one for each password
// comparison that may run at once (logins.PasswordSlots), and returns the node's Procs: the
// CPUs from before, UDP sockets read by such workers, and addProcs for a reload's. Each
// worker holds its P while it waits in the kernel (see package internal/rawio) or computes at
// a low priority (internal/lowprio), and the rest of the process keeps every CPU's P; a
// reload that adds udp listeners adds their Ps too. An explicit GOMAXPROCS is left alone, and
// the UDP sockets are then read through the Go poller. Setting GOMAXPROCS stops the runtime
// from following a changed CPU limit. restore sets GOMAXPROCS back to what it was, once the
// node has stopped: serve run again in one process (the tests) would otherwise raise it each
// time.
func reserveProcs(cfg *configs.Config, nodes ...string) (procs node.Procs, restore func()) {
	cpus := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" {
		return node.Procs{CPUs: cpus}, func() {}
	}
	extra := node.UDPWorkers(cfg, nodes...) + logins.PasswordSlots(cpus)
	runtime.GOMAXPROCS(cpus + extra)
	return node.Procs{CPUs: cpus, BlockingUDP: true, Add: addProcs}, func() { runtime.GOMAXPROCS(cpus) }
}

// addProcs is node.Procs.Add: a reload's blocking UDP workers keep one P each.
// (Setting GOMAXPROCS also stops the runtime from following a changed CPU limit, as at start.)
func addProcs(delta int) { runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)+delta, 1)) }
