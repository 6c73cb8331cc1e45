//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// A process started with FRONTDOOR_CPUPROFILE=FILE writes a CPU profile to FILE.PID from a
// SIGUSR1 to the next SIGUSR2: a benchmark brackets its measuring window with them. Without
// the variable the signals keep their default action. Unix only (Windows has no such signals).
func init() {
	path := os.Getenv("FRONTDOOR_CPUPROFILE")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil {
					if err = pprof.StartCPUProfile(f); err != nil {
						f.Close()
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "cpu profile:", err)
					f = nil
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				f.Close()
				f = nil
			}
		}
	}()
}
