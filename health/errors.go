package health

import "errors"

// The errors of this package. Probe failures wrap the underlying network error; callers test
// them with errors.Is.
var (
	// ErrInvalidTarget: a target or port in the configuration cannot be probed.
	ErrInvalidTarget = errors.New("invalid health target")
	// ErrUnknownTarget: no target has that name.
	ErrUnknownTarget = errors.New("unknown health target")
	// ErrUnknownPort: the target has no such port.
	ErrUnknownPort = errors.New("unknown port")
	// ErrDraining: the service answered but asks for no new work (HTTP 503).
	ErrDraining = errors.New("draining")
	// ErrTimeout: the probe got no answer within the monitor's timeout.
	ErrTimeout = errors.New("probe timed out")
	// ErrBadReply: the service answered something other than what the check expects.
	ErrBadReply = errors.New("unexpected reply")
	// ErrPortUnreachable: a UDP probe got an ICMP port-unreachable (ECONNREFUSED).
	ErrPortUnreachable = errors.New("port unreachable")
	// ErrRunning: Run was called on a Checker that is already running.
	ErrRunning = errors.New("health checker already running")
	// ErrClosed: the Checker was closed.
	ErrClosed = errors.New("health checker closed")
)
