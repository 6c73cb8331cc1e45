package logins

import (
	"log/slog"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"golang.org/x/crypto/bcrypt"
)

// An unknown user's login compares a hash at the cost most of the users' hashes have, so a
// name cannot be told known or unknown by how long its login takes (finding L2 of the
// security review: unknown names checked a cost-10 hash while the users' were cost 12).
func TestUnknownUsersCompareAtTheUsersCost(t *testing.T) {
	for _, c := range []struct {
		name  string
		costs []int
		want  int
	}{
		{"users at cost 5", []int{5, 5, 7}, 5},
		{"users at the default cost", []int{bcrypt.DefaultCost, bcrypt.DefaultCost}, bcrypt.DefaultCost},
		{"no password users", nil, bcrypt.DefaultCost},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &configs.Config{}
			for i, cost := range c.costs {
				h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Users = append(cfg.Users, configs.User{Name: string(rune('a' + i)), PasswordHash: string(h)})
			}
			a := newAuthenticator(cfg, &loginGuard{}, nil, nil, slog.New(slog.DiscardHandler))
			if got, err := bcrypt.Cost([]byte(a.dummyFor())); err != nil || got != c.want {
				t.Errorf("the unknown users' hash has cost %d (%v), want %d", got, err, c.want)
			}
		})
	}
}
