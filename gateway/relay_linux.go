//go:build linux && (amd64 || arm64)

package gateway

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
	"golang.org/x/sys/unix"
)

// relay copies src to dst until src ends (nil at io.EOF). Between two TCP connections (a
// sealed channel's legs) the bytes move in the kernel with splice(2) and never enter the
// gateway's memory; between others (a TLS connection, a WebSocket) it is pump.
func relay(dst, src net.Conn) (int64, error) {
	d, derr := rawConn(dst)
	s, serr := rawConn(src)
	if derr != nil || serr != nil {
		return pump(dst, src)
	}
	n, err := spliced(d, s)
	if errors.Is(err, errNoPipe) {
		// Out of descriptors or pipe memory: no byte of src was taken, user space goes on.
		m, err := pump(dst, src)
		return n + m, err
	}
	return n, err
}

// rawConn returns c's raw connection: a TCP connection's (or that of connlimit's connection
// over one); a TLS connection or a WebSocket has none.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("no raw connection")
	}
	return sc.SyscallConn()
}

// errNoPipe: no pipe could be had for a splice.
var errNoPipe = errors.New("no pipe for splice")

// splicePipeSize is the size a pipe asks for (fs.pipe-max-size's default) and the most one
// splice moves.
const splicePipeSize = 1 << 20

// A pipe of spliced: taken while bytes move, given back (empty) when a direction waits, so
// that an idle channel holds no pipe and no buffer. pipes keeps a few for reuse.
type pipe struct{ r, w int }

var pipes = make(chan *pipe, 64)

// pipesOut counts the pipes taken and not yet given back or discarded.
var pipesOut atomic.Int64

func takePipe() (*pipe, error) {
	select {
	case p := <-pipes:
		pipesOut.Add(1)
		return p, nil
	default:
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, errNoPipe
	}
	unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, splicePipeSize) // a smaller one works too
	pipesOut.Add(1)
	return &pipe{fds[0], fds[1]}, nil
}

// giveBack returns an empty pipe for reuse.
func (p *pipe) giveBack() {
	pipesOut.Add(-1)
	select {
	case pipes <- p:
	default:
		p.close()
	}
}

// discard closes a pipe that may hold bytes.
func (p *pipe) discard() {
	pipesOut.Add(-1)
	p.close()
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// spliced moves src's bytes to dst through a pipe until src ends (nil at EOF). It fails with
// errNoPipe, having moved n bytes and taken none beyond them, when no pipe can be had.
func spliced(dst, src syscall.RawConn) (int64, error) {
	var n int64
	for {
		var p *pipe
		var in int
		var serr error
		err := src.Read(func(fd uintptr) bool {
			if p == nil {
				if p, serr = takePipe(); serr != nil {
					return true
				}
			}
			in, serr = rawio.SpliceOnce(int(fd), p.w, splicePipeSize)
			if serr == unix.EAGAIN {
				p.giveBack() // nothing moved: empty while the direction waits
				p = nil
				return false
			}
			return true
		})
		if err == nil {
			err = serr
		}
		if err != nil || in == 0 {
			if p != nil {
				p.giveBack() // nothing moved by the failed or final call
			}
			return n, err // in == 0: EOF
		}
		for in > 0 {
			var out int
			err := dst.Write(func(fd uintptr) bool {
				out, serr = rawio.SpliceOnce(p.r, int(fd), in)
				return serr != unix.EAGAIN
			})
			if err == nil {
				err = serr
			}
			if err != nil {
				p.discard() // it may hold bytes
				return n, err
			}
			in -= out
			n += int64(out)
		}
		p.giveBack()
	}
}
