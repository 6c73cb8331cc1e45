//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
)

// sendHUP sends this process a SIGHUP, as an operator's reload does.
func sendHUP(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
