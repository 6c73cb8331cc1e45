package main

import "testing"

// sendHUP cannot send a SIGHUP on Windows, where no process can be sent one: the reload tests
// are skipped there.
func sendHUP(t *testing.T) {
	t.Helper()
	t.Skip("no SIGHUP on Windows")
}
