#!/usr/bin/env bash
# bench/broker-etcd.sh: the broker's site database on etcd against bolt (store/etcd/bench_test.go).
#   1. launches (LAUNCH=1, the default): broker.Launch of new sessions on bolt, on etcd with one
#      broker, on etcd with three brokers over one 3-member cluster (real fsync; with NOFSYNC=1
#      also no-fsync variants), 64 goroutines flat out, then 1,000 launches/s open loop, then
#      filling the site;
#   2. scale (SCALE=1, the default): 10,000 machines / 25,000 sessions and (LARGE=1, the default)
#      100,000 / 250,000 loaded into etcd: restart time, heap and RSS of the view, launches.
# Each runs ROUNDS times, one go test run a round (every store in one round: ratios within a
# round mean most on a shared host); the raw output goes to $OUT, and the medians over the rounds
# of every reported figure are printed. etcd runs in a child process of the test binary; both
# share the host's cores (no pinning by default; CPUS="0,1" or similar runs all under taskset).
#
# Usage: bench/broker-etcd.sh   (environment: ROUNDS=3 LAUNCHES=5000 SCALE_LAUNCHES=3000
#                                 NOFSYNC=1 LAUNCH=1 SCALE=1 LARGE=1 CPUS= OUT=/tmp/broker-etcd.txt)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
LAUNCHES=${LAUNCHES:-5000}
SCALE_LAUNCHES=${SCALE_LAUNCHES:-3000}
NOFSYNC=${NOFSYNC:-1}
LAUNCH=${LAUNCH:-1}
SCALE=${SCALE:-1}
LARGE=${LARGE:-1}
CPUS=${CPUS:-}
OUT=${OUT:-/tmp/broker-etcd.txt}

pin=()
[ -n "$CPUS" ] && pin=(taskset -c "$CPUS")
flags=()
[ "$NOFSYNC" = 1 ] && flags+=(-etcdbench.nofsync)

cd "$ROOT"
: >"$OUT"
status=0
run() {
	echo "+ $*" | tee -a "$OUT"
	"$@" 2>&1 | tee -a "$OUT" || status=1
}
for r in $(seq "$ROUNDS"); do
	[ "$LAUNCH" = 1 ] || break
	echo "# launches, round $r of $ROUNDS, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
	run "${pin[@]}" go test ./store/etcd -run '^$' -bench Launch -benchtime "${LAUNCHES}x" -timeout 30m "${flags[@]}"
done
if [ "$SCALE" = 1 ]; then
	sflags=()
	[ "$LARGE" = 1 ] && sflags+=(-etcdbench.large)
	for r in $(seq "$ROUNDS"); do
		echo "# scale, round $r of $ROUNDS, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
		run "${pin[@]}" go test ./store/etcd -run '^$' -bench Scale -benchtime "${SCALE_LAUNCHES}x" -timeout 30m "${sflags[@]}"
	done
fi

# Medians over the rounds: one line per benchmark, the metrics it reported.
echo
echo "medians over $ROUNDS rounds ($OUT):"
awk '
/^Benchmark/ && $2 ~ /^[0-9]+$/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	for (i = 3; i + 1 <= NF; i += 2) {
		k = name SUBSEP $(i + 1)
		if (!(k in cnt)) { units[name] = units[name] " " $(i + 1) }
		vals[k, ++cnt[k]] = $i
	}
}
function median(k,    m, i, j, t, a) {
	m = cnt[k]
	for (i = 1; i <= m; i++) a[i] = vals[k, i] + 0
	for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	for (o = 1; o <= n; o++) {
		name = order[o]; line = name
		c = split(substr(units[name], 2), u, " ")
		for (i = 1; i <= c; i++) line = line sprintf("  %s=%.4g", u[i], median(name SUBSEP u[i]))
		print line
	}
}' "$OUT"
exit "$status"
