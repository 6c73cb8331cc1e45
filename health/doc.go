// Package health probes gateways, connection servers and machines on every port they serve,
// and decides whether each may take new work.
//
// A Checker probes each port of each Target on its own schedule (TCP connect, TLS hello or
// handshake, HTTP(S) status, UDP request/response), turns results into a port state with rise/fall
// hysteresis, and composes port states into a verdict: with ModeAll a target is up only when
// every required port is up, so a gateway whose 443 is down while 4172 still answers (the
// "black screen" of a load balancer that probes one port) is never eligible. Consumers (gslb,
// proxy, broker) ask Eligible or Status, Subscribe to Events, report connection failures with
// ReportFailure, and admins force a target up, down or draining with SetOverride. The Checker
// does not care who runs it: in distributed mode only a zone's leader runs one.
//
// # Probes
//
// A tls check without a name check is a hello check, like HAProxy's ssl-hello-chk: one
// ClientHello, made once per server name by crypto/tls and replayed, and up when the answer
// starts a ServerHello. It proves that a TLS stack answers on the port without paying for a
// key exchange on every probe; a TLS alert in answer to the hello is down, because a full
// handshake would fail there too. VerifyName turns it into a full handshake with a
// certificate check, and https checks always run one.
//
// On Linux the tcp, tls hello and udp probes run on non-blocking sockets watched by one
// epoll loop for the whole NetProber, which parks in the runtime's own poller: no
// goroutine, net.Conn or timer per probe, TCP sockets closed with a reset (no TIME_WAIT),
// and one connected UDP socket kept per port, replaced after a probe that got no answer so
// that a late reply can never pass for the answer to a later probe. The Checker starts
// those probes with NetProber.Start; other probes, other systems and an injected ProbeFunc
// run a goroutine per probe.
//
// # Schedule
//
// Each port has a grid of slots Interval apart, with a random phase per port so that targets
// loaded together do not probe together. Each probe starts up to Jitter×Interval before its
// slot (never after), and slots stay on the grid, so jitter never delays a probe and never
// accumulates. A probe still unanswered after Timeout is a failure at that instant; the next
// slot's probe starts even if the previous one is still in flight, and a result older than
// the newest recorded one is ignored. Probes due within 5ms of each other start together
// when their jitter allows that early a start, so that a Checker of thousands of ports
// wakes a few hundred times a second rather than once per probe.
//
// # Detection time with the defaults
//
// The defaults (configs and DefaultMonitor) are Interval I = 250ms, Timeout T = 250ms,
// Fall F = 3, Rise R = 2, Jitter J = 0.1. Let a target fail at instant t0.
//
// Powered off (packets silently dropped). A probe fails only when its timeout expires. The
// first probe that can see the failure starts in the next slot, at most I after t0; the
// F-th failing probe starts (F-1)·I later and fails T after its start:
//
//	worst = I + (F-1)·I + T = F·I + T = 3·250 + 250 = 1000 ms
//	best  = (F-1)·I - J·I + T        = 500 - 25 + 250 = 725 ms
//
// so about 875 ms on average and at most 1 s (plus a few ms of scheduling). The early-only
// jitter is what keeps the worst case at F·I + T: jitter that could also delay probes would
// add up to F·J·I = 75 ms.
//
// Killed or port closed (RST, or ICMP port-unreachable on UDP). Failing probes return at
// once: worst F·I = 750 ms, best (F-1)·I - J·I = 475 ms. With one required port closed the
// target's verdict changes at the same instant as that port's state.
//
// Back up: R consecutive successes, at most R·I = 500 ms after the service answers again.
//
// Passive: Monitor.PassiveFailures reports (default 3) within PassiveWindow (default 5s)
// mark the port down at once, before the next probe; only probes bring it back.
//
// For comparison, HAProxy starts the next check Interval after the previous one ends, so a
// check that times out costs Interval + Timeout and a powered-off server needs up to
// F·(I+T) = 1500 ms with the same settings. bench/failover.sh measures both.
package health
