//go:build !unix

package xdesk

import (
	"errors"
	"os"
	"os/exec"
)

// newGroup does nothing: without Unix process groups, stopping a process stops only it.
func newGroup(*exec.Cmd) {}

// terminate kills p: there is no gentler signal to send.
func terminate(p *os.Process) error { return kill(p) }

// kill kills p.
func kill(p *os.Process) error {
	if p == nil {
		return nil
	}
	return ignoreDone(p.Kill())
}

// ignoreDone drops the error of signalling a process that has already exited.
func ignoreDone(err error) error {
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}
