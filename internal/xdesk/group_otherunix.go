//go:build unix && !linux

package xdesk

import (
	"os/exec"
	"syscall"
)

// newGroup makes cmd the leader of a process group of its own, so that stopping it stops
// whatever it started too.
func newGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
