//go:build linux

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileCommands are the gateway process's PROF and PROFEND commands: a CPU profile of the
// process between them, written to path (with path "", none: the commands do nothing).
// PROFEND answers PROFILED once the profile is written.
func profileCommands(path string) map[string]func() {
	h := map[string]func(){}
	if path == "" {
		return h
	}
	var f *os.File
	h["PROF"] = func() {
		var err error
		if f, err = os.Create(path); err != nil {
			fmt.Fprintln(os.Stderr, "gateway-flood: profile:", err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "gateway-flood: profile:", err)
			f.Close()
			f = nil
		}
	}
	h["PROFEND"] = func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
			f = nil
		}
		fmt.Println("PROFILED")
	}
	return h
}
