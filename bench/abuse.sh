#!/usr/bin/env bash
# bench/abuse.sh — does an honest client keep working while a front door is abused? On
# loopback: one node (`frontdoor serve` over bolt, its gateway on the same address) pinned to
# NODE_CPU; the lab's machine agents, the honest clients and (in a child process) the
# abusers pinned to LOAD_CPU. The honest clients launch and open their session's channel
# through the gateway over and over, unloaded for UNLOADED, then while the abusers send
# WRONG wrong-password launches (WRONG_RATE a second), hold SLOW slow-header connections,
# stall HANDSHAKES TLS handshakes (HS_AT_ONCE at once) and send BODYLESS launches whose body
# never comes (BODYLESS_AT_ONCE at once, from BODYLESS_SOURCES addresses, logged in as an
# insider) at the launch listener, then for AFTER
# more. The abuse stops at LIMIT at the latest; the run takes about two minutes. Prints
# markdown tables: the honest launches' p50/p99 per phase and their ratio, how the abusers
# were answered, the node's RSS, heap, descriptors and CPU, and the standing sessions' fate.
#
# The node and the bench are built from `git archive HEAD` (the committed code, whatever
# the working tree holds) with this working tree's bench/abuse; with PROFILE=FILE the node
# writes a CPU profile of the abuse window to FILE; with HOG=N, N busy threads share NODE_CPU
# with the node through the abuse (a CPU hog beside it). Run from anywhere in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_CPU=${NODE_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
UNLOADED=${UNLOADED:-20s}
AFTER=${AFTER:-15s}
WRONG=${WRONG:-10000}
WRONG_RATE=${WRONG_RATE:-400}
SLOW=${SLOW:-5000}
HANDSHAKES=${HANDSHAKES:-10000}
HS_AT_ONCE=${HS_AT_ONCE:-3000}
SOURCES=${SOURCES:-8}
BODYLESS=${BODYLESS:-20000}
BODYLESS_AT_ONCE=${BODYLESS_AT_ONCE:-4096}
BODYLESS_SOURCES=${BODYLESS_SOURCES:-64}
LIMIT=${LIMIT:-100s}
PROFILE=${PROFILE:-}
HOG=${HOG:-0}

. bench/lib.sh
install_missing taskset=util-linux

mkdir "$WORK/src"
git archive HEAD | tar -x -C "$WORK/src"
rm -rf "$WORK/src/bench/abuse"
cp -r bench/abuse "$WORK/src/bench/"
(cd "$WORK/src" && go build -o "$WORK/frontdoor" ./cmd/frontdoor && go build -o "$WORK/abuse" ./bench/abuse)
rm -rf "$WORK/src"

echo "# bench/abuse.sh (UNLOADED=$UNLOADED AFTER=$AFTER WRONG=$WRONG WRONG_RATE=$WRONG_RATE SLOW=$SLOW HANDSHAKES=$HANDSHAKES HS_AT_ONCE=$HS_AT_ONCE SOURCES=$SOURCES BODYLESS=$BODYLESS BODYLESS_AT_ONCE=$BODYLESS_AT_ONCE BODYLESS_SOURCES=$BODYLESS_SOURCES LIMIT=$LIMIT NODE_CPU=$NODE_CPU LOAD_CPU=$LOAD_CPU HOG=$HOG), $(date -u +%F), $(git rev-parse --short HEAD)"
echo "open files: $(ulimit -n) a process; somaxconn $(cat /proc/sys/net/core/somaxconn); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
taskset -c "$LOAD_CPU" "$WORK/abuse" -frontdoor "$WORK/frontdoor" -node-cpu "$NODE_CPU" -unloaded "$UNLOADED" -after "$AFTER" \
	-wrong "$WRONG" -wrong-rate "$WRONG_RATE" -slow "$SLOW" -handshakes "$HANDSHAKES" -hs-at-once "$HS_AT_ONCE" \
	-sources "$SOURCES" -bodyless "$BODYLESS" -bodyless-at-once "$BODYLESS_AT_ONCE" -bodyless-sources "$BODYLESS_SOURCES" -limit "$LIMIT" -hog "$HOG" ${PROFILE:+-cpuprofile "$PROFILE"}
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
