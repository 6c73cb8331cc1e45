package testkit

import (
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests and fails them if a goroutine outlives them (goleak), but for
// the goroutines of other projects that end by themselves a little later: certmagic's file
// storage refreshes a lock every 5 s from a goroutine that notices the unlock only when it
// next wakes.
func Main(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh"))
}
