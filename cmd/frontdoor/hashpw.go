package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
)

// hashCost is the bcrypt cost of the hashes hash-password makes.
const hashCost = 12

func newHashPasswordCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "hash-password",
		Short: "Read a password on standard input and print its bcrypt hash, for a user's password_hash",
		Long: `hash-password reads one line, the password, from standard input and prints its bcrypt
hash (cost 12) for the password_hash of a user in the site configuration:

  printf '%s\n' "$PASSWORD" | frontdoor hash-password`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && line == "" {
				return errors.New("hash-password: no password on standard input")
			}
			pw := strings.TrimRight(line, "\r\n")
			if pw == "" {
				return errors.New("hash-password: the password is empty")
			}
			h, err := bcrypt.GenerateFromPassword([]byte(pw), hashCost)
			if err != nil {
				return fmt.Errorf("hash-password: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(h))
			return nil
		},
	}
}
