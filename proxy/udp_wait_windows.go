package proxy

import "syscall"

// waitDatagram returns at once on Windows, which has no nonblocking peek: the flow's reply
// goroutine then waits in ReadBatch with its buffers borrowed, and a refused backend shows
// as ReadBatch's error.
func waitDatagram(syscall.RawConn) error { return nil }
