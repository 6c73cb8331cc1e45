package lowprio

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunLowersOnlyItsOwnThread: fn runs at the nice value asked for, and the thread that
// called Run does not.
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
	for _, nice := range []int{Low, Lowest} {
		if got := Run(nice, niceOf); got != nice {
			t.Fatalf("nice inside Run(%d): %d", nice, got)
		}
	}
	for range 100 { // the runtime may hand the caller another thread: none of them lowered
		Run(Low, func() int { return 0 })
	}
	if after := niceOf(); after != before {
		t.Fatalf("nice of the caller's thread: %d after Run, %d before", after, before)
	}
}
