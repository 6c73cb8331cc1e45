package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/frontdoor-vdi/frontdoor/configs"
	"golang.org/x/crypto/bcrypt"
)

// hashPassword runs hash-password with args on stdin and returns what it printed.
func hashPassword(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	c := newHashPasswordCmd()
	var out bytes.Buffer
	c.SetIn(strings.NewReader(stdin))
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return strings.TrimSpace(out.String()), err
}

// hash-password prints a bcrypt hash of the line it reads, at configs.PasswordHashCost, which
// the loader takes at the default minimum cost.
func TestHashPasswordPrintsABcryptHash(t *testing.T) {
	h, err := hashPassword(t, "correct horse\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("correct horse")); err != nil {
		t.Fatalf("%q is not a hash of the password: %v", h, err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != configs.PasswordHashCost || cost < configs.DefaultMinPasswordCost {
		t.Fatalf("cost %d, want %d (at least the default minimum %d)", cost, configs.PasswordHashCost, configs.DefaultMinPasswordCost)
	}
	site := "zones: [{name: hq, primary: true}]\nusers: [{name: alice, password_hash: \"" + h + "\"}]\n"
	if _, err := configs.Load("site.yaml", []byte(site)); err != nil {
		t.Fatalf("the loader refuses the hash: %v", err)
	}
	if _, err := hashPassword(t, "\n"); err == nil {
		t.Fatal("an empty password was hashed")
	}
}

// --cost makes a costlier hash, never one below the default minimum.
func TestHashPasswordCost(t *testing.T) {
	h, err := hashPassword(t, "correct horse\n", "--cost", "11")
	if err != nil {
		t.Fatal(err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != 11 {
		t.Fatalf("--cost 11: cost %d", cost)
	}
	if _, err := hashPassword(t, "correct horse\n", "--cost", "4"); err == nil || !strings.Contains(err.Error(), "--cost 4 is outside 10..31") {
		t.Fatalf("--cost 4: %v, want it refused", err)
	}
}
