package node

import (
	"net"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/prometheus/client_golang/prometheus"
)

// perSourceHTTPSConns bounds the connections one source (an IPv4 address, an IPv6 /64)
// holds open at once at an HTTPS listener; the next ones are closed as they are accepted,
// before any TLS. An honest client holds one or two (a launch, a kept-alive connection, an
// agent's long poll); an office behind one NAT whose users all log on at once holds a few
// dozen for well under a second each. Without it, stalled handshakes and slow headers from
// a handful of addresses held every one of the listener's 4,096 places for 5 s + 5 s, and
// honest new connections waited behind them past the client's 3 s TLS timeout.
const perSourceHTTPSConns = 64

// busyHTTPSSource is how many connections a source holds at an HTTPS listener before the
// TLS handshakes of its next ones take turns, busyHTTPSSlots at once (package connlimit's
// BusySource): at the onset of an abuse 512 full handshakes from 8 sources became runnable
// at once, about a quarter of a second of CPU queued in the Go scheduler ahead of every
// honest request; an honest client holds one or two connections and never waits.
const busyHTTPSSource = 8

// busyHTTPSSlots is how many gated handshakes run at once on cpus CPUs: half, at least one.
func busyHTTPSSlots(cpus int) int { return max(1, cpus/2) }

// limitHTTPS bounds the connections of h's listener ln: maxHTTPSConns at once, the oldest
// one waiting for a request closed for a new one when all are taken (package connlimit), and
// perSourceHTTPSConns a source. Behind a trusted load balancer the source is the client of
// the PROXY header (ln reads it before), so the bound holds per client there too; the
// balancer's own connections (no header, or a LOCAL one) are not bounded, for they carry
// many clients and the balancer has limits of its own. The listener's counts are exported
// with the listener's kind and address.
func (r *Node) limitHTTPS(h *httpsListener, ln net.Listener) error {
	l := connlimit.New(ln, connlimit.Options{Max: maxHTTPSConns, PerSource: perSourceHTTPSConns, Exempt: h.trusted,
		BusySource: busyHTTPSSource, BusySlots: busyHTTPSSlots(r.cpus())})
	if err := l.Register(r.o.Registry, prometheus.Labels{"listener": h.kind, "address": h.address}); err != nil {
		l.Close()
		return err
	}
	h.srv.ConnState = l.ConnState
	h.ln = l
	return nil
}
