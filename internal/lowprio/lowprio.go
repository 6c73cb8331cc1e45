// Package lowprio runs CPU-bound work that may wait (password hashing) on an operating-system
// thread of its own at a low scheduling priority, so that the kernel preempts it whenever a
// thread serving requests wakes. Go's scheduler cannot do that: a goroutine computing a
// bcrypt hash holds its P until the runtime preempts it, every 10 ms, so each request the
// same CPU serves meanwhile waits up to 10 ms at each of its wake-ups. Measured on one CPU
// with one cost-10 comparison every 250 ms beside a small TCP echo, with a spare GOMAXPROCS
// slot for the thread: the echo's p99 was 33 ms with a goroutine, 0.11 ms with a thread of
// its own at nice 0 (max 4.1 ms) and 0.07–0.10 ms at nice 10 (max 0.5 ms). The priority
// matters when many comparisons come at once: at nice 0 the first guesses of an abuse
// (clean logins: their sources had not failed yet), compared back to back, held the CPU
// for half a second while honest requests waited (bench/abuse.sh run 16: 527 ms at the
// onset, against 31–44 ms at nice 10). The price: a lowered priority yields to every other
// process on the host too, so a saturated host slows logins (beside a busy loop, 8 cost-10
// comparisons in 5 s at nice 10, against 20 at nice 0 and 1 at 19).
//
// The thread needs a P of the Go runtime while it runs: a process that runs work here
// should keep one GOMAXPROCS slot beyond its CPUs for each piece that may run at once, or
// the work takes a P from the goroutines it was meant to yield to (as a goroutine would).
// Setting GOMAXPROCS is the program's business (cmd/frontdoor serve), not this package's.
//
// On Linux the thread gets its nice value (Low, Lowest); elsewhere the work runs on a
// goroutine at the normal priority.
package lowprio

import "runtime"

// The nice values of the threads on Linux.
const (
	// Low is about a tenth of a normal thread's share of a CPU that both want: the work
	// still progresses on a saturated host, and yields at once to a thread that wakes.
	Low = 10
	// Lowest is the least share the kernel gives: the work runs on an idle CPU, and barely
	// while another thread wants it.
	Lowest = 19
)

// Run runs fn on a new thread at nice value nice (Low or Lowest) and returns what it
// returns. The thread ends with fn: it is locked and never unlocked, so the runtime does
// not reuse it at a lowered priority.
func Run[T any](nice int, fn func() T) T {
	ch := make(chan T, 1)
	go func() {
		runtime.LockOSThread()
		lower(nice)
		ch <- fn()
	}()
	return <-ch
}
