package node

import (
	"cmp"
	"net"
	"time"

	"github.com/frontdoor-vdi/frontdoor/internal/connlimit"
	"github.com/prometheus/client_golang/prometheus"
)

// maxHTTPSConns bounds the connections one HTTPS listener serves at once (the process may
// hold 20,000 descriptors here).
const maxHTTPSConns = 4096

// perSourceHTTPSConns bounds the connections one source (an IPv4 address, an IPv6 /64)
// holds open at once at an HTTPS listener of max places, a quarter of them; the next ones are
// closed as they are accepted, before any TLS. It keeps one source from taking every
// descriptor; it is not what stops an abuser, for an office behind one NAT holds hundreds
// at 9:00 (its users' browsers, kept alive, and the machines' agents). What a source costs is
// bounded instead: its handshakes take turns past busyHTTPSSource, its requests in flight
// are bounded by perSourceHTTPSRequests, and a connection that stalls — before its headers,
// or before its body, or waiting a turn for a password check — is closed for a new one
// when the listener is full (package connlimit).
func perSourceHTTPSConns(max int) int { return max / 4 }

// perSourceHTTPSRequests bounds the requests one source has in flight at once at an HTTPS
// listener of max places, an eighth of them: the next is answered 503 with Retry-After. A logon
// storm of an office behind one NAT has its users' logins in flight at once, queued for
// their password checks (a few dozen at a time); agents behind one address hold a long
// poll each.
func perSourceHTTPSRequests(max int) int { return max / 8 }

// bodyTimeout bounds the wait for a request's body at an HTTPS listener: the APIs' bodies
// are a few hundred bytes, sent with their headers.
const bodyTimeout = 5 * time.Second

// busyHTTPSSource is how many connections a source holds at an HTTPS listener before the
// TLS handshakes of its next ones take turns, busyHTTPSSlots at once (package connlimit's
// BusySource): at the onset of an abuse 512 full handshakes from 8 sources became runnable
// at once, about a quarter of a second of CPU queued in the Go scheduler ahead of every
// honest request. An honest client holds one or two connections and never waits; a few
// dozen users behind one address, each making a new connection per request (the fresh
// clients of bench/abuse.sh: 20 launches a second, each with its logoff), hold up to about
// 20 at once and do not either, while the gated handshakes share busyHTTPSShare.
const busyHTTPSSource = 32

// busyHTTPSSlots is how many gated handshakes run at once on cpus CPUs: half, at least one.
func busyHTTPSSlots(cpus int) int { return max(1, cpus/2) }

// busyHTTPSShare is the most CPU time the gated handshakes take on cpus CPUs: a quarter.
// With slots alone, a flood of full handshakes from a few sources (the review's bodyless
// requests reconnect every 5 s) took a node of one CPU whole, one slot at a time, and the
// honest clients' requests waited behind them; a quarter of one CPU still runs about 250
// handshakes a second, for an office behind one NAT whose users log on together.
func busyHTTPSShare(cpus int) float64 { return 0.25 * float64(max(1, cpus)) }

// limitHTTPS bounds the connections of h's listener ln: maxHTTPSConns at once, the oldest
// one waiting for a request (or its body, or a turn) closed for a new one when all are
// taken (package connlimit), perSourceHTTPSConns and perSourceHTTPSRequests a source, and
// bodyTimeout for a body. Behind a trusted load balancer the source is the client of
// the PROXY header (ln reads it before), so the bound holds per client there too; the
// balancer's own connections (no header, or a LOCAL one) are not bounded, for they carry
// many clients and the balancer has limits of its own. The listener's counts are exported
// with the listener's kind and address.
func (r *Node) limitHTTPS(h *httpsListener, ln net.Listener) error {
	most := cmp.Or(r.httpsMax, maxHTTPSConns)
	l := connlimit.New(ln, connlimit.Options{Max: most, PerSource: perSourceHTTPSConns(most), Exempt: h.trusted,
		BusySource: busyHTTPSSource, BusySlots: busyHTTPSSlots(r.cpus()), BusyShare: busyHTTPSShare(r.cpus()),
		RequestsPerSource: perSourceHTTPSRequests(most), BodyTimeout: bodyTimeout})
	if err := l.Register(r.o.Registry, prometheus.Labels{"listener": h.kind, "address": h.address}); err != nil {
		l.Close()
		return err
	}
	h.srv.ConnState, h.srv.ConnContext = l.ConnState, l.ConnContext
	h.srv.Handler = l.Handler(h.srv.Handler)
	h.ln = l
	return nil
}
