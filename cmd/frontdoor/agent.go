package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/frontdoor-vdi/frontdoor/agent"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func newAgentCmd() *cobra.Command {
	var file, machine, caFile, token, data string
	var interval time.Duration
	c := &cobra.Command{
		Use:   "agent --config FILE --machine NAME --ca FILE --token TOKEN [--data DIR]",
		Short: "Run a machine's agent: display ports (ticket-checked echo), heartbeats, session reports",
		Long: "agent serves a machine's display ports as a desktop simulator, registers with a front door of\n" +
			"the machine's zone (else the primary zone, never another satellite zone) and sends heartbeats.\n" +
			"At start it enrols: the front door issues the machine a certificate of the site CA (renewed at half\n" +
			"its life), which the display ports present over TLS; gateway-mode channels come only from gateways.\n" +
			"The token is an enrolment ticket, good once for an hour, from `frontdoor admin enrol MACHINE`, or the\n" +
			"machine's token that `frontdoor admin agent-token MACHINE` prints on a site of one node (also read\n" +
			"from FRONTDOOR_AGENT_TOKEN). Once enrolled, the agent presents its certificate instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configs.LoadFile(file)
			if err != nil {
				return err
			}
			if token == "" {
				token = os.Getenv("FRONTDOOR_AGENT_TOKEN")
			}
			var stored *agent.Identity
			if data != "" {
				if id, err := agent.LoadIdentity(data, machine); err == nil && time.Until(id.NotAfter()) > time.Hour {
					stored = id
				}
			}
			if token == "" && stored == nil {
				return errors.New("no agent token and no machine identity kept in --data: pass --token (frontdoor admin enrol MACHINE) or set FRONTDOOR_AGENT_TOKEN")
			}
			var m *configs.Machine
			for i := range cfg.Machines {
				if cfg.Machines[i].Name == machine {
					m = &cfg.Machines[i]
				}
			}
			if m == nil {
				return fmt.Errorf("machine %q is not in %s", machine, file)
			}
			tlsc, err := trustCA(caFile)
			if err != nil {
				return err
			}
			doors, err := agent.Candidates(cfg, machine)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			rep := agent.NewReporter(machine, token, doors, tlsc, log)
			keys, err := rep.SiteKeys(cmd.Context())
			if err != nil {
				return err
			}
			o, err := agent.ForMachine(cfg, *m)
			if err != nil {
				return err
			}
			o.Verifier = ticket.NewVerifier(keys[0], ticket.NewMemoryLedger(0, nil), nil)
			o.Verifier.SetKeys(keys)
			o.Report, o.Logger, o.RevokeFor, o.Live = rep.Event, log, cfg.Site.Tickets.ReconnectTTL.D(), rep.Live
			if stored != nil {
				o.Identity = stored
				rep.UseIdentity(stored)
				log.Info("machine identity kept from an earlier enrolment", "dir", data, "not_after", stored.NotAfter())
			} else {
				if o.Identity, err = rep.Enroll(cmd.Context()); err != nil {
					return err
				}
				if data != "" {
					if err := o.Identity.Save(data); err != nil {
						return fmt.Errorf("keeping the machine identity in %s: %w", data, err)
					}
				}
			}
			d, err := agent.NewDisplay(o)
			if err != nil {
				return err
			}
			rep.TellConnected(d.Connected) // the site learns which of its connected sessions this machine carries
			if err := d.Listen(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent %s: display ports %v on %s, reporting to %s\n", machine, m.DisplayPorts, m.Address, rep.Current().URL)
			g, ctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return d.Serve(ctx) })
			g.Go(func() error { return rep.Keep(ctx, o.Identity, time.Hour) })
			g.Go(func() error { return rep.Follow(ctx, d) })
			g.Go(func() error { return rep.FollowKeys(ctx, 10*time.Second, o.Verifier.SetKeys) })
			g.Go(func() error {
				return rep.Run(ctx, interval, func() (int, int, int) { cpu, mem := agent.HostLoad(); return d.Count(), cpu, mem })
			})
			return g.Wait()
		},
	}
	c.Flags().StringVar(&file, "config", "", "site configuration (required)")
	c.Flags().StringVar(&machine, "machine", "", "this machine's name in the config (required)")
	c.Flags().StringVar(&caFile, "ca", "", "PEM file of the CA that signs the front doors' certificates (default: system roots)")
	c.Flags().StringVar(&token, "token", "", "enrolment ticket (frontdoor admin enrol MACHINE) or agent token")
	c.Flags().StringVar(&data, "data", "", "keep the machine's key and certificate here, so that it starts again without a new enrolment (default: none)")
	c.Flags().DurationVar(&interval, "interval", 5*time.Second, "heartbeat interval")
	_ = c.MarkFlagRequired("config")
	_ = c.MarkFlagRequired("machine")
	return c
}

// trustCA returns a client TLS config trusting the CA in file (system roots when "").
func trustCA(file string) (*tls.Config, error) {
	if file == "" {
		return &tls.Config{}, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool}, nil
}
