#!/usr/bin/env bash
# bench/dns.sh: the GSLB DNS benchmark. One run, one server after another, the same query file
# and duration, dnsperf on loopback against:
#   frontdoor  `frontdoor serve` answering a GSLB name (zone map + failover over two sites)
#   gdnsd      3.8, geoip plugin with a nets map and multifo sites, tcp_connect health
#   pdns       pdns-server (bind backend) with a LUA record: ifportup over the same listeners
#   knot       knotd serving a plain static A record: the ceiling
# Two measurements per server, server pinned to one core and dnsperf to another:
#   1. saturated qps (dnsperf as fast as it goes for DURATION seconds)
#   2. server CPU time per query at a fixed rate (dnsperf -Q RATE), from /proc/PID/stat
# Writes bench/results/dns.md (or $OUT). Installs peers with apt-get; cleans up what it starts.
#
# With SIGNED=1 the zone is DNSSEC-signed online (ECDSA P-256) and every query asks for it
# (DO): frontdoor with gslb dnssec, knot with mod-onlinesign, PowerDNS signing its LUA record
# (bind backend, pdnsutil secure-zone); gdnsd has no DNSSEC and sits out. Writes
# bench/results/dns-signed.md then.
#
# Usage: bench/dns.sh   (environment: DURATION=10 RATE=30000 ROUNDS=3 SERVER_CPU=0 CLIENT_CPU=1;
#        FD_B=FILE adds frontdoor-0b, a frontdoor binary of another revision; ONLY="frontdoor-0 gdnsd" a subset;
#        SIGNED=1 the signed zone)
set -euo pipefail

DURATION=${DURATION:-10}
RATE=${RATE:-30000}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIGNED=${SIGNED:-}
if [ -n "$SIGNED" ]; then
	OUT=${OUT:-$ROOT/bench/results/dns-signed.md}
else
	OUT=${OUT:-$ROOT/bench/results/dns.md}
fi
BASE_PORT=${BASE_PORT:-15400}
GW_PORT=10443
NAME=desktop.bench.test

WORK=$(mktemp -d /tmp/frontdoor-dnsbench.XXXXXX)
PIDS=()
MADE_RUN_DIR=
cleanup() {
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	[ -n "$MADE_RUN_DIR" ] && rm -rf /run/gdnsd
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

log() { echo "dns.sh: $*" >&2; }

# --- peers -------------------------------------------------------------------------------
need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v gdnsd >/dev/null || need+=(gdnsd)
command -v pdns_server >/dev/null || need+=(pdns-server)
[ -e /usr/lib/x86_64-linux-gnu/pdns/libbindbackend.so ] || ls /usr/lib/*/pdns/libbindbackend.so >/dev/null 2>&1 || need+=(pdns-backend-bind)
command -v knotd >/dev/null || need+=(knot)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	apt-get update -qq
	# policy-rc.d keeps the packages' own services from starting during the install.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 || true
		rm -f /usr/sbin/policy-rc.d
	else
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 || true
	fi
fi
command -v dnsperf >/dev/null || { log "dnsperf is not installable here"; exit 1; }

# --- gateways: TCP listeners the health checks of gdnsd and pdns connect to ----------------
cat >"$WORK/gateways.py" <<'EOF'
import selectors, socket, sys
sel = selectors.DefaultSelector()
for host in sys.argv[2:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(sys.argv[1])))
    s.listen(64)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        try:
            c, _ = key.fileobj.accept()
            c.close()
        except OSError:
            pass
EOF
python3 "$WORK/gateways.py" $GW_PORT 127.1.0.11 127.1.0.12 127.2.0.11 127.2.0.12 &
PIDS+=($!)

# wait_dns PORT: bounded wait until a server answers on 127.0.0.1:PORT.
cat >"$WORK/ask.py" <<'EOF'
import socket, struct, sys, time
port, name = int(sys.argv[1]), sys.argv[2]
do = len(sys.argv) > 3 and sys.argv[3] == "do"
q = struct.pack(">HHHHHH", 4242, 0, 1, 0, 0, 1 if do else 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
if do:  # an OPT record asking for DNSSEC: the answer count then includes the RRSIGs
    q += b"\0" + struct.pack(">HHIH", 41, 1232, 0x8000, 0)
deadline = time.time() + 20
while time.time() < deadline:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.2)
    try:
        s.sendto(q, ("127.0.0.1", port))
        r = s.recv(4096)
        ancount = struct.unpack(">H", r[6:8])[0]
        rcode = r[3] & 15
        print("rcode=%d answers=%d" % (rcode, ancount))
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
    finally:
        s.close()
sys.exit(1)
EOF

# --- the zone, the same for every server ---------------------------------------------------
echo "$NAME A" >"$WORK/queries"
ZONE_HEAD='$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 604800 30
@ IN NS ns1
ns1 IN A 127.0.0.1'

# --- frontdoor -----------------------------------------------------------------------------
log "building frontdoor"
(cd "$ROOT" && go build -o "$WORK/frontdoor" ./cmd/frontdoor)
FD_PORT=$BASE_PORT
cat >"$WORK/frontdoor.yaml" <<EOF
site: {name: bench, default_zone: hq}
zones:
  - {name: hq, primary: true, ranges: [127.0.0.0/8]}
  - {name: east, ranges: [127.2.0.0/16]}
nodes:
  - name: bench
    zone: hq
    listeners: [{kind: dns, address: "127.0.0.1:$FD_PORT"}]
gateways:
  - {name: gw-hq-1, zone: hq, address: 127.1.0.11, ports: [{port: $GW_PORT}]}
  - {name: gw-hq-2, zone: hq, address: 127.1.0.12, ports: [{port: $GW_PORT}]}
  - {name: gw-east-1, zone: east, address: 127.2.0.11, ports: [{port: $GW_PORT}]}
  - {name: gw-east-2, zone: east, address: 127.2.0.12, ports: [{port: $GW_PORT}]}
gslb:
  domains: [{name: bench.test., ns: [ns1], records: [{name: ns1, type: A, value: 127.0.0.1}]${SIGNED:+, dnssec: true}}]
  names:
    - name: $NAME.
      policy: failover
      sites:
        - {zone: hq, gateways: [gw-hq-1, gw-hq-2], fallback: [east]}
        - {zone: east, gateways: [gw-east-1, gw-east-2], fallback: [hq]}
EOF
# The same site with udp_coalesce off: every query wakes the server, as in gdnsd.
FD0_PORT=$((BASE_PORT + 4))
sed -e "s|address: \"127.0.0.1:$FD_PORT\"}|address: \"127.0.0.1:$FD0_PORT\", udp_coalesce: 0s}|" "$WORK/frontdoor.yaml" >"$WORK/frontdoor-0.yaml"
grep -q "udp_coalesce: 0s" "$WORK/frontdoor-0.yaml" || { log "frontdoor-0.yaml: the listener line did not match"; exit 1; }
# The same again, read through Go's poller (x/net batches) instead of a blocking worker: an
# explicit GOMAXPROCS makes serve leave the UDP sockets to the poller (the portable path).
FDS_PORT=$((BASE_PORT + 5))
sed -e "s|127.0.0.1:$FD0_PORT|127.0.0.1:$FDS_PORT|" "$WORK/frontdoor-0.yaml" >"$WORK/frontdoor-std.yaml"
# FD_B, a prebuilt frontdoor of another revision (go build -o FILE ./cmd/frontdoor there),
# serves the frontdoor-0 site too, as frontdoor-0b, in the same rounds: an A/B of that row.
FDB_PORT=$((BASE_PORT + 6))
sed -e "s|127.0.0.1:$FD0_PORT|127.0.0.1:$FDB_PORT|" "$WORK/frontdoor-0.yaml" >"$WORK/frontdoor-0b.yaml"

# --- gdnsd ---------------------------------------------------------------------------------
GDNSD_PORT=$((BASE_PORT + 1))
mkdir -p "$WORK/gdnsd/zones"
cat >"$WORK/gdnsd/config" <<EOF
options => {
  listen => [ 127.0.0.1:$GDNSD_PORT ]
  udp_threads => 1
  tcp_threads => 1
}
service_types => {
  gw => { plugin => tcp_connect, port => $GW_PORT, up_thresh => 2, ok_thresh => 2, down_thresh => 2, interval => 2, timeout => 1 }
}
plugins => {
  geoip => {
    maps => {
      zones => {
        datacenters => [ hq, east ]
        nets => { 127.0.0.0/8 => [ hq, east ], 127.2.0.0/16 => [ east, hq ] }
      }
    }
    resources => {
      desktop => {
        map => zones
        service_types => gw
        dcmap => {
          hq => { gw1 => 127.1.0.11, gw2 => 127.1.0.12 }
          east => { gw1 => 127.2.0.11, gw2 => 127.2.0.12 }
        }
      }
    }
  }
}
EOF
printf '%s\ndesktop 5 IN DYNA geoip!desktop\n' "$ZONE_HEAD" >"$WORK/gdnsd/zones/bench.test"
if [ ! -d /run/gdnsd ]; then mkdir -p /run/gdnsd && MADE_RUN_DIR=1; fi

# --- pdns ----------------------------------------------------------------------------------
PDNS_PORT=$((BASE_PORT + 2))
mkdir -p "$WORK/pdns"
printf '%s\ndesktop 5 IN LUA A "ifportup(%d, {'"'"'127.1.0.11'"'"', '"'"'127.1.0.12'"'"'}, {selector='"'"'all'"'"'})"\n' "$ZONE_HEAD" $GW_PORT >"$WORK/pdns/bench.test.zone"
echo "zone \"bench.test\" { type master; file \"$WORK/pdns/bench.test.zone\"; };" >"$WORK/pdns/named.conf"
cat >"$WORK/pdns/pdns.conf" <<EOF
launch=bind
bind-config=$WORK/pdns/named.conf
enable-lua-records=yes
${SIGNED:+bind-dnssec-db=$WORK/pdns/bind-dnssec.db}
local-address=127.0.0.1
local-port=$PDNS_PORT
socket-dir=$WORK/pdns
daemon=no
guardian=no
disable-syslog=yes
loglevel=3
receiver-threads=1
distributor-threads=1
EOF

# --- knot ----------------------------------------------------------------------------------
KNOT_PORT=$((BASE_PORT + 3))
mkdir -p "$WORK/knot"
printf '%s\ndesktop 5 IN A 127.1.0.11\ndesktop 5 IN A 127.1.0.12\n' "$ZONE_HEAD" >"$WORK/knot/bench.test.zone"
cat >"$WORK/knot/knot.conf" <<EOF
server:
  listen: 127.0.0.1@$KNOT_PORT
  rundir: $WORK/knot
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
database:
  storage: $WORK/knot
log:
  - target: stderr
    any: warning
${SIGNED:+policy:
  - id: p256
    algorithm: ecdsap256sha256
    single-type-signing: on
mod-onlinesign:
  - id: sign
    policy: p256
}zone:
  - domain: bench.test
    file: $WORK/knot/bench.test.zone
${SIGNED:+    module: mod-onlinesign/sign}
EOF
if [ -n "$SIGNED" ]; then
	pdnsutil --config-dir="$WORK/pdns" create-bind-db "$WORK/pdns/bind-dnssec.db" >&2
	pdnsutil --config-dir="$WORK/pdns" secure-zone bench.test >&2
fi

# --- measuring -----------------------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# ctx_switches PID: voluntary + involuntary context switches of all the process's threads.
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }

declare -A QPS CPU_US ANSWER PID PORT ROUND_QPS ROUND_CPU ROUND_PERF ROUND_CS PERF_US CS ROUND_LAT LAT
# perf (linux-perf), when present, also measures task-clock per query.
PERF=$(command -v perf || true)
PERF_WINDOW=$((DURATION > 4 ? DURATION - 2 : 2))
start_server() { # name port cmd...
	local name=$1 port=$2
	shift 2
	log "starting $name on port $port"
	taskset -c "$SERVER_CPU" "$@" >"$WORK/$name.log" 2>&1 &
	PID[$name]=$!
	PORT[$name]=$port
	PIDS+=($!)
	if ! python3 "$WORK/ask.py" "$port" "$NAME" >/dev/null; then
		log "$name does not answer; its log:"
		tail -20 "$WORK/$name.log" >&2
		kill "${PID[$name]}" 2>/dev/null || true
		PID[$name]=
	fi
}

# measure NAME: one saturated run and one fixed-rate run; appends to ROUND_QPS and ROUND_CPU.
measure() {
	local name=$1 pid=${PID[$1]} port=${PORT[$1]}
	taskset -c "$CLIENT_CPU" dnsperf ${SIGNED:+-D} -s 127.0.0.1 -p "$port" -d "$WORK/queries" -l "$DURATION" -q 200 >"$WORK/$name.sat" 2>&1 || true
	local qps
	qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$WORK/$name.sat")
	local before after done perfpid= cs0 cs1
	before=$(cpu_ticks "$pid")
	cs0=$(ctx_switches "$pid")
	if [ -n "$PERF" ]; then
		# A second, precise view of the same run: the task-clock of the server.
		perf stat -x, -e task-clock -p "$pid" -o "$WORK/$name.perf" -- sleep "$PERF_WINDOW" >/dev/null 2>&1 &
		perfpid=$!
	fi
	taskset -c "$CLIENT_CPU" dnsperf ${SIGNED:+-D} -s 127.0.0.1 -p "$port" -d "$WORK/queries" -l "$DURATION" -q 200 -Q "$RATE" >"$WORK/$name.rate" 2>&1 || true
	after=$(cpu_ticks "$pid")
	cs1=$(ctx_switches "$pid")
	[ -n "$perfpid" ] && wait "$perfpid"
	done=$(awk '/Queries completed:/ {print $3}' "$WORK/$name.rate")
	ROUND_LAT[$name]="${ROUND_LAT[$name]:-} $(awk '/Average Latency/ {printf "%.0f", $4 * 1e6}' "$WORK/$name.rate")"
	ROUND_CS[$name]="${ROUND_CS[$name]:-} $(awk -v a="$cs0" -v b="$cs1" -v n="${done:-0}" 'BEGIN { if (n > 0) printf "%.3f", (b - a) / n }')"
	if [ -n "$PERF" ]; then
		# Queries inside the perf window, assuming an even rate over the run.
		local inwin
		inwin=$(awk -v n="${done:-0}" -v w="$PERF_WINDOW" -v d="$DURATION" 'BEGIN { print n * w / d }')
		ROUND_PERF[$name]="${ROUND_PERF[$name]:-} $(awk -F, -v n="$inwin" '$3 == "task-clock" && n > 0 { printf "%.2f", $1 * 1000 / n }' "$WORK/$name.perf")"
	fi
	local cpu
	cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="${done:-0}" 'BEGIN { if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print "n/a" }')
	log "$name: ${qps:-n/a} qps saturated, $cpu us CPU per query at $RATE qps (${done:-0} queries)"
	ROUND_QPS[$name]="${ROUND_QPS[$name]:-} ${qps:-n/a}"
	ROUND_CPU[$name]="${ROUND_CPU[$name]:-} $cpu"
}

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR+1)/2]; else printf "%.2f", (v[NR/2] + v[NR/2+1]) / 2 }'; }

SERVERS=(frontdoor frontdoor-0 frontdoor-std gdnsd pdns knot)
[ -z "${FD_B:-}" ] || SERVERS=(frontdoor frontdoor-0 frontdoor-0b frontdoor-std gdnsd pdns knot)
[ -z "$SIGNED" ] || SERVERS=(frontdoor frontdoor-0 pdns knot) # gdnsd has no DNSSEC
# ONLY, a space-separated subset of the servers, runs those alone (frontdoor is always run:
# the ratios are to it).
if [ -n "${ONLY:-}" ]; then
	keep=(frontdoor)
	for s in "${SERVERS[@]}"; do [[ " $ONLY " == *" $s "* && $s != frontdoor ]] && keep+=("$s"); done
	SERVERS=("${keep[@]}")
fi
want() { [[ " ${SERVERS[*]} " == *" $1 "* ]]; }
start_server frontdoor "$FD_PORT" "$WORK/frontdoor" serve --config "$WORK/frontdoor.yaml" --data "$WORK/fd-data"
want frontdoor-0 && start_server frontdoor-0 "$FD0_PORT" "$WORK/frontdoor" serve --config "$WORK/frontdoor-0.yaml" --data "$WORK/fd0-data"
want frontdoor-0b && start_server frontdoor-0b "$FDB_PORT" "$FD_B" serve --config "$WORK/frontdoor-0b.yaml" --data "$WORK/fdb-data"
want frontdoor-std && start_server frontdoor-std "$FDS_PORT" env GOMAXPROCS=1 "$WORK/frontdoor" serve --config "$WORK/frontdoor-std.yaml" --data "$WORK/fds-data"
want gdnsd && start_server gdnsd "$GDNSD_PORT" gdnsd -c "$WORK/gdnsd" start
want pdns && start_server pdns "$PDNS_PORT" pdns_server --config-dir="$WORK/pdns"
want knot && start_server knot "$KNOT_PORT" knotd -c "$WORK/knot/knot.conf"
sleep 3 # let the health checks of gdnsd and pdns settle
for s in "${SERVERS[@]}"; do
	if [ -n "${PID[$s]}" ]; then
		ANSWER[$s]=$(python3 "$WORK/ask.py" "${PORT[$s]}" "$NAME" ${SIGNED:+do} || echo none)
	else
		ANSWER[$s]="not running"
	fi
done
# The machine is shared: rounds alternate the servers so that background load hits them
# alike, and the medians are reported.
for round in $(seq "$ROUNDS"); do
	for s in "${SERVERS[@]}"; do
		[ -n "${PID[$s]}" ] || continue
		log "round $round: $s"
		measure "$s"
	done
done
for s in "${SERVERS[@]}"; do
	QPS[$s]=$(echo "${ROUND_QPS[$s]:-}" | median)
	CPU_US[$s]=$(echo "${ROUND_CPU[$s]:-}" | median)
	PERF_US[$s]=$(echo "${ROUND_PERF[$s]:-}" | median)
	CS[$s]=$(echo "${ROUND_CS[$s]:-}" | median)
	LAT[$s]=$(echo "${ROUND_LAT[$s]:-}" | median)
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else print "n/a" }'; }

{
	echo "# DNS benchmark: frontdoor GSLB vs gdnsd, PowerDNS LUA and knot${SIGNED:+, signed online (DNSSEC, ECDSA P-256, every query with DO)}"
	echo
	echo "Command: \`bench/dns.sh\` (DURATION=$DURATION RATE=$RATE ROUNDS=$ROUNDS SERVER_CPU=$SERVER_CPU CLIENT_CPU=$CLIENT_CPU), $(date -u +%Y-%m-%d)."
	echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); $(uname -sr)."
	echo "Versions: $(dnsperf -h 2>&1 | awk '/^DNS Performance Testing Tool/ {print}' | head -1 || true) dnsperf $(dpkg-query -W -f '${Version}' dnsperf 2>/dev/null), gdnsd $(dpkg-query -W -f '${Version}' gdnsd 2>/dev/null), pdns-server $(dpkg-query -W -f '${Version}' pdns-server 2>/dev/null), knot $(dpkg-query -W -f '${Version}' knot 2>/dev/null), $(go version | awk '{print $3}')."
	echo
	echo "Query: \`$NAME A\` from 127.0.0.1 (zone hq), dnsperf pinned to core $CLIENT_CPU, each server pinned"
	echo "to core $SERVER_CPU with one UDP worker. Saturated: dnsperf -l $DURATION -q 200. CPU per query: server"
	echo "utime+stime from /proc/PID/stat over dnsperf -Q $RATE -l $DURATION, divided by completed queries."
	echo "Medians of $ROUNDS rounds; each round runs every server once, in turn. Load average at the end:"
	echo "$(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared; single runs vary by ±30%). With linux-perf installed, perf stat"
	echo "also counts the server's task-clock over ${PERF_WINDOW}s of each fixed-rate run; context switches are those of all the server's threads (/proc/PID/task/*/status) over the fixed-rate run."
	echo
	echo "frontdoor runs with its default udp_coalesce (250us: under load, queries gather up to 250 µs so"
	echo "that one wake-up answers them all); frontdoor-0 is the same site with udp_coalesce: 0s;"
	echo "frontdoor-std is frontdoor-0 read through Go's poller (x/net batch reads and writes, GOMAXPROCS=1),"
	echo "the portable path, instead of the blocking worker of internal/rawio. The"
	echo "latency column is dnsperf's average at the fixed rate: it shows what the coalescing costs."
	echo
	echo "| server | what it answers | answer | saturated qps | frontdoor / server (qps) | CPU µs per query at $RATE qps | server / frontdoor (CPU) | perf task-clock µs per query | context switches per query | average latency at $RATE qps (µs) |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for s in "${SERVERS[@]}"; do
		case $s in
		frontdoor) what="GSLB: zone map + failover sites, tcp connect health (250 ms)" ;;
		frontdoor-0) what="the same, udp_coalesce: 0s" ;;
		frontdoor-0b) what="frontdoor-0 built from FD_B (another revision)" ;;
		frontdoor-std) what="the same, udp_coalesce: 0s, through Go's poller (x/net batches)" ;;
		gdnsd) what="GSLB: geoip nets map + multifo, tcp_connect health" ;;
		pdns) what="LUA ifportup over the gateway listeners${SIGNED:+, signed online}" ;;
		knot) what="static A (ceiling)${SIGNED:+, mod-onlinesign}" ;;
		esac
		echo "| $s | $what | ${ANSWER[$s]} | ${QPS[$s]} | $(ratio "${QPS[frontdoor]}" "${QPS[$s]}") | ${CPU_US[$s]} | $(ratio "${CPU_US[$s]}" "${CPU_US[frontdoor]}") | ${PERF_US[$s]} | ${CS[$s]} | ${LAT[$s]:-n/a} |"
	done
	echo
	echo "Every round (saturated qps; CPU µs per query from /proc; from perf task-clock):"
	echo
	for s in "${SERVERS[@]}"; do
		echo "- $s:${ROUND_QPS[$s]:- n/a};${ROUND_CPU[$s]:- n/a}; perf:${ROUND_PERF[$s]:- n/a}"
	done
} >"$OUT"
cat "$OUT"
