package proxy

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// deferAcceptControl is a ListenConfig.Control that sets TCP_DEFER_ACCEPT to d (rounded up to
// a second), as the raw engine does; nil for d 0.
func deferAcceptControl(d time.Duration) (func(network, address string, c syscall.RawConn) error, error) {
	if d <= 0 {
		return nil, nil
	}
	secs := int((d + time.Second - 1) / time.Second)
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, secs)
		}); err != nil {
			return err
		}
		return serr
	}, nil
}
