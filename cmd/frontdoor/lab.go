package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/spf13/cobra"
)

func newLabCmd() *cobra.Command {
	var file, data, logFile string
	var verbose, single bool
	c := &cobra.Command{
		Use:   "lab [--config FILE] [--data DIR]",
		Short: "Run a whole site on loopback: DNS, front doors, gateways and an agent per machine",
		Long: "lab starts the site of configs/lab.yaml (or --config) on loopback addresses as a distributed site:\n" +
			"an embedded 3-member etcd cluster is the site database and every node runs as its own\n" +
			"`frontdoor serve` process; the machines' agents run in the lab. Data goes to --data (a temporary\n" +
			"directory when not given). Ctrl-C stops every process it started.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var src []byte
			var err error
			if file != "" {
				src, err = os.ReadFile(file)
			} else {
				src, err = configs.Shipped("lab.yaml")
				file = "lab.yaml"
			}
			if err != nil {
				return err
			}
			cfg, err := configs.Load(file, src)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			logw := cmd.ErrOrStderr()
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				logw, level = f, slog.LevelInfo
			}
			if data != "" {
				if data, err = filepath.Abs(data); err != nil {
					return err
				}
			}
			start := time.Now()
			fmt.Fprintf(out, "starting lab site %q\n", cfg.Site.Name)
			var names []string
			for _, nd := range cfg.Nodes {
				names = append(names, nd.Name)
			}
			blocking := false
			if single {
				blocking, _ = reserveProcs(cfg, names...)
			}
			l, err := lab.New(cmd.Context(), lab.Options{Config: cfg, Source: src, Processes: !single, DataDir: data, BlockingUDP: blocking,
				Logger:   slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level})),
				Progress: func(step string) { fmt.Fprintf(out, "  ... %s\n", step) }})
			if err != nil {
				return err
			}
			ctx, stop := context.WithCancel(cmd.Context())
			defer stop()
			served := make(chan error, 1)
			go func() { served <- l.Serve(ctx) }()
			if err := l.WaitReady(ctx); err != nil {
				stop()
				<-served
				return err
			}
			fmt.Fprintf(out, "  ... up in %s\n\n", time.Since(start).Round(100*time.Millisecond))
			fmt.Fprint(out, l.Describe())
			err = <-served
			fmt.Fprintln(out, "lab stopped")
			return err
		},
	}
	c.Flags().StringVar(&file, "config", "", "site configuration (default: the embedded configs/lab.yaml)")
	c.Flags().StringVar(&data, "data", "", "data directory (default: a temporary directory, removed on exit)")
	c.Flags().StringVar(&logFile, "log", "", "write component logs to this file")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every component's events to stderr")
	c.Flags().BoolVar(&single, "single-process", false, "run every node in this process, over a one-member embedded etcd, instead of one process per node over a 3-member etcd")
	return c
}
