package lowprio

import "golang.org/x/sys/unix"

// lower sets the calling thread's nice value. Raising it is always allowed; a failure
// leaves the thread at its priority, which costs latency, not correctness.
func lower(nice int) { _ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice) }
