#!/usr/bin/env bash
# bench/zones.sh — zone leader handovers (store/etcd/election.go) and the Local Host Cache's
# outage mode (store/etcd/outage.go), on a real 3-member embedded etcd on loopback without
# fsync, all in one process (bench/zones), over many bounded trials:
#   1. handover after a graceful shutdown (the leader's Elector ctx canceled);
#   2. handover after a crash (the leader's store closed: its etcd client gone, no resignation);
#   3. the run-off when a candidate of a newer version joins;
#   4. outage mode after the quorum is lost (the two members that do not lead stopped at once);
#   5. the write-back when etcd is back, with 0, 100 and 1000 sessions made in the outage.
# Each trial has its own key prefix and is bounded in time; no trial starts after BUDGET. Run from
# anywhere; nothing is pinned (etcd, the nodes and the probes share the host's cores).
#
# Usage: bench/zones.sh   (environment: TRIALS=30 OUTAGES=30 SURVIVORS=5 SESSIONS=0,100,1000
#                           BUDGET=280s OUT=bench/results/zones.md LOG=)
# Writes OUT (the method, the summary against the goals and every trial) and prints the summary;
# the per-trial progress goes to standard error; the stores' and etcd's warnings to LOG if set.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${TRIALS:-30}
OUTAGES=${OUTAGES:-30}
SURVIVORS=${SURVIVORS:-5}
SESSIONS=${SESSIONS:-0,100,1000}
BUDGET=${BUDGET:-280s}
OUT=${OUT:-bench/results/zones.md}
LOG=${LOG:-}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
go build -o "$WORK/zones" ./bench/zones
args=(-trials "$TRIALS" -outage-trials "$OUTAGES" -survivor-trials "$SURVIVORS" -sessions "$SESSIONS" -budget "$BUDGET")
[ -n "$LOG" ] && args+=(-log "$LOG")

start_load=$(cut -d' ' -f1-3 /proc/loadavg)
began=$(date -u +%FT%TZ)
"$WORK/zones" "${args[@]}" >"$WORK/report.md"
{
	echo "# Zone leaders and the Local Host Cache"
	echo
	echo "Produced by \`bench/zones.sh\` (TRIALS=$TRIALS OUTAGES=$OUTAGES SURVIVORS=$SURVIVORS SESSIONS=$SESSIONS BUDGET=$BUDGET)"
	echo "at $began, $(git describe --always --dirty), $(go version | cut -d' ' -f3), on $(nproc) CPUs shared with"
	echo "other work (load average $start_load at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
	echo
	echo "## Method"
	echo
	echo "One process: a 3-member etcd of store/etcdembed (50 ms ticks, 600 ms elections, no fsync) on"
	echo "loopback, and for each trial fresh nodes (each its own etcd.Store, client and Elector, lease TTL"
	echo "1 s) on a key prefix of their own, deleted after it. A trial waits until the zone's leader is"
	echo "settled in every view, then a random 0–350 ms (elections) or 0–250 ms (outages) against the"
	echo "Electors' 100 ms ticks, the lease keep-alives and the stores' 250 ms outage probes. Views and"
	echo "Electors are sampled every 1 ms; every wait is bounded (10 s for a handover, 20 s for outage"
	echo "mode, 60 s for a write-back) and a trial past its bound counts as failed."
	echo
	echo "- **Handovers**: candidates a, b, c of one version (a leads by name). Graceful: a's Run ctx is"
	echo "  canceled (it resigns: key deleted, lease revoked). Crash: a's etcd client is closed, as"
	echo "  election_test does; its lease is left to expire. Timed until b's Elector leads and b's view"
	echo "  shows b (the goal's measure), and until every remaining view does. Run-off: a and b"
	echo "  stand, then n (version 1.1.0) starts standing on a store opened before; timed from n's Run."
	echo "- **Outage**: nodes a and b of zone z1 with an outage plan (100 machines of 20 slots, half of"
	echo "  each machine's slots each) and a cache file, standing for election, knowing all three"
	echo "  members (SURVIVORS trials: only the member that stays up). The two members that do not lead"
	echo "  are stopped at once (StopMember in two goroutines): the quorum is lost. Outage mode is the"
	echo "  time of each node's OnOutage(true) callback, from the first StopMember call; from the moment"
	echo "  etcd stopped answering, taken from a probe loop of the program's own (a linearizable Get"
	echo "  every 10 ms, 250 ms timeout, on its own client: the start of the first failed probe with"
	echo "  no success after it); and from the node's first probe that failed, estimated from the"
	echo "  store's 250 ms probe grid, whose origin is taken as Open's return (a few ms uncertain): the"
	echo "  first grid point after the loss, or the one before it if that began within 10 ms of it."
	echo "- **Write-back**: N sessions (pending, 1 h expiry) are created in the outage, N/2 at each"
	echo "  node, spread over the machines; after both StopMember calls returned, one member is"
	echo "  restarted (the quorum is back when RestartMember returns). Timed from that return to each"
	echo "  node's OnOutage(false) (written back, view reloaded). Meanwhile node a launches a new"
	echo "  session every 20 ms until both nodes are out (the longest such launch is reported). Then"
	echo "  every session of the outage and every launch is counted in etcd, the nodes' conflicts"
	echo "  read, and the other member restarted, untimed."
	echo
	cat "$WORK/report.md"
} >"$OUT"
sed -n '/^## Summary/,/^## Every trial/p' "$WORK/report.md" | sed '$d'
echo "wrote $OUT"
