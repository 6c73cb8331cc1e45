package acceptloop

import (
	"errors"
	"syscall"
)

// exhausted reports whether err is an accept that failed for want of descriptors, which the
// next accept meets too until some are freed.
func exhausted(err error) bool { return errors.Is(err, syscall.EMFILE) }
