package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/gslb"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func newServeCmd() *cobra.Command { return newServeCmdWith(nil) }

// newServeCmdWith builds the serve command; listening, when set, is called with the node's
// services once every socket is open (tests use it to learn the ports).
func newServeCmdWith(listening func(*services)) *cobra.Command {
	var file, node string
	c := &cobra.Command{
		Use:   "serve --config FILE [--node NAME]",
		Short: "Run one node of a site: its DNS listeners (udp and tcp)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.LoadFile(file)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			s, err := buildServices(cfg, node, serviceDeps{Logger: log, Registry: prometheus.NewRegistry()})
			if err != nil {
				return err
			}
			return s.run(cmd.Context(), listening)
		},
	}
	c.Flags().StringVar(&file, "config", "", "site configuration file (required)")
	c.Flags().StringVar(&node, "node", "", "node to run (default: the only node of the config)")
	_ = c.MarkFlagRequired("config")
	return c
}

// serviceDeps are what every component of a node shares.
type serviceDeps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
}

// services are the components of one node, built from the config.
type services struct {
	node  configs.Node
	log   *slog.Logger
	zones *zonemap.Map
	dns   *gslb.Handler
	// dnsServers are the node's dns listeners.
	dnsServers []*gslb.Server
}

// buildServices builds the components of node (the only node when node is "").
//
// Health: gslb gets no verdict source here, so every GSLB name answers from its configured
// initial state (gslb.names[].initial) until a health checker is wired in.
func buildServices(cfg *configs.Config, node string, deps serviceDeps) (*services, error) {
	n, err := pickNode(cfg, node)
	if err != nil {
		return nil, err
	}
	log := deps.Logger.With("node", n.Name)
	zones, err := zonemap.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	h, err := gslb.New(cfg, gslb.Options{Zones: zones, Registry: deps.Registry, Logger: log})
	if err != nil {
		return nil, err
	}
	s := &services{node: n, log: log, zones: zones, dns: h}
	for _, l := range n.Listeners {
		if l.Kind != "dns" {
			continue
		}
		s.dnsServers = append(s.dnsServers, gslb.NewServer(h, gslb.ServerOptions{Address: l.Address, Protocols: l.Protocols, Logger: log}))
	}
	if len(s.dnsServers) == 0 {
		return nil, fmt.Errorf("node %s has no dns listener: nothing to serve", n.Name)
	}
	return s, nil
}

func pickNode(cfg *configs.Config, name string) (configs.Node, error) {
	var names []string
	for _, n := range cfg.Nodes {
		if n.Name == name || (name == "" && len(cfg.Nodes) == 1) {
			return n, nil
		}
		names = append(names, n.Name)
	}
	switch {
	case len(cfg.Nodes) == 0:
		return configs.Node{}, errors.New("the config has no nodes to serve")
	case name == "":
		return configs.Node{}, fmt.Errorf("the config has %d nodes: choose one with --node (%s)", len(names), strings.Join(names, ", "))
	default:
		return configs.Node{}, fmt.Errorf("no node %q in the config (nodes: %s)", name, strings.Join(names, ", "))
	}
}

// run opens every socket, then serves until ctx is done; the first failure stops them all.
func (s *services) run(ctx context.Context, listening func(*services)) error {
	for i, srv := range s.dnsServers {
		if err := srv.Listen(); err != nil {
			for _, open := range s.dnsServers[:i] {
				open.Close()
			}
			return err
		}
		s.log.Info("dns listening", "udp", fmt.Sprint(srv.UDPAddr()), "tcp", fmt.Sprint(srv.TCPAddr()))
	}
	if listening != nil {
		listening(s)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, srv := range s.dnsServers {
		g.Go(func() error { return srv.Serve(gctx) })
	}
	err := g.Wait()
	for _, srv := range s.dnsServers {
		srv.Close()
	}
	s.log.Info("stopped")
	return err
}
