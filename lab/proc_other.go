//go:build !unix

package lab

import "syscall"

// procAttr is nil where a child cannot be tied to its parent's life: a lab killed without a
// chance to stop its nodes leaves them running.
func procAttr() *syscall.SysProcAttr { return nil }
