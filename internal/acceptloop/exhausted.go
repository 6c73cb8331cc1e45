//go:build !plan9

package acceptloop

import (
	"errors"
	"syscall"
)

// exhausted reports whether err is an accept that failed for want of descriptors or memory,
// which the next accept meets too until some are freed.
func exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}
