//go:build !linux

package health

import (
	"net/netip"
	"testing"
)

// fullBacklog needs Linux's accept queue, which drops SYNs once it is full (backlog_linux_test.go);
// elsewhere the tests that use it are skipped.
func fullBacklog(t *testing.T) netip.AddrPort {
	t.Helper()
	t.Skip("a blackholed port needs Linux's accept queue")
	return netip.AddrPort{}
}
