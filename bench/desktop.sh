#!/usr/bin/env bash
# bench/desktop.sh — frontdoor's desktop path on loopback (127.0.0.0/8), side by side with its
# peers in one run (bench/desktop is the program; it starts frontdoor's pieces as processes of
# their own, pinned with taskset, and stops them by PID; HAProxy is started here by hand):
#   1. latency     the key → framebuffer update round trip of an RFB viewer, straight to the
#                  desktop server and through a client session → gateway → agent, p50/p99 and
#                  what the gateway adds, for the builtin desktop and for Xvnc with an xterm;
#   2. throughput  full-screen raw updates of the builtin desktop (3 MiB each): MB/s and the
#                  relay process's CPU s per GB, frontdoor's gateway against HAProxy
#                  terminating TLS (mode tcp) in front of the same desktop code (and HAProxy
#                  re-encrypting to it, the same work as the gateway's, for reference);
#   3. stall       two gateways; the one carrying a typing viewer's session is killed (SIGKILL)
#                  KILLS times and started again: the time to the next update, disconnects;
#   4. capacity    CAP_N idle desktop streams through one gateway process: its RSS and CPU;
#   5. capacity-ws the same with the streams on WebSockets to the gateway's HTTPS port, as
#                  browsers carry them (CAP_WS_N, default 1000: the goal is 1,000 a core).
# The relays run on RELAY_CPU, everything else on LOAD_CPU.
#
# Usage: bench/desktop.sh — env: BENCHES (default latency,throughput,stall,capacity,capacity-ws),
# LAT_SAMPLES (2000) LAT_ROUNDS (4) LAT_DESKTOPS (builtin,xvnc), TPUT_DUR (5s) TPUT_ROUNDS (3),
# KILLS (24), CAP_N (9900) CAP_WS_N (1000) CAP_RATE (100/s) CAP_HOLD (15s)
# CAP_RAMP_MAX (5m), RELAY_CPU (0) LOAD_CPU (1).
# Results go to bench/results/desktop.md (or $OUT); progress to stderr. About 9 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHES=${BENCHES:-latency,throughput,stall,capacity,capacity-ws}
LAT_SAMPLES=${LAT_SAMPLES:-2000}
LAT_ROUNDS=${LAT_ROUNDS:-4}
LAT_DESKTOPS=${LAT_DESKTOPS:-builtin,xvnc}
TPUT_DUR=${TPUT_DUR:-5s}
TPUT_ROUNDS=${TPUT_ROUNDS:-3}
KILLS=${KILLS:-24}
CAP_N=${CAP_N:-9900}
CAP_WS_N=${CAP_WS_N:-1000}
CAP_RATE=${CAP_RATE:-100}
CAP_HOLD=${CAP_HOLD:-15s}
CAP_RAMP_MAX=${CAP_RAMP_MAX:-5m}
RELAY_CPU=${RELAY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
OUT=${OUT:-bench/results/desktop.md}

. bench/lib.sh
need=(taskset=util-linux)
[[ ,$BENCHES, == *,throughput,* ]] && need+=(haproxy=haproxy)
[[ ,$BENCHES,$LAT_DESKTOPS, == *,latency,*xvnc* ]] && need+=(Xvnc=tigervnc-standalone-server xterm=xterm)
install_missing "${need[@]}"

go build -o "$WORK/desktop" ./bench/desktop
B=$WORK/desktop
SITE=$WORK/site
mkdir "$SITE"
"$B" site -dir "$SITE"
common=(-dir "$SITE" -work "$WORK" -relay-cpu "$RELAY_CPU" -load-cpu "$LOAD_CPU" -summary "$WORK/summary.md")

# HAProxy (nbthread 1, on RELAY_CPU) presents the gateways' certificate, TLS 1.3 with
# TLS_AES_128_GCM_SHA256 as Go picks with AES-NI; its backends are the builtin desktop's code
# that the throughput benchmark's agent process serves on 127.0.0.1:14811 (plain) and :14812
# (TLS 1.3, client certificate).
start_haproxy() { start_tls_haproxy 14821 127.0.0.1:14811 14822 127.0.0.1:14812; }

run() { # run NAME ARGS... — one benchmark, pinned to LOAD_CPU, its section to the report
	echo "desktop.sh: $1" >&2
	taskset -c "$LOAD_CPU" "$B" "$@" >>"$WORK/sections.md" || echo "desktop.sh: $1 failed" >&2
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$WORK/head.md"
for b in ${BENCHES//,/ }; do
	case $b in
	latency) run latency "${common[@]}" -samples "$LAT_SAMPLES" -rounds "$LAT_ROUNDS" -desktops "$LAT_DESKTOPS" ;;
	throughput)
		start_haproxy
		run throughput "${common[@]}" -dur "$TPUT_DUR" -rounds "$TPUT_ROUNDS" -haproxy-pid "$(pidof_ haproxy)"
		kill "$(pidof_ haproxy)" ;;
	stall) run stall "${common[@]}" -kills "$KILLS" ;;
	capacity) run capacity "${common[@]}" -n "$CAP_N" -rate "$CAP_RATE" -hold "$CAP_HOLD" -ramp-max "$CAP_RAMP_MAX" ;;
	capacity-ws) run capacity "${common[@]}" -n "$CAP_WS_N" -rate "$CAP_RATE" -hold "$CAP_HOLD" -ramp-max "$CAP_RAMP_MAX" -websocket ;;
	*) echo "desktop.sh: unknown benchmark $b" >&2; exit 2 ;;
	esac
done

report() {
	echo "## bench/desktop.sh, $(date -u '+%F %H:%M UTC'), $(git rev-parse --short HEAD)"
	echo
	echo "BENCHES=$BENCHES; relays on CPU $RELAY_CPU, the rest on CPU $LOAD_CPU; $(haproxy -v 2>/dev/null | head -1 | cut -d' ' -f1-3), $(go version | cut -d' ' -f3); $(cat "$WORK/head.md"), after: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "| measurement | frontdoor | peer | ratio / added | goal | met? |"
	echo "|---|---|---|---|---|---|"
	cat "$WORK/summary.md" 2>/dev/null || true
	echo
	cat "$WORK/sections.md" 2>/dev/null || true
}
mkdir -p "$(dirname "$OUT")"
report >"$WORK/report.md"
cat "$WORK/report.md" >"$OUT"
[ "$OUT" = /dev/stdout ] || cat "$WORK/report.md"
