//go:build !unix

package testkit

import "testing"

// Alone makes t run while no other test that called Alone or Beside runs on this machine.
// Outside Unix it takes no lock: the second tier runs on Linux.
func Alone(t testing.TB) { t.Helper() }

// Beside makes t run while no test that called Alone runs. Outside Unix it takes no lock.
func Beside(t testing.TB) { t.Helper() }
