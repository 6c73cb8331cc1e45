package testkit

import (
	"os"
	"testing"
)

// SiteTests names the environment variable that turns the second tier of tests on.
const SiteTests = "FRONTDOOR_SITE_TESTS"

// Site marks t as a test of the second tier: one that starts an etcd cluster, a whole site
// (a lab, node processes, a drill) or a browser. `go test ./...` is the fast tier and skips
// it; `FRONTDOOR_SITE_TESTS=1 go test ./...` runs both tiers, as CI does. A site test runs
// Alone: two sites on two busy cores would measure each other.
func Site(t testing.TB) {
	t.Helper()
	if os.Getenv(SiteTests) != "1" {
		t.Skip("a site test (etcd, a whole site or a browser): the second tier, " + SiteTests + "=1 go test ./...")
	}
	Alone(t)
}
