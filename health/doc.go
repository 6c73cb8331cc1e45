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
// Each probe runs on a goroutine of its own through package net (net.Dialer, a connected
// UDP socket opened for the probe, so that a late reply can never pass for the answer to a
// later one), and TCP sockets are closed with a reset (no TIME_WAIT). An epoll loop of our
// own that ran the tcp, hello and udp probes without a goroutine each was measured against
// this and removed: bench/RESULTS.md, "Health probes: net against the epoll loop".
//
// # Schedule
//
// Each port has a grid of slots Interval apart, with a random phase per port so that targets
// loaded together do not probe together, and each probe starts at its slot, never before it
// (nor after it, but for scheduling delays): two probes of a port start Interval apart, which
// is what the detection bounds below rest on. Phases are multiples of 5ms from one origin
// per Checker, so that ports whose intervals are multiples of 5ms start their probes at
// shared instants and a Checker of thousands of ports wakes at most 200 times a second
// rather than once per probe.
// A probe still unanswered after Timeout is a failure at that instant; the next slot's probe
// starts even if the previous one is still in flight, and a result older than the newest
// recorded one is ignored. With Monitor.Jitter set (default 0), each probe starts up to
// Jitter×Interval before its slot, at a cost in detection time (see below).
//
// # Detection time with the defaults
//
// The defaults (configs and DefaultMonitor) are Interval I = 250ms, Timeout T = 250ms,
// Fall F = 3, Rise R = 2. Let a target fail at instant t0.
//
// Powered off (packets silently dropped). A probe fails only when its timeout expires. The
// last probe that started before t0 may still see the port up; every later one fails. The
// first of those starts with the next slot, at most I after the last one, so at most I after
// t0; the F-th starts (F-1)·I later and fails T after its start:
//
//	worst = I + (F-1)·I + T = F·I + T = 3·250 + 250 = 1000 ms
//	best  = (F-1)·I + T            = 2·250 + 250 = 750 ms
//
// so about 875 ms on average and at most 1 s (plus a few ms of scheduling). Starting probes
// exactly I apart is what keeps the worst case at F·I + T. A probe that starts e before its
// slot can start just before t0 for a slot after it and see the port up, so the failing
// probes start up to e later: with Monitor.Jitter = J the worst case is F·I + J·I + T
// (1025 ms for J = 0.1), and jitter in both directions would make it F·I + 2·J·I + T. The
// random phase of each port spreads probes without that cost, so the default is J = 0.
//
// Killed or port closed (RST, or ICMP port-unreachable on UDP). Failing probes return at
// once: worst F·I = 750 ms, best (F-1)·I = 500 ms. With one required port closed the
// target's verdict changes at the same instant as that port's state.
//
// Back up: R consecutive successes, at most R·I = 500 ms after the service answers again.
//
// Passive: Monitor.PassiveFailures reports (default 3) within PassiveWindow (default 5s)
// mark the port down at once, before the next probe; only probes bring it back.
//
// A starved prober. A timeout counts only if this process was on time to see the answer:
// when a runnable goroutine of it waited T/4 or more for a CPU while the probe ran (the
// runtime's scheduling latencies; starved.go), the result is held, counted neither way, up
// to F in a row. A node on a saturated core so does not read its own busy gateway as dead;
// a target that dies while its prober is starved goes down after 2·F probes, at most
// 2·F·I + T = 1750 ms. Held probes are counted in frontdoor_health_probes_held_total.
//
// For comparison, HAProxy starts the next check Interval after the previous one ends, so a
// check that times out costs Interval + Timeout and a powered-off server needs up to
// F·(I+T) = 1500 ms with the same settings. bench/failover.sh measures both.
package health
