//go:build linux && (amd64 || arm64)

package proxy

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/frontdoor-vdi/frontdoor/internal/rawio"
)

// rawSocket is a UDP socket outside the Go poller, used by blocking workers only
// (Options.BlockingUDP; see package rawio): a listening socket, or a flow's socket
// connected to its backend.
type rawSocket = rawio.Sock

// rawEpoll is the set of a raw listener's flow sockets, waited on by its replies worker.
type rawEpoll = rawio.Poll

// rawSender sends batches on raw sockets.
type rawSender = rawio.Sender

func listenRaw(ap netip.AddrPort, buf int) (*rawSocket, error) { return rawio.ListenUDP(ap, buf) }
func dialRaw(ap netip.AddrPort, buf int) (*rawSocket, error)   { return rawio.DialUDP(ap, buf) }
func newRawEpoll(n int) (*rawEpoll, error)                     { return rawio.NewWorkerPoll(n) }
func newRawSender(n int) *rawSender                            { return rawio.NewSender(n, true) }

// rawReadLoop is readLoop on a rawSocket: one worker blocked in recvmmsg, which pauses for the
// listener's UDPCoalesce after a partial batch (see rawio.Receiver). It runs the listener's
// replies worker (rawRepliesLoop) alongside and, when both are done, closes their epoll set.
func (s *Server) rawReadLoop(l *listener) {
	defer s.wg.Done()
	defer close(l.done)
	u := l.udp
	if !u.epOwned.CompareAndSwap(false, true) {
		return // closed before it started
	}
	replies := make(chan struct{})
	go func() {
		defer close(replies)
		s.rawRepliesLoop(u)
	}()
	defer func() {
		u.stop.Store(true) // ends the replies worker if this loop ended on an error
		u.closeFlows("closed")
		<-replies
		u.ep.Close()
	}()
	in := rawio.NewReceiver(u.raw, l.cfg.Batch, l.cfg.MaxDatagram, l.cfg.UDPCoalesce)
	dgs := make([]datagram, 0, l.cfg.Batch)
	fw := newForwarder(l.cfg.Batch)
	for {
		n, err := in.Next(&u.stop)
		if err != nil {
			l.m.err("udp_read")
			s.log.Error("udp listener stopped", "listener", l.cfg.Name, "err", err)
		}
		if err != nil || n == 0 {
			return
		}
		dgs = dgs[:0]
		for i := range n {
			data, from, bad := in.Datagram(i)
			if from.IsValid() {
				dgs = append(dgs, datagram{from: from, data: data, long: bad})
			}
		}
		u.forward(dgs, fw, s.opts.Now())
	}
}

// rawRepliesLoop relays the backends' datagrams to the clients of a raw listener. Its flows'
// sockets are blocking and outside the Go poller like the listening socket, in one epoll set
// that this worker waits on in the kernel. It reads each ready flow with one recvmmsg and
// sends what it read from the listening socket with one sendmmsg, so the client sees the
// replies come from the address it sent to. After a round that moved less than a batch it
// pauses for the listener's UDPCoalesce, so that the next round moves more per wake-up.
// If the set cannot be waited on, the listener stops (stop is set; rawReadLoop ends too).
func (s *Server) rawRepliesLoop(u *udpListener) {
	l := u.l
	batch := l.cfg.Batch
	in := rawio.NewReceiver(nil, batch, l.cfg.MaxDatagram, 0)
	out := newRawSender(batch)
	bufs := make([][]byte, 0, batch)
	pause := unix.NsecToTimespec(int64(l.cfg.UDPCoalesce))
	for {
		n, err := u.ep.Wait(&u.stop)
		if err != nil {
			l.m.err("udp_read")
			s.log.Error("udp listener stopped", "listener", l.cfg.Name, "err", err)
			u.stop.Store(true)
		}
		if err != nil || n == 0 {
			return
		}
		moved := 0
		for i := range n {
			f := u.flowByID(u.ep.ID(i))
			if f == nil {
				continue // ended; its socket leaves the set when closed
			}
			k, err := in.ReadFrom(f.raw)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) && !f.closed.Load() {
					f.backendError(err)
				}
				continue
			}
			moved += k
			bufs = bufs[:0]
			var bytes int64
			for j := range k {
				data, _, bad := in.Datagram(j)
				if bad {
					l.m.err("udp_truncated")
					continue
				}
				bufs = append(bufs, data)
				bytes += int64(len(data))
			}
			f.countOut(len(bufs), bytes)
			if len(bufs) == 0 {
				continue
			}
			// On an error (the listener closed, or its send refused) the rest of the batch is
			// dropped: UDP is lossy.
			if err := out.Send(u.raw, f.peer, bufs); err != nil && !errors.Is(err, net.ErrClosed) {
				l.m.err("udp_send")
			}
		}
		if l.cfg.UDPCoalesce > 0 && moved < batch {
			rawio.Pause(&pause)
		}
	}
}
