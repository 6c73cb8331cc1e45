package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/frontdoor-vdi/frontdoor/logins"
	"github.com/spf13/cobra"
)

func newTOTPCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "totp",
		Short: "Manage users' one-time codes (TOTP), a second login factor",
	}
	c.AddCommand(newTOTPEnrollCmd())
	return c
}

// totpEnrollOpts are the flags of frontdoor totp enroll.
type totpEnrollOpts struct {
	config, user, file string
}

func newTOTPEnrollCmd() *cobra.Command {
	var o totpEnrollOpts
	c := &cobra.Command{
		Use:   "enroll --config FILE --user U [--file TOTP-FILE]",
		Short: "Give a user a new TOTP secret and print it for an authenticator app",
		Long: `enroll gives a user of the site a new TOTP secret (RFC 6238: six digits, 30-second steps,
SHA-1, what authenticator apps use), writes it to the site's TOTP file — site.auth.totp_file,
or --file for a site that has none yet — replacing the secret the user had, and prints the
otpauth:// URL (for a QR code) and the secret (to type in). The file is created with mode
0600 and must stay so: the launch API refuses a TOTP file that others may read. It reads the
file again when it changes, so the user's code works at once.

The user logs in with the current code beside the password: frontdoor connect --otp CODE, or
the X-Frontdoor-OTP header. Access rules with factors: [password, totp] require it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTOTPEnroll(cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.config, "config", "", "site configuration file (required)")
	f.StringVar(&o.user, "user", "", "user to enroll (required)")
	f.StringVar(&o.file, "file", "", "TOTP file to write (default: the site's site.auth.totp_file)")
	c.MarkFlagRequired("config")
	c.MarkFlagRequired("user")
	return c
}

func runTOTPEnroll(w io.Writer, o totpEnrollOpts) error {
	cfg, err := configs.LoadFile(o.config)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(cfg.Users, func(u configs.User) bool { return u.Name == o.user }) {
		return fmt.Errorf("totp enroll: the site has no user %q", o.user)
	}
	file := o.file
	if file == "" {
		file = cfg.Site.Auth.TOTPFile
	}
	if file == "" {
		return errors.New("totp enroll: the site has no site.auth.totp_file: give --file PATH, then set site.auth.totp_file to it")
	}
	e, err := logins.EnrollTOTP(file, cfg.Site.Name, o.user)
	if err != nil {
		return fmt.Errorf("totp enroll: %w", err)
	}
	fmt.Fprintf(w, "enrolled %s: a new TOTP secret in %s (mode 0600)\n", o.user, file)
	fmt.Fprintf(w, "  otpauth URL: %s\n", e.URL)
	fmt.Fprintf(w, "  secret:      %s\n", e.Secret)
	if cfg.Site.Auth.TOTPFile != file {
		fmt.Fprintf(w, "the site does not read this file yet: set in %s\n  site:\n    auth:\n      totp_file: %s\n", o.config, file)
	}
	fmt.Fprintf(w, "%s logs in with the app's current code beside the password (frontdoor connect --otp CODE)\n", o.user)
	return nil
}
