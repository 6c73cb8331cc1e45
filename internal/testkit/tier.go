package testkit

import (
	"os"
	"testing"
)

// SiteTests names the environment variable that turns the second tier of tests on.
const SiteTests = "FRONTDOOR_SITE_TESTS"

// SecondTier marks t as a test of the second tier: one that starts an etcd cluster or
// Pebble. `go test ./...` is the fast tier and skips it; `FRONTDOOR_SITE_TESTS=1 go test
// ./...` runs both tiers, as CI does.
func SecondTier(t testing.TB) {
	t.Helper()
	if os.Getenv(SiteTests) != "1" {
		t.Skip("a test of the second tier (etcd, Pebble, a whole site or a browser): " + SiteTests + "=1 go test ./...")
	}
}

// Site marks t as a test of the second tier that starts a whole site (a lab, node
// processes, a drill) or a browser, and runs it Alone: two sites on two busy cores would
// measure each other's timing.
func Site(t testing.TB) {
	t.Helper()
	SecondTier(t)
	Alone(t)
}
