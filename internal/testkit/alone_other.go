//go:build !unix

package testkit

import "testing"

// Alone makes t run while no other test that called Alone runs on this machine. Outside Unix
// it takes no lock: the site tests run on Linux.
func Alone(t testing.TB) { t.Helper() }
