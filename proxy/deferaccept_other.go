//go:build !linux

package proxy

import (
	"errors"
	"syscall"
	"time"
)

// errDeferAccept refuses defer_accept where the system has no TCP_DEFER_ACCEPT: a key that
// would do nothing is an error, not silently ignored.
var errDeferAccept = errors.New("defer_accept is a Linux socket option (TCP_DEFER_ACCEPT): remove it on this system")

func deferAcceptControl(d time.Duration) (func(network, address string, c syscall.RawConn) error, error) {
	if d <= 0 {
		return nil, nil
	}
	return nil, errDeferAccept
}
