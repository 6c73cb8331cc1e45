#!/usr/bin/env bash
# bench/launch.sh [DURATION] — launches per second through the HTTPS launch API, in one run:
# a site of one node (one frontdoor serve process over bolt), then the lab site of six nodes,
# one process each over a 3-member embedded etcd (MODES=inproc adds the six nodes in one
# process over a one-member etcd without fsync). Clients (CLIENTS, default 64) sign in as their
# users, then launch a new session and log it off again, spread over the front doors. Run from the repository's top directory on an otherwise idle machine; nothing is
# pinned (the nodes, etcd and the load share both cores).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
go build -o "$WORK/frontdoor" ./cmd/frontdoor
go build -o "$WORK/launch" ./bench/launch
echo "# bench/launch.sh $DURATION (CLIENTS=${CLIENTS:-64}), $(date -u +%F)"
"$WORK/launch" -frontdoor "$WORK/frontdoor" -duration "$DURATION" -clients "${CLIENTS:-64}" -modes "${MODES:-bolt,etcd}"
