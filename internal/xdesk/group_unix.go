//go:build unix

package xdesk

import (
	"errors"
	"os"
	"syscall"
)

// terminate asks the process group led by p to exit (SIGTERM).
func terminate(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

// kill kills the process group led by p (SIGKILL).
func kill(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

// signalGroup sends sig to the process group led by p; a group that is gone is no error.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if p == nil {
		return nil
	}
	if err := syscall.Kill(-p.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
