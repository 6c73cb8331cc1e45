package xdesk

import (
	"os/exec"
	"syscall"
)

// newGroup makes cmd the leader of a process group of its own, so that stopping it stops
// whatever it started too, and has it sent SIGTERM if this process dies without stopping it
// (killed, or a test that timed out). That signal comes when the thread that started cmd
// exits, which in Go is when the process does, unless a goroutine locked to its thread with
// runtime.LockOSThread started cmd and ended.
func newGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
