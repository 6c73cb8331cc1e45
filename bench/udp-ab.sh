#!/usr/bin/env bash
# bench/udp-ab.sh — A/B of the encrypted UDP display channel on loopback, in one run: plain UDP
# echo (today), DTLS 1.2 with connection IDs (pion/dtls v3, AES-128-GCM) and QUIC DATAGRAM
# frames (quic-go, Retry on). Each row is an echo server and a client in separate processes
# (bench/udp-ab re-executes itself), the server on SERVER_CPU and the client on CLIENT_CPU
# (taskset). Prints markdown tables: datagrams/s echoed with WINDOW in flight, loss, p50/p99
# round trip, CPU µs per datagram of server and client (and ping-pong rows, one in flight);
# HS sequential handshakes per protocol; and FLOOD forged first datagrams (ClientHello without
# cookie, Initial without token) from spoofed sources at RATE/s: server CPU per forged datagram
# and memory. ROUNDS rounds, the protocol order rotating each round, so the candidates and the
# baseline are paired by round on a shared host.
#
# Usage: bench/udp-ab.sh [seconds-per-row] — e.g. ROUNDS=1 FLOOD=0 bench/udp-ab.sh 2 for a quick
# look. Needs root for the flood (raw sockets). Results go to stdout; per-row progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-${DUR:-5}}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-64}
HS=${HS:-200}
FLOOD=${FLOOD:-100000}
RATE=${RATE:-5000}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

. bench/lib.sh
install_missing taskset=util-linux

go build -o "$WORK/udp-ab" ./bench/udp-ab
echo "# bench/udp-ab.sh $DUR (ROUNDS=$ROUNDS WINDOW=$WINDOW HS=$HS FLOOD=$FLOOD RATE=$RATE), $(date -u +%F), $(git rev-parse --short HEAD)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/udp-ab" -rounds "$ROUNDS" -dur "${DUR}s" -window "$WINDOW" -hs "$HS" -flood "$FLOOD" -rate "$RATE" \
	-server-cpu "$SERVER_CPU" -client-cpu "$CLIENT_CPU"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
