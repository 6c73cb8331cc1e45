package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/drill"
	"github.com/spf13/cobra"
)

func newDrillCmd() *cobra.Command {
	var scenario, mode, report, logFile, data string
	var observe time.Duration
	var launches int
	c := &cobra.Command{
		Use:   "drill [--scenario NAME[,NAME]] [--mode gateway|direct|both] [--report DIR]",
		Short: "Run seed 004's failure drills on a distributed lab site and print the expected/actual table",
		Long: "drill starts a distributed lab site for each scenario and mode (an embedded 3-member etcd, one\n" +
			"`frontdoor serve` process of this binary per node, each front door behind a fault-injection wire,\n" +
			"two front doors and two gateways per zone, an agent per machine), has clients hold live sessions\n" +
			"streaming TCP and UDP, injects each failure into the front door that carries them (SIGKILL behind\n" +
			"a blackhole, SIGTERM, a gateway's ports blackholed or stopped, one port down), stops an etcd member,\n" +
			"or kills a node during a launch storm, and measures when each client saw the cut and when it was\n" +
			"back in its desktop; the storms count sessions per machine, ticket admissions and lost sessions.\n" +
			"Scenarios: " + strings.Join(drill.Names(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := drill.Options{Observe: observe, Launches: launches, DataDir: data, Progress: cmd.OutOrStdout()}
			if scenario != "" && scenario != "all" {
				o.Scenarios = strings.Split(scenario, ",")
			}
			switch mode {
			case "both", "":
			case "gateway", "direct":
				o.Modes = []string{mode}
			default:
				return fmt.Errorf("--mode must be gateway, direct or both, not %q", mode)
			}
			if logFile != "" {
				f, err := os.Create(logFile)
				if err != nil {
					return err
				}
				defer f.Close()
				o.Logger = slog.New(slog.NewTextHandler(f, nil))
			}
			rep, err := drill.Run(cmd.Context(), o)
			out := cmd.OutOrStdout()
			fmt.Fprintln(out)
			drill.WriteTable(out, rep)
			fmt.Fprintln(out, "\nHow the lab does each failure:")
			drill.WriteNotes(out, rep)
			if report != "" {
				if werr := drill.WriteFiles(report, rep); werr != nil {
					return werr
				}
				fmt.Fprintf(out, "\nreport: %s/report.html and report.json\n", report)
				fmt.Fprintf(out, "give it to a front door's console (its Drills page): frontdoor admin drills upload %s --url https://ADMIN-LISTENER --ca CA.pem\n", report)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(out, drill.Summary(rep))
			if !rep.Passed() {
				return fmt.Errorf("some scenarios missed their expected result")
			}
			return nil
		},
	}
	c.Flags().StringVar(&scenario, "scenario", "all", "scenarios to run, comma-separated")
	c.Flags().StringVar(&mode, "mode", "both", "secure gateway mode: gateway (ticked), direct (unticked) or both")
	c.Flags().StringVar(&report, "report", "", "write report.json and report.html here")
	c.Flags().DurationVar(&observe, "observe", 6*time.Second, "how long to watch after each failure")
	c.Flags().IntVar(&launches, "launches", 200, "launches in flight when node-killed-mid-launch kills a node")
	c.Flags().StringVar(&data, "data", "", "keep each site's data (node logs, etcd) in DIR/SCENARIO-MODE (default: temporary, removed)")
	c.Flags().StringVar(&logFile, "log", "", "write the lab's logs to this file (the node processes log in the lab's data dir)")
	return c
}
