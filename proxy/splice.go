package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// errIdle ends a connection that moved no byte for the listener's idle timeout.
var errIdle = errors.New("idle timeout")

// pipe copies between client and backend in both directions until both are done, an error
// ends one of them, or the connection is idle for idle. Each direction half-closes the
// other side's write end on EOF. It closes both sockets and returns the bytes moved
// (in = client to backend) and why it ended.
func (s *Server) pipe(client, backend *net.TCPConn, idle time.Duration, lm *listenerMetrics, bm *backendMetrics) (in, out int64, reason string) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := copyHalf(client, backend, idle, &last, lm.bytesOut, bm.bytesOut)
		if err != nil {
			// The backend reset or the connection went idle: end both directions now.
			client.SetLinger(0)
			client.Close()
			backend.Close()
		}
		done <- result{n, err}
	}()
	in, errIn := copyHalf(backend, client, idle, &last, lm.bytesIn, bm.bytesIn)
	if errIn != nil {
		backend.Close()
		client.Close()
	}
	r := <-done
	client.Close()
	backend.Close()
	out = r.n
	switch {
	case errors.Is(errIn, errIdle) || errors.Is(r.err, errIdle):
		reason = "idle"
	case errIn == nil && r.err == nil:
		reason = "eof"
	case errIn != nil && !errors.Is(errIn, net.ErrClosed):
		reason = "client_error"
	case r.err != nil && !errors.Is(r.err, net.ErrClosed):
		reason = "backend_error"
	default:
		reason = "closed"
	}
	return in, out, reason
}

// copyHalf moves bytes from src to dst until src's EOF (then it half-closes dst and returns
// nil) or an error. The payload goes through dst.ReadFrom(&io.LimitedReader{src, n}), which
// Linux serves with splice(2); between bursts the loop waits for readability without a
// splice pipe, so idle connections hold no pipe file descriptors.
func copyHalf(dst, src *net.TCPConn, idle time.Duration, last *atomic.Int64, c1, c2 prometheus.Counter) (int64, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	var total int64
	src.SetReadDeadline(time.Unix(0, last.Load()).Add(idle))
	lr := &io.LimitedReader{R: src}
	for {
		avail, err := waitReadable(rc)
		if err == nil {
			lr.N = int64(avail)
			var n int64
			n, err = dst.ReadFrom(lr)
			if n > 0 {
				total += n
				last.Store(time.Now().UnixNano())
				c1.Add(float64(n))
				c2.Add(float64(n))
			}
		}
		switch {
		case err == nil:
		case err == io.EOF:
			dst.CloseWrite()
			return total, nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Idle only if neither direction moved a byte for idle.
			deadline := time.Unix(0, last.Load()).Add(idle)
			if !time.Now().Before(deadline) {
				return total, errIdle
			}
			src.SetReadDeadline(deadline)
		default:
			return total, err
		}
	}
}

// waitReadable blocks until src has bytes to read and returns how many are queued, or
// returns io.EOF at the peer's FIN, or the socket's error (including a passed read deadline).
func waitReadable(rc syscall.RawConn) (int, error) {
	var avail int
	var opErr error
	err := rc.Read(func(fd uintptr) bool {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			opErr = err
			return true
		}
		if n > 0 {
			avail = n
			return true
		}
		// Nothing queued: EOF, a pending error, or simply no data yet.
		var b byte
		r, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b)), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch {
		case e == unix.EAGAIN:
			return false
		case e != 0:
			opErr = os.NewSyscallError("recvfrom", e)
		case r == 0:
			opErr = io.EOF
		default:
			avail = int(r)
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	return avail, opErr
}
