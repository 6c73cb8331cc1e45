package testkit

import (
	"os"
	"testing"
)

// SiteTests names the environment variable that turns the second tier of tests on.
const SiteTests = "FRONTDOOR_SITE_TESTS"

// SecondTier marks t as a test of the second tier: one that starts an etcd cluster or
// Pebble. `go test ./...` is the fast tier and skips it; `FRONTDOOR_SITE_TESTS=1 go test
// ./...` runs both tiers, as CI does. It runs Beside the others of its kind, never beside a
// site test.
func SecondTier(t testing.TB) {
	t.Helper()
	skipFast(t)
	Beside(t)
}

func skipFast(t testing.TB) {
	t.Helper()
	if os.Getenv(SiteTests) != "1" {
		t.Skip("a test of the second tier (etcd, Pebble, a whole site or a browser): " + SiteTests + "=1 go test ./...")
	}
}

// Site marks t as a test of the second tier that starts a whole site (a lab, node
// processes, a drill) or a browser, and runs it Alone: a site beside another, or beside
// etcd clusters, on two busy cores would have its timing measure them.
func Site(t testing.TB) {
	t.Helper()
	skipFast(t)
	Alone(t)
}
