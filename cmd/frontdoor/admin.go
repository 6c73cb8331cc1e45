package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/frontdoor-vdi/frontdoor/client/admin"
	"github.com/frontdoor-vdi/frontdoor/health"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/frontdoor-vdi/frontdoor/ticket"
	"github.com/frontdoor-vdi/frontdoor/wire"
	"github.com/spf13/cobra"
)

// adminFlags are the connection settings of the admin commands.
type adminFlags struct {
	url, user, password, ca string
}

func (f *adminFlags) do(cmd *cobra.Command, method, path string, body any) error {
	out, err := f.call(cmd, method, path, body)
	cmd.OutOrStdout().Write(out)
	return err
}

// call makes one request of the admin API with body as JSON (nil: none) and returns the
// answer's body (at most 1 MiB); an answer other than 2xx is an error, with its body.
func (f *adminFlags) call(cmd *cobra.Command, method, path string, body any) ([]byte, error) {
	tlsc, err := trustCA(f.ca)
	if err != nil {
		return nil, err
	}
	pass := f.password
	if pass == "" {
		pass = os.Getenv("FRONTDOOR_PASSWORD")
	}
	c := &admin.Client{URL: f.url, User: f.user, Password: pass, TLS: tlsc}
	out, err := c.Call(cmd.Context(), method, path, body)
	var ae *admin.Error
	if errors.As(err, &ae) {
		// The answer's text is printed as it came; the error names the call.
		err = fmt.Errorf("%s %s: %s", method, path, ae.StatusText)
	}
	return out, err
}

func newAdminCmd() *cobra.Command {
	f := &adminFlags{}
	c := &cobra.Command{Use: "admin", Short: "Operate a running site: status, the secure-gateway toggle, gateway health overrides, agent tokens, the audit log, drill reports"}
	c.PersistentFlags().StringVar(&f.url, "url", "https://127.1.0.1:9090", "admin API of a front door")
	c.PersistentFlags().StringVar(&f.user, "user", "admin", "admin user")
	c.PersistentFlags().StringVar(&f.password, "password", "", "password (default: $FRONTDOOR_PASSWORD)")
	c.PersistentFlags().StringVar(&f.ca, "ca", "", "PEM file of the site CA (the lab prints it)")

	var group string
	gw := &cobra.Command{
		Use:       "gateway on|off [--group G]",
		Short:     "Switch secure-gateway mode for new launches (running sessions keep theirs)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"on", "off"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "on" && args[0] != "off" {
				return fmt.Errorf("want on or off, not %q", args[0])
			}
			return f.do(cmd, http.MethodPost, "/v1/admin/gateway", wire.ToggleRequest{On: args[0] == "on", Group: group})
		},
	}
	gw.Flags().StringVar(&group, "group", "", "only this delivery group (default: every group)")

	hc := &cobra.Command{
		Use:   "health GATEWAY up|down|drain|auto",
		Short: "Override a gateway's health; drain and down also put the gateway in drain mode",
		Long: `Override a gateway's health verdict: up or down force it, drain caps it at draining (no new
sessions; the ones it carries keep going), auto follows the probes again. drain and down also
put the gateway in drain mode: its health port answers 503 and it takes no channel of a session
it does not carry, which every front door's probes see as draining; up and auto take it out of
drain mode. A carried session whose link breaks comes back through another gateway.

The override is the site's: it is stored (in etcd on a site of several nodes, in the bolt
file on a site of one, so a restart keeps it), every front door follows it, and the node that
hosts the gateway drains it, whichever front door --url names. A gateway without an https
health port cannot say it drains and is not put in drain mode.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := health.ParseOverride(args[1]); err != nil {
				return err
			}
			return f.do(cmd, http.MethodPost, "/v1/admin/health", wire.OverrideRequest{Gateway: args[0], Override: args[1]})
		},
	}

	status := &cobra.Command{
		Use:   "status",
		Short: "Show secure-gateway modes, sessions, gateway health, machine load and the store (etcd members, nodes)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return f.do(cmd, http.MethodGet, "/v1/admin/status", nil) },
	}

	var retireNow bool
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Roll a new ticket signing key into the site: it verifies at once and signs 30s later; the old one verifies until its last reconnect ticket has expired",
		Long: `rotate-key rolls a new ticket signing key into the site. The new key verifies at once at
every front door and agent (they reread the keys every few seconds) and signs launch and
reconnect tickets from 30s on; the key it replaces keeps verifying the tickets it signed
until the longest of them (site.tickets.reconnect_ttl) has expired, then retires. On etcd the
keys are the site's, sealed in the store with the site identity; on bolt they are kept in
the front door's data dir (ticket-keys.json, mode 0600). With --retire-now (a key that
leaked) every older key retires the moment the new key signs, 6s later (once every front
door has read it): the tickets they signed open nothing from then on, and their sessions'
clients launch again. Agent tokens (admin agent-token) are made with
the same keys and rotate with them: an old key's token is taken until the key retires. The CA
does not change (admin rotate-ca).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.do(cmd, http.MethodPost, "/v1/admin/rotate-key", map[string]bool{"retire_now": retireNow})
		},
	}
	rotate.Flags().BoolVar(&retireNow, "retire-now", false, "retire every older key when the new one signs, 6s on (a leaked key): their tickets open nothing from then on")

	var caIssue, caRetire bool
	rotateCA := &cobra.Command{
		Use:   "rotate-ca [--issue | --retire]",
		Short: "Rotate the site CA in three steps: start (a new CA trusted beside the old), --issue (the new CA issues), --retire (the old CA is trusted no more)",
		Long: `rotate-ca replaces the site CA, which issues the gateways', the machines' and (with the
internal issuer) the listeners' certificates, in three steps, at least 30s apart so that
every front door (they reread the site identity every few seconds) and agent (every 10s)
follows each one:

  rotate-ca           makes a new CA, trusted beside the old one, which still issues. Every
                      front door's ca.pem then holds both: give it to clients and browsers.
  rotate-ca --issue   makes the new CA issue: the listeners' and gateways' certificates are
                      issued anew at once, and agents renew theirs within seconds.
  rotate-ca --retire  stops trusting the old CA; ca.pem holds the new one alone.

An agent that was off through the first step comes back with the new ca.pem (--ca). On etcd
the CA is the site's, sealed in the store; on bolt it is the front door's data dir
(ca-state.json, mode 0600, once rotated). Each step is in the audit log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			step := pki.CAStart
			switch {
			case caIssue && caRetire:
				return errors.New("--issue or --retire, not both")
			case caIssue:
				step = pki.CAIssue
			case caRetire:
				step = pki.CARetire
			}
			return f.do(cmd, http.MethodPost, "/v1/admin/rotate-ca", wire.RotateCARequest{Step: step})
		},
	}
	rotateCA.Flags().BoolVar(&caIssue, "issue", false, "the second step: the new CA issues")
	rotateCA.Flags().BoolVar(&caRetire, "retire", false, "the last step: the old CA is trusted no more")
	caShow := &cobra.Command{
		Use:   "ca",
		Short: "Show the site CA: the CA that issues, every CA trusted, a rotation under way and what to do next",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return f.do(cmd, http.MethodGet, "/v1/admin/ca", nil) },
	}

	enrol := &cobra.Command{
		Use:   "enrol MACHINE",
		Short: "Issue an enrolment ticket for MACHINE's agent: good once, for an hour (frontdoor agent --token)",
		Long: `enrol issues an enrolment ticket for the agent of MACHINE, signed with the site's ticket key:
the agent presents it once, within an hour, to obtain its certificate from the site CA
(frontdoor agent --token TICKET), and from then on authenticates with the certificate,
which it renews itself. Works on every store; the ticket is used up site-wide.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.do(cmd, http.MethodPost, "/v1/admin/enrolment", map[string]string{"machine": args[0]})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke-machine MACHINE",
		Short: "Revoke MACHINE's credentials site-wide, end its sessions and put it in maintenance",
		Long: `revoke-machine refuses, at every front door and gateway, every credential issued to
MACHINE until now: its certificates (gateways end the handshake, the agent API turns its
agent away), its enrolment tickets and its token. The machine's sessions are logged off and
the machine is put in maintenance. It comes back by enrolling again (frontdoor admin enrol
MACHINE, then frontdoor agent --token TICKET on the machine); take it out of maintenance then.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.do(cmd, http.MethodPost, "/v1/admin/machines/"+url.PathEscape(args[0])+"/revoke", map[string]string{})
		},
	}

	maint := &cobra.Command{
		Use:   "maintenance MACHINE on|off",
		Short: "Put MACHINE in maintenance (no new session; its sessions carry on) or take it out, site-wide",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "on" && args[1] != "off" {
				return fmt.Errorf("maintenance: %q is neither on nor off", args[1])
			}
			return f.do(cmd, http.MethodPost, "/v1/admin/machines/"+url.PathEscape(args[0])+"/maintenance", map[string]bool{"on": args[1] == "on"})
		},
	}

	var data string
	tok := &cobra.Command{
		Use: "agent-token MACHINE --data DIR",
		Long: `agent-token prints the token a machine's agent may present instead of a certificate, made
with the ticket key that signs now at the front door of DIR (a site of one node: its
ticket-keys.json once a key was rotated, else its site.key). It works until that key retires
(admin rotate-key). On a site of several nodes the keys live sealed in etcd, not in a data
dir: agents enrol for certificates there (admin enrol).`,
		Short: "Print the token a machine's agent presents (derived from the ticket key that signs now, in the data dir)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := signingKey(data)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), api.AgentToken(api.AgentKey(key), args[0]))
			return nil
		},
	}
	tok.Flags().StringVar(&data, "data", "frontdoor-data", "data directory of a front door")

	var certData, out string
	var ttl time.Duration
	cert := &cobra.Command{
		Use:   "client-cert USER --data DIR [--out PREFIX] [--ttl D]",
		Short: "Issue a client certificate for USER from the site CA (a password-less login to the launch API)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(certData, "ca.pem")); err != nil {
				return fmt.Errorf("no site CA in %s: %w", certData, err)
			}
			ca, err := pki.LoadOrCreateCA(certData, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				return err
			}
			c, k, err := ca.IssueClient(args[0], ttl)
			if err != nil {
				return err
			}
			if out == "" {
				out = args[0]
			}
			if err := os.WriteFile(out+".pem", c, 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(out+".key", k, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s.pem and %s.key for %s, valid %s\n", out, out, args[0], ttl)
			return nil
		},
	}
	cert.Flags().StringVar(&certData, "data", "frontdoor-data", "data directory holding the site CA (ca.pem, ca.key)")
	cert.Flags().StringVar(&out, "out", "", "file name prefix (default: the user name)")
	cert.Flags().DurationVar(&ttl, "ttl", 30*24*time.Hour, "validity")
	c.AddCommand(gw, hc, status, rotate, enrol, revoke, maint, tok, cert, newAuditCmd(f), newDrillsCmd(f), newDNSSECCmd(f), rotateCA, caShow)
	return c
}

// signingKey is the ticket key that signs now at the front door of data dir: the keys that
// rotate-key wrote there (node.TicketKeysFile), else the site key. An agent token is made with
// it, and lasts as long as the key verifies (rotate-key rotates tokens too).
func signingKey(data string) (ed25519.PrivateKey, error) {
	if ks, ok, err := node.LocalKeys(data); err != nil {
		return nil, err
	} else if ok {
		k, err := ks.Signing(time.Now())
		if err != nil {
			return nil, fmt.Errorf("ticket keys in %s: %w", data, err)
		}
		return k.Private, nil
	}
	p := filepath.Join(data, "site.key")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("no site key in %s: %w", data, err)
	}
	key, err := ticket.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("site key %s: %w", p, err)
	}
	return key, nil
}
