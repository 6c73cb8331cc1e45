package health

import "time"

// A probe that times out says the target is down only if this process was on time to see
// the answer. When the process's CPU is starved (a node on one busy core, thousands of TLS
// handshakes queued), the answer of a healthy gateway, often one this very process hosts,
// waits in the run queue behind them, and three such probes in a row would read a busy
// node as a dead gateway. So the Checker asks, for each timed-out probe, how long a
// runnable goroutine of this process waited for a CPU while the probe ran (the runtime's
// /sched/latencies:seconds histogram), and holds the result when that reached a quarter of
// the probe's timeout. Held results count neither way; after Fall of them in a row the next
// ones count as failures again, so a dead target behind a starved prober still goes down,
// after at most twice the usual number of probes. Memberlist's Lifeguard ("local health
// aware probe") makes the same call for its failure detector.

// StarvedFunc reports how long, at most, a runnable goroutine of this process waited for a
// CPU between from and now. The Checker calls it for probes that timed out.
type StarvedFunc func(from time.Time) time.Duration
