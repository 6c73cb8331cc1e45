#!/usr/bin/env bash
# bench/tls.sh — what a TLS scanner finds on a site's listeners. Starts `frontdoor lab` (built
# from the committed code, `git archive HEAD`) in a network namespace of its own and runs
# testssl.sh (Debian `testssl.sh`) there on the lab's CA-trusted listeners: the launch API and
# portal, the admin API and console, a gateway's HTTPS port (WebSocket channels) and a
# gateway's TCP channel port. Each is scanned by the site's name, as a client reaches it: the
# namespace's resolver is the lab's own GSLB DNS server (on port 53 there), which answers the
# name's CAA record. Prints each finding of severity LOW or worse with its severity, and exits
# 1 when there is one. Takes about 10 minutes a listener on a 2-core machine (testssl runs its
# checks one by one). Needs root (the namespace).
#
# Two settings follow the site CA's policy rather than testssl's defaults (README, "Checked by
# a scanner"):
#   - Expiry: the CA's certificates live 7 days and are renewed with a third of their life
#     left (2.3 days), so testssl warns when a certificate has fewer than 2 days left (its
#     renewal is late) and rates it HIGH under 1 day, instead of 60 and 30 days.
#   - Revocation: a certificate valid for 7 days or less is short-lived in the CA/Browser
#     Forum's Baseline Requirements and needs no CRL or OCSP address. testssl 3.0 predates
#     that rule; its "Neither CRL nor OCSP URI provided" is printed as accepted, not as a
#     finding, only when the scanned certificate's notBefore-to-notAfter is 7 days or less.
#
# Usage: bench/tls.sh — env: TARGETS (default: the four below), NAME (the name scanned).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=${TARGETS:-"launch=127.1.0.11:9443 console=127.1.0.1:9090 gateway-https=127.1.0.11:10443 gateway-channel=127.1.0.11:8443"}
NAME=${NAME:-desktop.vdi.lab.test}

. bench/lib.sh
install_missing testssl=testssl.sh dig=bind9-dnsutils ip=iproute2

mkdir "$WORK/src"
git archive HEAD | tar -x -C "$WORK/src"
(cd "$WORK/src" && go build -o "$WORK/frontdoor" ./cmd/frontdoor)

# The lab's first DNS listener moves to port 53, where a stub resolver looks.
sed 's/"127\.1\.0\.1:5353"/"127.1.0.1:53"/' "$WORK/src/configs/lab.yaml" >"$WORK/lab.yaml"
grep -q '"127.1.0.1:53"' "$WORK/lab.yaml" || { echo "the lab config has no DNS listener on 127.1.0.1:5353"; exit 1; }

NS=fdtls-$$
ip netns add "$NS"
trap 'cleanup; ip netns del "$NS" 2>/dev/null; rm -rf "/etc/netns/$NS"' EXIT
ip -n "$NS" link set lo up
mkdir -p "/etc/netns/$NS"
echo "nameserver 127.1.0.1" >"/etc/netns/$NS/resolv.conf"
in_ns() { ip netns exec "$NS" "$@"; }

# Not through in_ns: a function run in the background is a subshell, which would take the
# signal that stops the lab, and leave it running. ip execs the lab: the same PID.
ip netns exec "$NS" "$WORK/frontdoor" lab --config "$WORK/lab.yaml" >"$WORK/lab.log" 2>&1 &
LAB=$!
PIDS+=("$LAB")
for _ in $(seq 600); do
	grep -q ' is up (data in ' "$WORK/lab.log" && break
	kill -0 "$LAB" 2>/dev/null || { cat "$WORK/lab.log"; exit 1; }
	sleep 0.1
done
DATA=$(sed -n 's/.* is up (data in \(.*\))$/\1/p' "$WORK/lab.log")
[ -n "$DATA" ] || { echo "the lab did not come up"; cat "$WORK/lab.log"; exit 1; }
in_ns dig +short "$NAME" | grep -q . || { echo "the namespace's resolver does not answer $NAME"; exit 1; }

# json_value FILE ID — the finding of ID in testssl's JSON file.
json_value() { tr -d '\n' <"$1" | grep -o '{[^{}]*}' | grep "\"id\" *: *\"$2\"" | sed -E 's/.*"finding" *: *"([^"]*)".*/\1/' | head -1; }

found=0
echo "| listener | address | findings of severity LOW or worse | accepted |"
echo "|---|---|---|---|"
for t in $TARGETS; do
	label=${t%%=*} addr=${t#*=}
	ip=${addr%:*} port=${addr##*:}
	json="$WORK/$label.json"
	# testssl's exit status counts what it found; the JSON file says what.
	in_ns env DAYS2WARN1=2 DAYS2WARN2=1 testssl --quiet --color 0 --warnings off --add-ca "$DATA/ca.pem" \
		--ip "$ip" --jsonfile "$json" "$NAME:$port" >"$WORK/$label.out" 2>&1 || true
	[ -s "$json" ] || { echo "testssl wrote nothing for $addr:"; tail -20 "$WORK/$label.out"; exit 1; }
	bad=$(tr -d '\n' <"$json" | grep -o '{[^{}]*}' | grep -E '"severity" *: *"(LOW|MEDIUM|HIGH|CRITICAL)"' |
		sed -E 's/.*"id" *: *"([^"]*)".*"severity" *: *"([^"]*)".*"finding" *: *"([^"]*)".*/\2 \1: \3/' || true)
	accepted=""
	from=$(json_value "$json" cert_notBefore) to=$(json_value "$json" cert_notAfter)
	if [ -n "$from" ] && [ -n "$to" ] &&
		[ $(($(date -u -d "$to" +%s) - $(date -u -d "$from" +%s))) -le 604800 ] &&
		grep -q '^HIGH cert_revocation: Neither CRL nor OCSP URI provided$' <<<"$bad"; then
		bad=$(grep -v '^HIGH cert_revocation: Neither CRL nor OCSP URI provided$' <<<"$bad" || true)
		accepted="no CRL or OCSP URI: short-lived ($from to $to)"
	fi
	if [ -z "$bad" ]; then
		echo "| $label | $NAME:$port at $ip | none | ${accepted:-none} |"
	else
		found=1
		echo "| $label | $NAME:$port at $ip | $(echo "$bad" | paste -sd ';' | sed 's/;/; /g') | ${accepted:-none} |"
	fi
done
kill -INT "$LAB" 2>/dev/null || true
wait "$LAB" 2>/dev/null || true
exit $found
