package lab

import "syscall"

// procAttr makes a node process die with the lab: a lab killed without a chance to stop its
// nodes leaves none running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
