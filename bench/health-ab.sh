#!/usr/bin/env bash
# bench/health-ab.sh — the health prober's I/O paths side by side: package net (a goroutine
# and a net.Conn per probe, HEAD) against the epoll loop of our own that ran the tcp, hello
# and udp probes before 3e77bbe (BASE, default 271ba33, the last commit with it). Both builds
# of bench/failover run in the same session, in paired rounds, alternating which goes first:
#
#   - CPU: 1,000 targets on loopback, each check kind of failover's cpu rows, 1 s interval,
#     900 ms timeout, the prober alone on CPU 0 (the services on both CPUs, as failover.sh);
#   - detection: failover's detect scenarios against HAProxy (pinned to CPU 1).
#
#   [DETECT=0] [BASE=commit] bench/health-ab.sh [rounds] [cpu-seconds] [detect-runs]   (defaults 2, 15, 10)
#
# DETECT=0 skips the detection part.
# Prints markdown. Every process it starts is stopped by its PID. Needs haproxy (installed
# with apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
CPUSECS=${2:-15}
RUNS=${3:-10}
BASE=${BASE:-271ba33}
DETECT=${DETECT:-1}

. bench/lib.sh
install_missing taskset=util-linux haproxy=haproxy

build() { # commit dir
	mkdir -p "$2/src"
	git archive "$1" | tar -x -C "$2/src"
	(cd "$2/src" && go build -o "$2/failover" ./bench/failover)
	rm -rf "$2/src"
}
build "$BASE" "$WORK/epoll"
build HEAD "$WORK/net"

echo "# bench/health-ab.sh $ROUNDS $CPUSECS $RUNS: net (HEAD $(git rev-parse --short HEAD)) against the epoll loop ($BASE), $(date -u +%F)"
echo
echo "$(nproc) CPUs shared with other work; load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(haproxy -v | head -1 | cut -d' ' -f1-3)."
echo

taskset -c 0,1 "$WORK/net/failover" -n 1000 -ports "$WORK/ports" serve &
SERVE=$!
PIDS+=("$SERVE")
for _ in $(seq 100); do [ -f "$WORK/ports" ] && break; sleep 0.1; done
"$WORK/net/failover" -ports "$WORK/ports" reach >/dev/null

echo "## CPU: 1,000 targets on loopback, 1 s interval, 900 ms timeout, prober on CPU 0"
echo
echo "| round | path | targets × checks | interval / timeout | probes/s | failed probes | CPU of one core | CPU µs per probe | targets not up at the end |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
	order="epoll net"
	[ $((r % 2)) = 0 ] && order="net epoll"
	for kinds in tls,tcp,udp tcp udp tls; do
		for path in $order; do
			row=$(taskset -c 0 "$WORK/$path/failover" -addr 127.0.0.1 -ports "$WORK/ports" -interval 1s -timeout 900ms \
				-duration "${CPUSECS}s" -kinds "$kinds" cpu 2>>"$WORK/cpu-$path.log")
			echo "| $r | $path $row"
		done
	done
done
kill "$SERVE"; wait "$SERVE" 2>/dev/null || true

echo
echo "## Detection against HAProxy, $RUNS runs a scenario a path"
[ "$DETECT" = 0 ] && echo && echo "Not run (DETECT=0)."
for r in $(seq "$ROUNDS"); do
	[ "$DETECT" = 0 ] && break
	order="epoll net"
	[ $((r % 2)) = 0 ] && order="net epoll"
	for path in $order; do
		echo
		echo "### round $r: $path"
		echo
		taskset -c 0 "$WORK/$path/failover" -runs "$RUNS" -haproxy-cpu 1 detect 2>>"$WORK/detect-$path.log"
	done
done
echo
echo "Failed-probe reasons (cpu rows):"
for path in epoll net; do
	echo
	echo "$path:"
	echo '```'
	grep -v "operation was canceled" "$WORK/cpu-$path.log" | sort | uniq -c | head -20 || echo "none"
	echo '```'
done
