#!/usr/bin/env bash
# bench/gateway-relay.sh — frontdoor's secure gateway relay against its peers, side by side in
# one run, on loopback (127.0.0.0/8):
#   * UDP: one flow echoed through the relay with WINDOW datagrams in flight, 64 and 1200-byte
#     payloads: datagrams/s, and the relay process's CPU µs per datagram, for
#       fd-quic      frontdoor's encrypted path with the client package (client.Open, a
#                    gateway-mode descriptor with a quic_port; WriteDatagram/ReadDatagram):
#                    QUIC DATAGRAM frames to a gateway.QUIC, which relays them on its own QUIC
#                    connection to the machine's agent.Display, which echoes;
#       fd-quic-raw  the same path, the client's end spoken with quic-go directly (no client
#                    package hops per datagram);
#       fd-plain     frontdoor's plain UDP path (gateway.Gateway UDP port, PlainUDP: the
#                    ticket datagram, ticket.UDPReady); the leg to the machine is QUIC too;
#       nginx        nginx 1.22 stream module forwarding plain UDP to a plain UDP echo;
#   * TCP: 1 and 4 bulk TLS streams into a sink: MB/s and the relay's CPU s per GB, for
#       fd-tls       frontdoor's TLS channel (gateway.Gateway TCP port: client TLS + ticket
#                    frame; gateway → machine TLS 1.3 mutual; the machine's end checks the
#                    ticket as the agent does and drops the bytes);
#       haproxy      HAProxy terminating TLS (mode tcp) to a plain TCP sink;
#       haproxy-tls2 HAProxy terminating TLS and re-encrypting (TLS 1.3, client certificate)
#                    to a TLS sink: the same work as frontdoor's gateway, for reference.
#     Both relays present the same P-256 certificate and speak TLS 1.3 TLS_AES_128_GCM_SHA256
#     (HAProxy pinned to it; Go picks it with AES-NI).
# frontdoor's gateway (gateway.Gateway and gateway.QUIC in one process, as a node runs them),
# nginx (worker_processes 1, master_process off) and HAProxy (nbthread 1) run on RELAY_CPU; the
# load, the machine (agent.Display) and the peers' backends on LOAD_CPU (taskset). Every
# process is started here by hand and stopped by PID. The relay's CPU is utime+stime from
# /proc/PID/stat at the edges of each row's measured window. ROUNDS rounds, the target order
# rotating each round; the report gives frontdoor ÷ peer per round.
#
# Usage: bench/gateway-relay.sh [seconds-per-row] — e.g. ROUNDS=1 UDP_TARGETS=fd-quic,nginx
# TCP_TARGETS=fd-tls,haproxy OUT=/dev/stdout bench/gateway-relay.sh 2 for a quick look.
# Results go to bench/results/gateway-relay.md (or $OUT; APPEND=1 appends); progress to
# stderr. PPROF=DIR writes CPU profiles of the gateway's round-1 rows to DIR (pprof adds a
# little CPU to those rows).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-${DUR:-5}}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-64}
SIZES=${SIZES:-64,1200}
STREAMS=${STREAMS:-1,4}
UDP_TARGETS=${UDP_TARGETS-fd-quic,fd-quic-raw,fd-plain,nginx}
TCP_TARGETS=${TCP_TARGETS-fd-tls,haproxy,haproxy-tls2}
RELAY_CPU=${RELAY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
OUT=${OUT:-bench/results/gateway-relay.md}
PPROF=${PPROF:-}

. bench/lib.sh
install_missing taskset=util-linux nginx=nginx haproxy=haproxy \
	/usr/lib/nginx/modules/ngx_stream_module.so=libnginx-mod-stream

go build -o "$WORK/gateway-relay" ./bench/gateway-relay
B=$WORK/gateway-relay
SITE=$WORK/site
mkdir "$SITE"
"$B" -role site -dir "$SITE"

# wait_ready NAME — until the Go process NAME printed its READY line (bounded).
wait_ready() {
	for _ in $(seq 100); do
		grep -q '^READY' "$WORK/$1.log" 2>/dev/null && return 0
		kill -0 "$(pidof_ "$1")" 2>/dev/null || break
		sleep 0.1
	done
	echo "$1 never got ready:" >&2
	cat "$WORK/$1.log" >&2
	exit 1
}

# The machine and the peers' backends (LOAD_CPU).
start machine "$LOAD_CPU" "$B" -role machine -dir "$SITE"
start backend "$LOAD_CPU" "$B" -role backend -dir "$SITE" -udp 127.0.0.1:19173 -tcp 127.0.0.1:19172 -tls 127.0.0.1:19443

# The relays (RELAY_CPU).
start gateway "$RELAY_CPU" "$B" -role gateway -dir "$SITE" ${PPROF:+-pprof 127.0.0.1:16060}
cat >"$WORK/nginx.conf" <<EOF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $WORK/nginx.pid.nginx;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
stream {
    proxy_timeout 10m;
    # 4 MB socket buffers, as frontdoor's UDP ports and quic-go's sockets have.
    server { listen 127.0.0.1:18173 udp rcvbuf=4m sndbuf=4m; proxy_pass 127.0.0.1:19173; }
}
EOF
start nginx "$RELAY_CPU" nginx -c "$WORK/nginx.conf" -g 'daemon off; master_process off;'
start_tls_haproxy 17443 127.0.0.1:19172 17444 127.0.0.1:19443
for p in machine backend gateway; do wait_ready $p; done

args=()
if [ -n "$PPROF" ]; then
	mkdir -p "$PPROF"
	args=(-pprof-url http://127.0.0.1:16060 -profile-dir "$PPROF")
fi
report() {
	echo "## bench/gateway-relay.sh $DUR (ROUNDS=$ROUNDS WINDOW=$WINDOW SIZES=$SIZES STREAMS=$STREAMS), $(date -u '+%F %H:%M UTC'), $(git rev-parse --short HEAD)"
	echo
	echo "UDP_TARGETS=$UDP_TARGETS TCP_TARGETS=$TCP_TARGETS; relays on CPU $RELAY_CPU, load on CPU $LOAD_CPU; $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(haproxy -v 2>&1 | head -1 | cut -d' ' -f1-3), $(go version | cut -d' ' -f3); ${PPROF:+gateway profiled in round 1; }load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	taskset -c "$LOAD_CPU" "$B" -role run -dir "$SITE" -fd-pid "$(pidof_ gateway)" -nginx-pid "$(pidof_ nginx)" \
		-haproxy-pid "$(pidof_ haproxy)" -rounds "$ROUNDS" -dur "${DUR}s" -window "$WINDOW" -sizes "$SIZES" \
		-streams "$STREAMS" -udp-targets "$UDP_TARGETS" -tcp-targets "$TCP_TARGETS" \
		-relay-cpu "$RELAY_CPU" -load-cpu "$LOAD_CPU" "${args[@]}"
	echo
	echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}
report >"$WORK/report.md"
if [ -n "${APPEND:-}" ]; then
	{ echo; cat "$WORK/report.md"; } >>"$OUT"
else
	cat "$WORK/report.md" >"$OUT"
fi
[ "$OUT" = /dev/stdout ] || cat "$WORK/report.md"
