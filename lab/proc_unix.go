//go:build unix && !linux

package lab

import "syscall"

// procAttr puts a node process in a process group of its own, so that a terminal's Ctrl-C
// reaches the lab alone, which stops its agents' reports, then the nodes (see the Linux
// procAttr). A child cannot be tied to its parent's life here: a lab killed without a
// chance to stop its nodes leaves them running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
