//go:build linux && (amd64 || arm64)

package gslb

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
)

// mmsgOut is one worker's replies and their message headers; it lives on the heap so that
// the kernel sees stable addresses.
type mmsgOut struct {
	out   [batchSize][]byte
	oiovs [batchSize]syscall.Iovec
	ohdrs [batchSize]rawio.Mmsghdr
}

// rawUDP is the blocking socket of a loop with BlockingUDP (see package rawio).
type rawUDP = rawio.Sock

// listenRawUDP opens a blocking UDP socket on addr. It returns nil, nil when addr is not an
// IP literal and port; the caller then uses a socket of the net package.
func listenRawUDP(addr string) (*rawUDP, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !rawio.Usable(ap) {
		return nil, nil
	}
	r, err := rawio.ListenUDP(ap, 0)
	if err != nil {
		return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
	}
	return r, nil
}

// rawWorkers returns the one blocking worker of a loop on a rawUDP socket.
func (u *udpLoop) rawWorkers() []func() error {
	return []func() error{func() error { return u.serveMmsg(u.raw.RawConn()) }}
}

func (u *udpLoop) serveMmsg(rc syscall.RawConn) error {
	in := rawio.NewReceiver(u.raw, batchSize, maxUDPRequest, u.coalesce)
	st := new(mmsgOut)
	for i := range st.out {
		st.out[i] = make([]byte, 0, 2048)
		st.ohdrs[i].Hdr.Iov = &st.oiovs[i]
		st.ohdrs[i].Hdr.Iovlen = 1
	}
	w := &udpWriter{local: u.local}
	// The send, made once as a closure: a closure built per call would escape to the heap
	// (Control is an interface method) and allocate on every batch.
	var n, k, off int
	var errno syscall.Errno
	send := func(fd uintptr) {
		n, errno = rawio.Sendmmsg(fd, st.ohdrs[off:k], unix.MSG_DONTWAIT)
	}
	for {
		got, err := in.Next(&u.stop)
		if err != nil || got == 0 {
			return err
		}
		k = 0
		for i := range got {
			req, peer, bad := in.Datagram(i)
			if bad {
				continue
			}
			w.reset(peer, st.out[k])
			u.answer(w, req)
			if len(w.reply) == 0 {
				continue
			}
			st.out[k] = w.buf
			st.oiovs[k].Base = &w.reply[0]
			st.oiovs[k].SetLen(len(w.reply))
			name, namelen := in.Name(i)
			st.ohdrs[k].Hdr.Name = (*byte)(unsafe.Pointer(name))
			st.ohdrs[k].Hdr.Namelen = namelen
			k++
		}
		for off = 0; off < k; {
			if err := rc.Control(send); err != nil {
				return nil
			}
			switch errno {
			case 0:
				off += n
			case syscall.EINTR:
			default: // a full send buffer or an unreachable peer: drop that reply
				off++
			}
		}
	}
}
