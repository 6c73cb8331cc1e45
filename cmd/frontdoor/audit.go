package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/frontdoor-vdi/frontdoor/api"
	"github.com/spf13/cobra"
)

func newAuditCmd(f *adminFlags) *cobra.Command {
	var limit int
	var before string
	var asJSON bool
	c := &cobra.Command{
		Use:   "audit [--limit N] [--before TIME] [--json]",
		Short: "Print the site's audit log, newest first: who did what, when, from where, at which front door",
		Long: `audit prints the admin actions of the site, newest first, as the admin API records them:
every secure-gateway switch, health override, enrolment ticket, machine revocation and
maintenance, key rotation, session logoff and disconnect, drill report upload and console
login. The log is append-only and the site's: in etcd on a site of several nodes, in the
bolt file on a site of one node. --before pages back (a time in RFC 3339, as the last line
printed shows it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if before != "" {
				q.Set("before", before)
			}
			out, err := f.call(cmd, http.MethodGet, "/v1/admin/audit?"+q.Encode(), nil)
			if err != nil || asJSON {
				cmd.OutOrStdout().Write(out)
				return err
			}
			var l api.AuditList
			if err := json.Unmarshal(out, &l); err != nil {
				return fmt.Errorf("the audit log's answer: %w", err)
			}
			writeAudit(cmd.OutOrStdout(), l)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 100, "entries to print (at most 1000)")
	c.Flags().StringVar(&before, "before", "", "only entries older than this time (RFC 3339)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return c
}

// writeAudit prints entries as a table: time, user, from, node, action, target, detail.
func writeAudit(w io.Writer, l api.AuditList) {
	if l.Error != "" {
		fmt.Fprintf(w, "note: %s\n", l.Error)
	}
	if len(l.Entries) == 0 {
		fmt.Fprintln(w, "no admin action recorded")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tUSER\tFROM\tNODE\tACTION\tTARGET\tDETAIL")
	for _, e := range l.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.User, e.From, e.Node, e.Action,
			dash(e.Target), dash(e.Detail))
	}
	tw.Flush()
	if l.More {
		fmt.Fprintf(w, "older entries: --before %s\n", l.Entries[len(l.Entries)-1].Time.UTC().Format(time.RFC3339Nano))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\t", " ")
}

func newDrillsCmd(f *adminFlags) *cobra.Command {
	c := &cobra.Command{Use: "drills", Short: "List the drill reports a front door holds, or give it one for its console"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the drill reports the front door holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.do(cmd, http.MethodGet, "/v1/admin/drills", nil)
		},
	}
	upload := &cobra.Command{
		Use:   "upload FILE|DIR",
		Short: "Give the front door a drill report (report.json of frontdoor drill --report DIR) for its console's Drills page",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			if st, err := os.Stat(file); err == nil && st.IsDir() {
				file = filepath.Join(file, "report.json")
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			out, err := f.call(cmd, http.MethodPost, "/v1/admin/drills", json.RawMessage(b))
			cmd.OutOrStdout().Write(out)
			return err
		},
	}
	c.AddCommand(list, upload)
	return c
}
