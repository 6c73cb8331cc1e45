//go:build unix

package proxy

import "syscall"

// waitDatagram blocks until the socket has a datagram or an error queued; it returns the
// socket error (such as ECONNREFUSED after an ICMP port unreachable) without consuming data.
func waitDatagram(rc syscall.RawConn) error {
	var b [1]byte
	var opErr error
	err := rc.Read(func(fd uintptr) bool {
		_, _, e := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch e {
		case syscall.EAGAIN:
			return false
		case nil:
		default:
			opErr = e
		}
		return true
	})
	if err != nil {
		return err
	}
	return opErr
}
