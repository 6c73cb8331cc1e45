#!/usr/bin/env bash
# bench/tls.sh — what a TLS scanner finds on a site's listeners. Starts `frontdoor lab` (built
# from the committed code, `git archive HEAD`) and runs testssl.sh (Debian `testssl.sh`) on
# the lab's CA-trusted listeners: the launch API and portal, the admin API and console, a
# gateway's HTTPS port (WebSocket channels) and a gateway's TCP channel port. Prints each
# finding of severity LOW or worse with its severity, and exits 1 when there is one. Takes
# about 10 minutes a listener on a 2-core machine (testssl runs its checks one by one).
#
# Usage: bench/tls.sh — env: TARGETS (default: the four below).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=${TARGETS:-"launch=127.1.0.11:9443 console=127.1.0.1:9090 gateway-https=127.1.0.11:10443 gateway-channel=127.1.0.11:8443"}

. bench/lib.sh
install_missing testssl=testssl.sh

mkdir "$WORK/src"
git archive HEAD | tar -x -C "$WORK/src"
(cd "$WORK/src" && go build -o "$WORK/frontdoor" ./cmd/frontdoor)

"$WORK/frontdoor" lab >"$WORK/lab.log" 2>&1 &
LAB=$!
PIDS+=("$LAB")
for _ in $(seq 600); do
	grep -q ' is up (data in ' "$WORK/lab.log" && break
	kill -0 "$LAB" 2>/dev/null || { cat "$WORK/lab.log"; exit 1; }
	sleep 0.1
done
DATA=$(sed -n 's/.* is up (data in \(.*\))$/\1/p' "$WORK/lab.log")
[ -n "$DATA" ] || { echo "the lab did not come up"; cat "$WORK/lab.log"; exit 1; }

found=0
echo "| listener | address | findings of severity LOW or worse |"
echo "|---|---|---|"
for t in $TARGETS; do
	name=${t%%=*} addr=${t#*=}
	json="$WORK/$name.json"
	# testssl's exit status counts what it found; the JSON file says what.
	testssl --quiet --color 0 --warnings off --add-ca "$DATA/ca.pem" --ip one --jsonfile "$json" "$addr" >"$WORK/$name.out" 2>&1 || true
	[ -s "$json" ] || { echo "testssl wrote nothing for $addr:"; tail -20 "$WORK/$name.out"; exit 1; }
	bad=$(tr -d '\n' <"$json" | grep -o '{[^{}]*}' | grep -E '"severity" *: *"(LOW|MEDIUM|HIGH|CRITICAL)"' |
		sed -E 's/.*"id" *: *"([^"]*)".*"severity" *: *"([^"]*)".*"finding" *: *"([^"]*)".*/\2 \1: \3/' || true)
	if [ -z "$bad" ]; then
		echo "| $name | $addr | none |"
	else
		found=1
		echo "| $name | $addr | $(echo "$bad" | paste -sd ';' | sed 's/;/; /g') |"
	fi
done
kill -INT "$LAB" 2>/dev/null || true
wait "$LAB" 2>/dev/null || true
exit $found
