//go:build linux && (amd64 || arm64)

package rawio

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxPipe is a Pipe's size (the default of fs.pipe-max-size) and the most bytes one splice
// call moves.
const MaxPipe = 1 << 20

// Pipe is a pipe that moves bytes between TCP Socks with splice(2), so that they never enter
// user space. The zero value is closed; one goroutine at a time uses it.
type Pipe struct {
	fds  [2]int // read and write end
	open bool
}

// Open opens the pipe if it is closed. It fails when the process is out of descriptors or
// pipe memory; the caller then moves the bytes through user space.
func (p *Pipe) Open() error {
	if p.open {
		return nil
	}
	if err := unix.Pipe2(p.fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return os.NewSyscallError("pipe2", err)
	}
	unix.FcntlInt(uintptr(p.fds[0]), unix.F_SETPIPE_SZ, MaxPipe) // smaller works too, in more calls
	p.open = true
	return nil
}

// Close closes the pipe, if open.
func (p *Pipe) Close() {
	if p.open {
		unix.Close(p.fds[0])
		unix.Close(p.fds[1])
		p.open = false
	}
}

// Move moves up to n bytes from src to dst through the open pipe, waiting for src's bytes and
// for room at dst. It returns io.EOF if src is at EOF before any byte moved; at EOF after
// some, it returns what moved, and the next wait sees the EOF again.
func (p *Pipe) Move(src, dst *Sock, n int) (int64, error) {
	var moved int64
	for moved < int64(n) {
		var in int
		var serr error
		err := src.ReadWith(func(fd uintptr) bool {
			in, serr = SpliceOnce(int(fd), p.fds[1], min(n-int(moved), MaxPipe))
			return serr != unix.EAGAIN
		})
		if err = src.ErrOf(err); err == nil {
			err = serr
		}
		if err != nil {
			return moved, err
		}
		if in == 0 {
			if moved == 0 {
				return 0, io.EOF
			}
			return moved, nil
		}
		for in > 0 {
			var out int
			err := dst.WriteWith(func(fd uintptr) bool {
				out, serr = SpliceOnce(p.fds[0], int(fd), in)
				return serr != unix.EAGAIN
			})
			if err = dst.ErrOf(err); err == nil {
				err = serr
			}
			if err != nil {
				return moved, err
			}
			in -= out
			moved += int64(out)
		}
	}
	return moved, nil
}

// SpliceOnce is one nonblocking splice(2) call of at most n bytes from one descriptor to the
// other: unix.EAGAIN when either is not ready.
func SpliceOnce(from, to, n int) (int, error) {
	for {
		m, err := unix.Splice(from, nil, to, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, err
		case err != nil:
			return 0, os.NewSyscallError("splice", err)
		}
		return int(m), nil
	}
}
