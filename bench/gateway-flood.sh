#!/usr/bin/env bash
# bench/gateway-flood.sh — the secure-channels goal on loopback: a flood of forged first
# datagrams at a gateway port, and an established flow on the same port echoing one datagram
# at a time. TARGETS: "plain" floods the gateway's plain UDP channel port with a real reconnect
# ticket whose signature's last byte is flipped (so each costs a full Ed25519 verify); "quic"
# floods the gateway's QUIC port (gateway.QUIC) with forged QUIC Initials without a token
# (≥1200 bytes, a random DCID each) from spoofed sources of 127.200.0.0/16 through a raw
# socket (needs root), the flow riding QUIC DATAGRAM frames on the same port. Each row runs
# the real gateway, the machine's display simulator, the flow's client and the flood as
# separate processes (bench/gateway-flood re-executes itself): unloaded, then at each of RATES
# forged datagrams/s. CONFIGS: "pinned" puts the gateway on GW_CPU and the rest on CLIENT_CPU
# (taskset), "shared" pins nothing.
# With BASE (a commit; default c42a390^, the gateway before its ticket checks left the relay;
# empty: none) the plain rows also run for the same benchmark built against that commit's
# gateway and agent; with QUIC_BASE (default d24b65b^, the QUIC end before quicguard; empty:
# none) the quic rows do. Each is built from `git archive` of the commit in a temporary
# directory, removed right after the build. Prints markdown tables per target: the flow's
# p50/p99/p99.9 round trip and losses, the flood rate achieved, the gateway's CPU, the forged
# tickets it checked (plain) or the Retries and other datagrams it sent to the spoofed sources
# and how busy GW_CPU and CLIENT_CPU were (quic), the kernel's drops; then flood p99 /
# unloaded p99. With PROFILE_DIR, each row's gateway writes a CPU profile of the measured
# window there. QUIC_FLOOD_TO is a control: the quic rows' flood goes there instead of the
# gateway's QUIC port, so that the flow only feels what the flood costs the host: "sink" (a
# socket of 127.0.50.1 whose BPF filter drops every datagram, as quicguard drops what it
# sheds) or an address (e.g. 127.0.50.1:9, a closed port).
#
# Usage: bench/gateway-flood.sh [seconds-per-row] — e.g. ROUNDS=1 CONFIGS=pinned BASE=
# TARGETS=plain bench/gateway-flood.sh 2 for a quick look. Results go to stdout; per-row
# progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-${DUR:-5}}
ROUNDS=${ROUNDS:-1}
RATES=${RATES:-0,50000,100000}
CONFIGS=${CONFIGS:-pinned,shared}
TARGETS=${TARGETS:-plain,quic}
BASE=${BASE-c42a390^}
QUIC_BASE=${QUIC_BASE-d24b65b^}
PROFILE_DIR=${PROFILE_DIR:-}
QUIC_FLOOD_TO=${QUIC_FLOOD_TO:-}
GW_CPU=${GW_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

. bench/lib.sh
install_missing taskset=util-linux

has_target() { [[ ,$TARGETS, == *,$1,* ]]; }

# build_at COMMIT OUT [TAGS] — this benchmark (bench/gateway-flood and bench/internal of the
# working tree) built against COMMIT's code, from `git archive` in $WORK/src, removed after.
build_at() {
	rm -rf "$WORK/src"
	mkdir "$WORK/src"
	git archive "$1" | tar -x -C "$WORK/src"
	rm -rf "$WORK/src/bench/gateway-flood" "$WORK/src/bench/internal"
	cp -r bench/gateway-flood bench/internal "$WORK/src/bench/"
	(cd "$WORK/src" && go build ${3:+-tags "$3"} -o "$2" ./bench/gateway-flood)
	rm -rf "$WORK/src"
}

go build -o "$WORK/gateway-flood" ./bench/gateway-flood
args=()
if has_target plain && [ -n "$BASE" ]; then
	# The code before c42a390 has no PlainUDP option and no QUIC end of this form: floodbase.
	build_at "$BASE" "$WORK/gateway-flood-base" floodbase
	args+=(-base "$WORK/gateway-flood-base" -base-name "$(git rev-parse --short "$BASE")")
fi
if has_target quic && [ -n "$QUIC_BASE" ]; then
	build_at "$QUIC_BASE" "$WORK/gateway-flood-quic-base"
	args+=(-quic-base "$WORK/gateway-flood-quic-base" -quic-base-name "$(git rev-parse --short "$QUIC_BASE")")
fi
if [ -n "$PROFILE_DIR" ]; then
	args+=(-profile-dir "$PROFILE_DIR")
fi
if [ -n "$QUIC_FLOOD_TO" ]; then
	args+=(-quic-flood-to "$QUIC_FLOOD_TO")
fi
echo "# bench/gateway-flood.sh $DUR (ROUNDS=$ROUNDS RATES=$RATES CONFIGS=$CONFIGS TARGETS=$TARGETS BASE=$BASE QUIC_BASE=$QUIC_BASE${QUIC_FLOOD_TO:+ QUIC_FLOOD_TO=$QUIC_FLOOD_TO}), $(date -u +%F), $(git rev-parse --short HEAD)"
# The packages of the module the benchmark builds, other than bench/: are they as committed?
pkgs=$(go list -deps -f '{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}' ./bench/gateway-flood | sed "s|^$PWD/||" | grep -v '^bench' | sort -u)
dirty=$(git status --porcelain -- $pkgs go.mod go.sum | awk '{print $2}' | tr '\n' ' ')
echo "code of the head build outside bench/ ($(echo $pkgs | wc -w) packages): ${dirty:+changed, built as they are: }${dirty:-as committed}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/gateway-flood" -dur "${DUR}s" -rounds "$ROUNDS" -rates "$RATES" -configs "$CONFIGS" -targets "$TARGETS" \
	-gw-cpu "$GW_CPU" -client-cpu "$CLIENT_CPU" -head-name "$(git rev-parse --short HEAD)" "${args[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
