//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A CPU hog beside the node (-hog N): a child process of this program (-role hog) whose N
// threads spin on the node's CPU through the abuse, so that the node gets a share of its
// core, as on a host whose other tenants are busy. It is what starves a health probe's
// answer enough for a probe timeout, the case health/starved.go is for.

// hogSink keeps the spinning loops from being optimised away.
var hogSink uint64

// runHog spins n threads until d has passed.
func runHog(n int, d time.Duration) {
	runtime.GOMAXPROCS(n)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var x uint64
			for time.Now().Before(stop) {
				for i := range 1 << 20 {
					x += uint64(i)
				}
			}
			atomic.AddUint64(&hogSink, x)
		})
	}
	wg.Wait()
}

// startHog starts the hog's process pinned to cpu (-1: not pinned) for at most d, and
// returns what stops it.
func startHog(ctx context.Context, n, cpu int, d time.Duration) (stop func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{self, "-role", "hog", "-hog", strconv.Itoa(n), "-limit", d.String()}
	if cpu >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(cpu)}, args...)
	}
	hctx, cancel := context.WithTimeout(ctx, d+10*time.Second)
	cmd := exec.CommandContext(hctx, args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the CPU hog: %w", err)
	}
	progress("a CPU hog of %d threads on the node's CPU", n)
	return func() { cancel(); cmd.Wait() }, nil
}
