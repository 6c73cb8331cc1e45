#!/usr/bin/env bash
# bench/proxy-ab.sh — A/B of two builds of frontdoor's proxy on short connections: the bench
# proxy (bench/proxy) of git revisions A and B, each run alone on PROXY_CPU in alternating
# rounds, loaded by wrk -c32 with "Connection: close" against a loopback nginx origin on
# LOAD_CPU. Prints each round's conn/s and CPU µs per connection, then the median of the
# per-round ratios B ÷ A and their range.
#
# A change of a few percent drowns in the drift of a shared host between whole runs; rounds
# that alternate, paired, show it. Do not run the two builds at once on one CPU: the scheduler
# shares a CPU between threads, not processes, so the build with more threads gets more of it.
#
# Usage: bench/proxy-ab.sh REV_A REV_B [ROUNDS] — e.g. bench/proxy-ab.sh HEAD~1 HEAD 8.
# ARGS are the serve flags of the listener (default -tcp-no-half-close; -tcp for half-close),
# DUR the seconds per round (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/proxy-ab.sh REV_A REV_B [ROUNDS]}
B=${2:?usage: bench/proxy-ab.sh REV_A REV_B [ROUNDS]}
ROUNDS=${3:-8}
DUR=${DUR:-5}
ARGS=${ARGS:--tcp-no-half-close}
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}

. bench/lib.sh
install_missing nginx=nginx wrk=wrk
trap 'cleanup; git worktree prune' EXIT

# build REV NAME — the bench proxy of REV, built from a worktree of its own.
build() {
	git worktree add --detach "$WORK/tree" "$1" >/dev/null 2>&1
	(cd "$WORK/tree" && go build -o "$WORK/$2" ./bench/proxy)
	git worktree remove --force "$WORK/tree"
}
build "$A" a
build "$B" b

start_origin "$LOAD_CPU"
wait_port 18080

# round BUILD — one round of BUILD alone: "conn/s µs/conn".
round() {
	taskset -c "$PROXY_CPU" "$WORK/$1" serve -defer-accept $ARGS 127.0.0.1:16100=127.0.0.1:18080 >"$WORK/$1.log" 2>&1 &
	local pid=$!
	wait_port 16100
	local c0 c1
	c0=$(cpu_ticks "$pid")
	taskset -c "$LOAD_CPU" wrk -t1 -c32 -d"${DUR}s" -H 'Connection: close' http://127.0.0.1:16100/ >"$WORK/wrk.txt"
	c1=$(cpu_ticks "$pid")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	local rps reqs
	rps=$(awk '/Requests\/sec/{print $2}' "$WORK/wrk.txt")
	reqs=$(awk '/requests in/{print $1}' "$WORK/wrk.txt")
	echo "$rps $(echo "($c1-$c0)*1000000/$TCK/$reqs" | bc -l)"
	sleep 1
}

echo "A = $A ($(git rev-parse --short "$A")), B = $B ($(git rev-parse --short "$B")), listener $ARGS, $ROUNDS rounds of ${DUR}s"
: >"$WORK/pairs"
for r in $(seq "$ROUNDS"); do
	# Alternate which build goes first, so neither always follows the other.
	if [ $((r % 2)) -eq 1 ]; then
		read -r ra ca < <(round a)
		read -r rb cb < <(round b)
	else
		read -r rb cb < <(round b)
		read -r ra ca < <(round a)
	fi
	printf 'round %d: A %8.0f conn/s %6.1f µs/conn | B %8.0f conn/s %6.1f µs/conn\n' "$r" "$ra" "$ca" "$rb" "$cb"
	echo "$ra $ca $rb $cb" >>"$WORK/pairs"
done
python3 - "$WORK/pairs" <<'PY'
import sys, statistics
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
rate = [rb / ra for ra, ca, rb, cb in rows if ra]
cpu = [cb / ca for ra, ca, rb, cb in rows if ca]
print(f"B ÷ A, median of {len(rows)} paired rounds: rate {statistics.median(rate):.3f}× "
      f"(rounds {min(rate):.2f}–{max(rate):.2f}), CPU per connection {statistics.median(cpu):.3f}× "
      f"(rounds {min(cpu):.2f}–{max(cpu):.2f})")
PY
