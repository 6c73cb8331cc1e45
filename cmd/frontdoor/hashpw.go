package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
)

func newHashPasswordCmd() *cobra.Command {
	var cost int
	c := &cobra.Command{
		Use:   "hash-password",
		Short: "Read a password on standard input and print its bcrypt hash, for a user's password_hash",
		Long: fmt.Sprintf(`hash-password reads one line, the password, from standard input and prints its bcrypt
hash (cost %d; --cost for more, for a site whose site.auth.min_password_cost is higher) for
the password_hash of a user in the site configuration:

  printf '%%s\n' "$PASSWORD" | frontdoor hash-password`, configs.PasswordHashCost),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cost < configs.DefaultMinPasswordCost || cost > bcrypt.MaxCost {
				return fmt.Errorf("hash-password: --cost %d is outside %d..%d", cost, configs.DefaultMinPasswordCost, bcrypt.MaxCost)
			}
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && line == "" {
				return errors.New("hash-password: no password on standard input")
			}
			pw := strings.TrimRight(line, "\r\n")
			if pw == "" {
				return errors.New("hash-password: the password is empty")
			}
			h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
			if err != nil {
				return fmt.Errorf("hash-password: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(h))
			return nil
		},
	}
	c.Flags().IntVar(&cost, "cost", configs.PasswordHashCost, "bcrypt cost of the hash (at least the default minimum, 10)")
	return c
}
