#!/usr/bin/env bash
# bench/gateway-flood.sh — the secure-channels goal on loopback: a flood of forged first
# datagrams (a real reconnect ticket with its signature's last byte flipped, so each costs a
# full Ed25519 verify) at a gateway's UDP channel port, and an established flow on the same
# port echoing one datagram at a time. Each row runs a real gateway.Gateway, the machine's
# display simulator, the flow's client and the flood as separate processes (bench/gateway-flood
# re-executes itself): unloaded, then at each of RATES forged datagrams/s. CONFIGS: "pinned"
# puts the gateway on GW_CPU and the rest on CLIENT_CPU (taskset), "shared" pins nothing.
# With BASE (a commit; default c42a390^, the gateway before its ticket checks left the relay;
# empty: none) the same benchmark is also built against that commit's code in a temporary git
# worktree, removed right after the build, and every row runs for both. Prints markdown tables:
# the flow's p50/p99/p99.9 round trip and losses, the flood rate achieved, the gateway's CPU,
# the forged tickets it checked, the kernel's drops; then flood p99 / unloaded p99.
#
# Usage: bench/gateway-flood.sh [seconds-per-row] — e.g. ROUNDS=1 CONFIGS=pinned BASE=
# bench/gateway-flood.sh 2 for a quick look. Results go to stdout; per-row progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-${DUR:-5}}
ROUNDS=${ROUNDS:-1}
RATES=${RATES:-0,50000,100000}
CONFIGS=${CONFIGS:-pinned,shared}
BASE=${BASE-c42a390^}
GW_CPU=${GW_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

. bench/lib.sh
install_missing taskset=util-linux
trap 'git worktree remove --force "$WORK/base" 2>/dev/null || true; cleanup' EXIT

go build -o "$WORK/gateway-flood" ./bench/gateway-flood
args=()
if [ -n "$BASE" ]; then
	git worktree add -q --detach "$WORK/base" "$BASE"
	cp -r bench/gateway-flood "$WORK/base/bench/"
	(cd "$WORK/base" && go build -o "$WORK/gateway-flood-base" ./bench/gateway-flood)
	git worktree remove --force "$WORK/base"
	args=(-base "$WORK/gateway-flood-base" -base-name "$(git rev-parse --short "$BASE")")
fi
echo "# bench/gateway-flood.sh $DUR (ROUNDS=$ROUNDS RATES=$RATES CONFIGS=$CONFIGS BASE=$BASE), $(date -u +%F), $(git rev-parse --short HEAD)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$WORK/gateway-flood" -dur "${DUR}s" -rounds "$ROUNDS" -rates "$RATES" -configs "$CONFIGS" \
	-gw-cpu "$GW_CPU" -client-cpu "$CLIENT_CPU" -head-name "$(git rev-parse --short HEAD)" "${args[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
