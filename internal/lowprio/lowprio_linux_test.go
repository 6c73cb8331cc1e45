package lowprio

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunLowersOnlyItsOwnThread: fn runs at Nice, and the thread that called Run does not.
func TestRunLowersOnlyItsOwnThread(t *testing.T) {
	niceOf := func() int {
		// getpriority returns 20 - nice for PRIO_PROCESS of a thread id.
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		if err != nil {
			t.Fatal(err)
		}
		return 20 - p
	}
	before := niceOf()
	got := Run(niceOf)
	if got != Nice {
		t.Fatalf("nice inside Run: %d, want %d", got, Nice)
	}
	for range 100 { // the runtime may hand the caller another thread: none of them lowered
		Run(func() int { return 0 })
	}
	if after := niceOf(); after != before {
		t.Fatalf("nice of the caller's thread: %d after Run, %d before", after, before)
	}
}
