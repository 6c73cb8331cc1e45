// Package lowprio runs CPU-bound work that may wait (password hashing) on an operating-system
// thread of its own at a low scheduling priority, so that the kernel preempts it whenever
// a thread serving requests has work. Go's scheduler cannot do that: a goroutine computing
// a bcrypt hash holds its CPU until the runtime preempts it, every 10 ms, so each request
// the same CPU serves meanwhile waits up to 10 ms at each of its wake-ups. Measured on one
// CPU with one cost-10 comparison every 250 ms beside a small TCP echo: the echo's p99 went
// from 33 ms (a goroutine) to 0.07 ms (a niced thread, with a spare GOMAXPROCS slot for it).
//
// The thread needs a P of the Go runtime while it runs: a process that runs work here
// should keep one GOMAXPROCS slot beyond its CPUs for each piece that may run at once, or
// the work takes a P from the goroutines it was meant to yield to (as a goroutine would).
// Setting GOMAXPROCS is the program's business (cmd/frontdoor serve), not this package's.
//
// On Linux the thread gets a nice value (Low, Lowest); elsewhere the work runs on a goroutine at
// the normal priority.
package lowprio

import "runtime"

// The nice values of the threads on Linux.
const (
	// Low is about a tenth of a normal thread's share of a CPU that both want, so the work
	// still progresses on a saturated node (on one CPU, cost-10 comparisons beside a busy
	// loop: 8 in 5 s at 10, against 20 at the normal priority and 1 at 19), and it yields
	// at once to a thread that wakes.
	Low = 10
	// Lowest is the least share the kernel gives: the work runs on an idle CPU, and barely
	// while a thread at Low or above wants it (about 12% of what a Low thread gets).
	Lowest = 19
)

// Run runs fn on a new thread at nice value nice (Low or Lowest) and returns what it
// returns. The thread ends with fn: it is locked and never unlocked, so the runtime does
// not reuse it at the lowered priority.
func Run[T any](nice int, fn func() T) T {
	ch := make(chan T, 1)
	go func() {
		runtime.LockOSThread()
		lower(nice)
		ch <- fn()
	}()
	return <-ch
}
