package lowprio

import "golang.org/x/sys/unix"

// lower sets the calling thread's nice value to Nice. It may fail only for a thread that
// is already lower, which is fine.
func lower() { _ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), Nice) }
