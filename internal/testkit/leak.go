package testkit

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests and fails them if a goroutine outlives them (goleak), but for
// two of certmagic's, which are not ours to end: its file storage refreshes a lock every 5 s
// from a goroutine that notices the unlock only when it next wakes, and it keeps one rate
// limiter for each ACME CA and account a process has used, for the process's life (a
// package-level map), each with its goroutine.
func Main(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh"),
		goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.(*RingBufferRateLimiter).loop"))
}

// MainFastChecked is Main for a package whose site tests embed etcd members in the test
// process: their HTTP connections outlive the member's Close, so goleak checks the fast tier
// only, and with FRONTDOOR_SITE_TESTS=1 the tests run unchecked.
func MainFastChecked(m *testing.M) {
	if os.Getenv(SiteTests) == "1" {
		os.Exit(m.Run())
	}
	Main(m)
}
