package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/node"
	"github.com/frontdoor-vdi/frontdoor/store"
	"github.com/frontdoor-vdi/frontdoor/store/etcd"
	"github.com/spf13/cobra"
)

func newInitCmd() *cobra.Command {
	var secret, file, data string
	c := &cobra.Command{
		Use:   "init [--secret FILE] [--config FILE [--data DIR]]",
		Short: "Prepare a site on etcd: write a store secret, create the site identity",
		Long: `init prepares a site whose store is etcd.

  --secret FILE   writes a new store secret (32 random bytes, base64, mode 0600) to FILE, which
                  must not exist. Copy it to every node of the site; site.store.secret_file
                  names it. It seals the site identity (ticket signing key, CA) in etcd.
  --config FILE   creates the site identity in the site's etcd now, sealed with the secret
                  the config names (otherwise the first node to start creates it), and writes
                  the CA certificate that clients trust to DIR/ca.pem (--data, default .).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if secret == "" && file == "" {
				return errors.New("nothing to do: give --secret FILE and/or --config FILE")
			}
			if secret != "" {
				f, err := os.OpenFile(secret, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return fmt.Errorf("writing the store secret: %w", err)
				}
				if _, err := fmt.Fprintln(f, etcd.NewSecret()); err != nil {
					f.Close()
					return err
				}
				if err := f.Sync(); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				fmt.Fprintf(out, "store secret written to %s (mode 0600): copy it to every node of the site\n", secret)
			}
			if file == "" {
				return nil
			}
			cfg, err := configs.LoadFile(file)
			if err != nil {
				return err
			}
			if cfg.Site.Store.Backend != "etcd" {
				return fmt.Errorf("%s: site.store.backend is %s: a site identity is created in etcd only (a node of a bolt site makes its own in its data dir)", file, cfg.Site.Store.Backend)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			st, err := store.Open(cmd.Context(), cfg, store.Options{Node: "init", Logger: log})
			if err != nil {
				return err
			}
			defer st.Close()
			if data == "" {
				data = "."
			}
			_, ca, err := node.LoadIdentity(cmd.Context(), cfg, st, data, log)
			if err != nil {
				return err
			}
			blk, _ := pem.Decode(ca.CertPEM())
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(cert.Raw)
			fmt.Fprintf(out, "site %q: identity sealed in etcd under %s\nCA %q, SHA-256 %x\nCA certificate: %s\n",
				cfg.Site.Name, cfg.Site.Store.Prefix, cert.Subject.CommonName, sum, filepath.Join(data, "ca.pem"))
			return nil
		},
	}
	c.Flags().StringVar(&secret, "secret", "", "write a new store secret to this file")
	c.Flags().StringVar(&file, "config", "", "site configuration whose etcd gets the site identity")
	c.Flags().StringVar(&data, "data", "", "where to write ca.pem (default: the current directory)")
	return c
}
