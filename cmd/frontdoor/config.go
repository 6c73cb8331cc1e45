package main

import (
	"fmt"
	"time"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/frontdoor-vdi/frontdoor/pki"
	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Work with site configuration files"}
	c.AddCommand(&cobra.Command{
		Use:   "check FILE...",
		Short: "Validate configuration files and print a summary of each",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			bad := 0
			for i, f := range files {
				cfg, err := configs.LoadFile(f)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					bad++
					continue
				}
				if tf := cfg.Site.Auth.TOTPFile; tf != "" {
					// A warning, not an error: the file may live on the nodes only.
					if _, err := logins.ReadTOTPFile(tf); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: site.auth.totp_file: %v (logins with a one-time code fail until it is readable)\n", f, err)
					}
				}
				// Warnings too: the CA files and CRLs may live on the nodes only.
				for _, err := range pki.CheckClientCertificates(cfg.Site.Auth, time.Now()) {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %v\n", f, err)
				}
				if r := cfg.Site.Auth.RADIUS; r != nil {
					if _, err := logins.ReadRADIUSSecret(r.SecretFile); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: site.auth.radius.secret_file: %v (logins that need RADIUS are answered 503 until it is readable)\n", f, err)
					}
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				fmt.Fprint(cmd.OutOrStdout(), cfg.Summary())
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d files are invalid", bad, len(files))
			}
			return nil
		},
	})
	return c
}
