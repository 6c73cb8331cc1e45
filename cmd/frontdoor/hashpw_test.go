package main

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// hash-password prints a bcrypt hash of the line it reads, at hashCost, which the loader takes.
func TestHashPasswordPrintsABcryptHash(t *testing.T) {
	c := newHashPasswordCmd()
	var out bytes.Buffer
	c.SetIn(strings.NewReader("correct horse\n"))
	c.SetOut(&out)
	c.SetArgs(nil)
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	h := strings.TrimSpace(out.String())
	if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("correct horse")); err != nil {
		t.Fatalf("%q is not a hash of the password: %v", h, err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != hashCost {
		t.Fatalf("cost %d, want %d", cost, hashCost)
	}
	c = newHashPasswordCmd()
	c.SetIn(strings.NewReader("\n"))
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(nil)
	if err := c.Execute(); err == nil {
		t.Fatal("an empty password was hashed")
	}
}
