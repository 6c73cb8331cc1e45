package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/lab"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/spf13/cobra"
)

func newLabCmd() *cobra.Command {
	var file, data, logFile, desktop string
	var verbose, single, sso bool
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
			var idp *lab.SSO
			if sso {
				if idp, src, err = lab.WithSSO(src); err != nil {
					return err
				}
				defer idp.Close()
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
			var procs node.Procs
			if single {
				var restore func()
				procs, restore = reserveProcs(cfg, names...)
				defer restore()
			}
			if desktop != "builtin" && desktop != "xvnc" {
				return fmt.Errorf("--desktop %q: give builtin or xvnc", desktop)
			}
			l, err := lab.New(cmd.Context(), lab.Options{Config: cfg, Source: src, Processes: !single, DataDir: data, Procs: procs, Desktop: desktop,
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
			desc := l.Describe()
			if idp != nil {
				const end = "\nCtrl-C stops everything.\n"
				desc = strings.TrimSuffix(desc, end) + describeLabSSO(cfg, l, idp) + end
			}
			fmt.Fprint(out, desc)
			err = <-served
			fmt.Fprintln(out, "lab stopped")
			return err
		},
	}
	c.Flags().StringVar(&file, "config", "", "site configuration (default: the embedded configs/lab.yaml)")
	c.Flags().StringVar(&data, "data", "", "data directory (default: a temporary directory, removed on exit)")
	c.Flags().StringVar(&logFile, "log", "", "write component logs to this file")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every component's events to stderr")
	c.Flags().BoolVar(&sso, "sso", false, "also start a lab identity provider (OpenID Connect, no passwords: pick a user on its page) and sign in through it: connect --sso and the console's single sign-on")
	c.Flags().StringVar(&desktop, "desktop", "builtin", "what the machines' agents front: builtin (a desktop each agent draws itself) or xvnc (a TigerVNC Xvnc with an xterm per machine; apt-get install tigervnc-standalone-server xterm)")
	c.Flags().BoolVar(&single, "single-process", false, "run every node in this process, over a one-member embedded etcd, instead of one process per node over a 3-member etcd")
	return c
}

// describeLabSSO says how to sign in through the lab's identity provider.
func describeLabSSO(cfg *configs.Config, l *lab.Lab, idp *lab.SSO) string {
	name := ""
	if len(cfg.GSLB.Names) > 0 {
		name = strings.TrimSuffix(cfg.GSLB.Names[0].Name, ".")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nSingle sign-on through the lab's identity provider (%s; no passwords: pick a user on its page;\n", idp.Issuer())
	fmt.Fprintf(&b, "erin is in no user list, only in the provider's west-office group):\n\n")
	fmt.Fprintf(&b, "  go run ./cmd/frontdoor connect %s --dns %s --ca %s --sso --resource desktop --duration 10s\n", name, labDNS(cfg), l.CAFile())
	fmt.Fprintf(&b, "  the console: %s, Sign in with single sign-on, then admin or operator\n", strings.TrimSuffix(cfg.Site.Auth.OIDC.RedirectURL, configs.OIDCCallbackPath)+"/login")
	if u := cfg.Site.Auth.OIDC.PortalRedirectURL; u != "" {
		fmt.Fprintf(&b, "  the portal: %s/, Sign in with single sign-on, then any user (erin too)\n", strings.TrimSuffix(u, configs.PortalOIDCCallbackPath))
	}
	return b.String()
}

// labDNS is the first DNS listener's address.
func labDNS(cfg *configs.Config) string {
	for _, n := range cfg.Nodes {
		for _, li := range n.Listeners {
			if li.Kind == "dns" {
				return li.Address.String()
			}
		}
	}
	return ""
}
