package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/frontdoor-vdi/frontdoor/broker"
	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/store/memory"
	"github.com/frontdoor-vdi/frontdoor/zonemap"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// explainState is the STATE.yaml of `frontdoor explain`: the live state to decide against.
type explainState struct {
	// Now is the clock of the decision (RFC 3339). Default: the current time.
	Now time.Time `yaml:"now"`
	// Sessions are the existing sessions.
	Sessions []stateSession `yaml:"sessions"`
	// Machines are per-machine load and flags; machines not listed are idle and up.
	Machines []stateMachine `yaml:"machines"`
}

type stateSession struct {
	ID       string `yaml:"id"`
	User     string `yaml:"user"`
	Resource string `yaml:"resource"`
	Machine  string `yaml:"machine"`
	State    string `yaml:"state"` // pending, connected or disconnected
	Endpoint string `yaml:"endpoint"`
}

type stateMachine struct {
	Name        string `yaml:"name"`
	CPU         int    `yaml:"cpu"`    // percent busy
	Memory      int    `yaml:"memory"` // percent used
	Maintenance *bool  `yaml:"maintenance"`
	Down        bool   `yaml:"down"`
}

type explainOpts struct {
	config, state, user, resource, clientIP, zone, endpoint, site string
	factors, groups                                               []string
	json                                                          bool
}

func newExplainCmd() *cobra.Command {
	var o explainOpts
	c := &cobra.Command{
		Use:   "explain --config FILE --user U --resource R [--state STATE.yaml] [--client-ip IP | --location-zone Z] [--endpoint E] [--factors F,...] [--groups G,...] [--json]",
		Short: "Show where the broker would place a launch, and why",
		Long: `explain runs the broker's decision for one launch against a site configuration and an
optional state file (existing sessions, machine load, maintenance and down flags), without
creating anything, and prints the outcome with its trace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExplain(cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.config, "config", "", "site configuration file (required)")
	f.StringVar(&o.state, "state", "", "state file: sessions and machine load/flags")
	f.StringVar(&o.user, "user", "", "user name (required)")
	f.StringVar(&o.resource, "resource", "", "resource name (required)")
	f.StringVar(&o.clientIP, "client-ip", "", "client address; its zone is the user-location zone")
	f.StringVar(&o.zone, "location-zone", "", "user-location zone")
	f.StringVar(&o.endpoint, "endpoint", "", "client endpoint (device) id")
	f.StringVar(&o.site, "site", "", "connecting federation site (global resources; default: the site of the location zone)")
	f.StringSliceVar(&o.factors, "factors", []string{configs.FactorPassword}, "the login's factors, for access rules that require some: "+strings.Join(configs.Factors(), ", "))
	f.StringSliceVar(&o.groups, "groups", nil, "user groups the login vouches for (an identity provider's groups claim, after group_map): they count as the user's, and make an unlisted user one of the site's")
	f.BoolVar(&o.json, "json", false, "print JSON instead of text")
	for _, n := range []string{"config", "user", "resource"} {
		c.MarkFlagRequired(n)
	}
	c.MarkFlagsMutuallyExclusive("client-ip", "location-zone")
	return c
}

func runExplain(w io.Writer, o explainOpts) error {
	cfg, err := configs.LoadFile(o.config)
	if err != nil {
		return err
	}
	for _, f := range o.factors {
		if err := configs.CheckFactor(f); err != nil {
			return fmt.Errorf("--factors: %w", err)
		}
	}
	var st explainState
	if o.state != "" {
		if st, err = loadExplainState(o.state); err != nil {
			return err
		}
	}
	if st.Now.IsZero() {
		st.Now = time.Now().UTC()
	}
	var pre []string
	var client netip.Addr
	loc := o.zone
	if o.clientIP != "" {
		addr, err := netip.ParseAddr(o.clientIP)
		if err != nil {
			return fmt.Errorf("--client-ip %q is not an IP address", o.clientIP)
		}
		zm, err := zonemap.FromConfig(cfg)
		if err != nil {
			return err
		}
		client = addr.Unmap()
		r := zm.Lookup(client)
		loc = r.Zone
		pre = append(pre, r.Describe(addr))
	}
	b, err := explainBroker(cfg, o.state, st)
	if err != nil {
		return err
	}
	d := b.Decide(broker.LaunchRequest{User: o.user, Resource: o.resource, LocationZone: loc, Endpoint: o.endpoint, Site: o.site, Client: client, Factors: o.factors, Groups: o.groups})
	d.Trace = append(pre, d.Trace...)
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	_, err = io.WriteString(w, d.Text())
	return err
}

func loadExplainState(file string) (explainState, error) {
	var st explainState
	raw, err := os.ReadFile(file)
	if err != nil {
		return st, fmt.Errorf("reading state: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&st); err != nil && !errors.Is(err, io.EOF) {
		return st, fmt.Errorf("%s: %v", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return st, nil
}

// explainBroker builds a broker over a memory store holding the state (broker.FromState:
// the broker's own rules give each session its group, mode and lifetime).
func explainBroker(cfg *configs.Config, file string, st explainState) (*broker.Broker, error) {
	sessions := make([]broker.StateSession, 0, len(st.Sessions))
	for _, s := range st.Sessions {
		sessions = append(sessions, broker.StateSession{ID: s.ID, User: s.User, Resource: s.Resource,
			Machine: s.Machine, Endpoint: s.Endpoint, State: broker.State(s.State)})
	}
	machines := make([]broker.StateMachine, 0, len(st.Machines))
	for _, m := range st.Machines {
		machines = append(machines, broker.StateMachine{Name: m.Name, CPU: m.CPU, Memory: m.Memory, Maintenance: m.Maintenance, Down: m.Down})
	}
	b, err := broker.FromState(context.Background(), cfg, memory.New(), st.Now, sessions, machines)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return b, nil
}
