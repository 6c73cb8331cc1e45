package lab

import "syscall"

// procAttr makes a node process die with the lab: a lab killed without a chance to stop its
// nodes leaves none running. It also puts it in a process group of its own, so that a
// terminal's Ctrl-C reaches the lab alone, which stops its agents' reports, then the nodes:
// a node that got the SIGINT too would take the lab's SIGTERM for a second signal and stop
// at once, without draining, while the agents still reported to it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
