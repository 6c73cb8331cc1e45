package configs

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// Password hashes of "lab" at bcrypt costs 4 and 10.
const (
	hashCost4  = "$2a$04$zp/.d7tjMicTE/brjGwvyuR31aM0cSnBv92SmWnVR2X/wveiHb9fy"
	hashCost10 = "$2a$10$hmIm37EQl2GI6WzyFg.kUe2OoNhztKxrxmbZEcRHkzoi.ekBqG9n2"
)

// A user's password hash is refused below site.auth.min_password_cost (default 10), with the
// file, the line, the key and the command that makes a good one.
func TestMinimumPasswordCost(t *testing.T) {
	for _, tt := range []struct {
		name, site, hash string
		want             string // "" for no error
	}{
		{"a cost-10 hash passes by default", "", hashCost10, ""},
		{"a cost-4 hash is refused by default", "", hashCost4,
			"t.yaml:3: users[0].password_hash: password_hash has bcrypt cost 4, below the site's minimum 10 (site.auth.min_password_cost): make a new hash with `frontdoor hash-password`"},
		{"a site that lowers the minimum to 4 takes a cost-4 hash", "site: {auth: {min_password_cost: 4}}\n", hashCost4, ""},
		{"a site that raises the minimum refuses a cost-10 hash", "site: {auth: {min_password_cost: 12}}\n", hashCost10,
			"t.yaml:4: users[0].password_hash: password_hash has bcrypt cost 10, below the site's minimum 12 (site.auth.min_password_cost)"},
		{"a minimum above hash-password's cost names --cost", "site: {auth: {min_password_cost: 13}}\n", hashCost10,
			"t.yaml:4: users[0].password_hash: password_hash has bcrypt cost 10, below the site's minimum 13 (site.auth.min_password_cost): make a new hash with `frontdoor hash-password --cost 13`"},
		{"a minimum below bcrypt's lowest cost is refused", "site: {auth: {min_password_cost: 2}}\n", hashCost10,
			"t.yaml:1: site.auth.min_password_cost: 2 is outside bcrypt's costs 4..31"},
		{"a minimum above bcrypt's highest cost is refused", "site: {auth: {min_password_cost: 32}}\n", hashCost10,
			"t.yaml:1: site.auth.min_password_cost: 32 is outside bcrypt's costs 4..31"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.site + "zones: [{name: hq, primary: true}]\nusers:\n  - {name: alice, password_hash: \"" + tt.hash + "\"}\n"
			c, err := Load("t.yaml", []byte(src))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Load: %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("Load: %v\nwant an error starting %q", err, tt.want)
			case tt.want == "" && tt.site == "" && c.Site.Auth.MinPasswordCost != DefaultMinPasswordCost:
				t.Fatalf("min_password_cost %d, want the default %d", c.Site.Auth.MinPasswordCost, DefaultMinPasswordCost)
			}
		})
	}
}

// bcryptCost reads the cost as golang.org/x/crypto/bcrypt does, which configs does not import,
// and knows bcrypt's bounds.
func TestBcryptCostAgreesWithBcrypt(t *testing.T) {
	if bcryptMinCost != bcrypt.MinCost || bcryptMaxCost != bcrypt.MaxCost || DefaultMinPasswordCost != bcrypt.DefaultCost {
		t.Fatalf("bounds %d..%d, default %d; bcrypt's %d..%d, %d", bcryptMinCost, bcryptMaxCost, DefaultMinPasswordCost, bcrypt.MinCost, bcrypt.MaxCost, bcrypt.DefaultCost)
	}
	h5, err := bcrypt.GenerateFromPassword([]byte("lab"), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, hash string
		cost       int
		ok         bool
	}{
		{"cost 4", hashCost4, 4, true},
		{"cost 10", hashCost10, 10, true},
		{"one made here", string(h5), 5, true},
		{"version 2b", strings.Replace(hashCost10, "$2a$", "$2b$", 1), 10, true},
		{"version 2y", strings.Replace(hashCost10, "$2a$", "$2y$", 1), 10, true},
		{"a cost past bcrypt's", strings.Replace(hashCost10, "$10$", "$32$", 1), 0, false},
		{"a cost below bcrypt's", strings.Replace(hashCost10, "$10$", "$03$", 1), 0, false},
		{"cut short", hashCost10[:40], 0, false},
		{"an argon2 hash", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", 0, false},
		{"a plain password", "lab", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cost, ok := bcryptCost(tt.hash)
			if ok != tt.ok || (ok && cost != tt.cost) {
				t.Fatalf("bcryptCost(%q) = %d, %v; want %d, %v", tt.hash, cost, ok, tt.cost, tt.ok)
			}
			if ok {
				if c, err := bcrypt.Cost([]byte(tt.hash)); err != nil || c != cost {
					t.Fatalf("bcrypt.Cost = %d, %v; bcryptCost %d", c, err, cost)
				}
			}
		})
	}
}
