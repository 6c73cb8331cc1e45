#!/usr/bin/env bash
# bench/proxy.sh — frontdoor's L4 proxy against HAProxy (tcp mode, option splice-auto), nginx
# stream and a direct connection, in one run on one machine, all on loopback:
#   * iperf3 TCP throughput, 1 and 4 streams, plus the proxy's CPU seconds per GB;
#   * wrk with "Connection: close" against a loopback nginx origin (new connection per
#     request), plus the proxy's CPU milliseconds per 1000 connections;
#   * iperf3 UDP at 64 and 1200 bytes: datagrams/s received and loss, and datagrams/s the proxy
#     forwarded and dropped at its own socket (HAProxy has no UDP); and the same with iperf3 -R
#     (the backend sends: the proxy's replies path);
#   * UDP saturation, both ways: "proxy flood" sends 64 and 1200-byte datagrams with sendmmsg
#     as fast as one thread can (several times iperf3's rate) and counts what arrives;
#   * RSS per idle connection with 9,900 connections held open (open-files limit 20,000).
# The proxy runs on PROXY_CPU, load generators and origins on LOAD_CPU (taskset).
# Results go to bench/results/proxy.md (or $OUT). Usage: bench/proxy.sh [duration-seconds]
# TESTS picks a subset (default "idle tcp conn udp flood"); TARGETS a subset of "direct frontdoor
# frontdoor-nohc haproxy nginx nginx-hc" (the -nohc and -hc targets only run the conn test); e.g. TESTS=conn TARGETS="frontdoor haproxy" OUT=/dev/null for a quick look.
# FD_B, a prebuilt bench proxy (go build ./bench/proxy of another revision), runs beside
# frontdoor's TCP process as targets fd-b (tcp, conn) and fd-b-nohc (conn, half_close: false),
# each placed right after its frontdoor counterpart in a round; the report adds per-round
# paired ratios of fd-b to frontdoor and to the peers. FD_B_NAME labels it in the report.
# FD_UDP_COALESCE (default: frontdoor's, 250us) and FD_BLOCKING_UDP (default true) set how
# frontdoor reads UDP.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-${DUR:-5}}
OUT=${OUT:-bench/results/proxy.md}
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
IDLE_CONNS=${IDLE_CONNS:-9900}
ROUNDS=${ROUNDS:-3}
TESTS=" ${TESTS:-idle tcp conn udp flood} "
FD_B=${FD_B:-}
FD_B_NAME=${FD_B_NAME:-$FD_B}
DEFAULT_TARGETS="direct frontdoor frontdoor-nohc haproxy nginx nginx-hc"
[ -z "$FD_B" ] || DEFAULT_TARGETS="direct frontdoor fd-b frontdoor-nohc fd-b-nohc haproxy nginx nginx-hc"
TARGETS=" ${TARGETS:-$DEFAULT_TARGETS} "
want() { [[ "$TESTS" == *" $1 "* ]]; }

. bench/lib.sh
install_missing iperf3=iperf3 wrk=wrk haproxy=haproxy nginx=nginx \
	/usr/lib/nginx/modules/ngx_stream_module.so=libnginx-mod-stream

go build -o "$WORK/fdproxy" ./bench/proxy

rss_kb() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
# udp_drops PORT — datagrams dropped so far at the unconnected loopback UDP socket bound to
# PORT (a full receive queue), from the drops column of /proc/net/udp.
udp_drops() {
	python3 -c '
import sys
port, n = int(sys.argv[1]), 0
for l in open("/proc/net/udp").readlines()[1:]:
    f = l.split()
    if int(f[1].split(":")[1], 16) == port and int(f[2].split(":")[1], 16) == 0:
        n += int(f[-1])
print(n)' "$1"
}

# pid_udp_drops PID — datagrams dropped so far at the full receive queues of the UDP sockets
# that process PID holds (a proxy's flow sockets among them), from /proc/net/udp and udp6.
pid_udp_drops() {
	python3 -c '
import os, sys
pid, inodes = sys.argv[1], set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        t = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
n = 0
for tab in ("/proc/net/udp", "/proc/net/udp6"):
    for l in open(tab).readlines()[1:]:
        f = l.split()
        if f[9] in inodes:
            n += int(f[-1])
print(n)' "$1"
}

# Origins and load targets (LOAD_CPU).
start iperf3 "$LOAD_CPU" iperf3 -s -p 15201
start_origin "$LOAD_CPU"
start sink "$LOAD_CPU" "$WORK/fdproxy" sink -listen 127.0.0.1:19000

# The proxies (PROXY_CPU): TCP 1 -> iperf3, 2 -> origin, 9 -> sink; UDP 1 -> iperf3,
# 11 -> flood's backend (15211). frontdoor's UDP listeners run in a process of their own, as
# frontdoor serve runs them: two blocking workers each with a P added for each, and the
# default udp_coalesce (250us); the TCP process keeps GOMAXPROCS from its one-CPU affinity.
# Every UDP socket may have 4 MB buffers: frontdoor's default, and nginx's listen rcvbuf/sndbuf.
# frontdoor's and HAProxy's TCP listeners accept a connection once the client has sent bytes
# (defer_accept, defer-accept: TCP_DEFER_ACCEPT); nginx 1.22's stream module has no such option.
start frontdoor "$PROXY_CPU" "$WORK/fdproxy" serve -defer-accept \
	-tcp 127.0.0.1:16001=127.0.0.1:15201 \
	-tcp 127.0.0.1:16002=127.0.0.1:18080 -tcp 127.0.0.1:16009=127.0.0.1:19000 \
	-tcp-no-half-close 127.0.0.1:16012=127.0.0.1:18080
b_ports=""
if [ -n "$FD_B" ]; then
	start fd-b "$PROXY_CPU" "$FD_B" serve -defer-accept -tcp 127.0.0.1:16101=127.0.0.1:15201 \
		-tcp 127.0.0.1:16102=127.0.0.1:18080 -tcp-no-half-close 127.0.0.1:16112=127.0.0.1:18080
	b_ports="16101 16102 16112"
fi
start frontdoor-udp "$PROXY_CPU" "$WORK/fdproxy" serve -udp 127.0.0.1:16001=127.0.0.1:15201 \
	-udp 127.0.0.1:16011=127.0.0.1:15211 \
	-blocking-udp="${FD_BLOCKING_UDP:-true}" ${FD_UDP_COALESCE:+-udp-coalesce="$FD_UDP_COALESCE"}
cat >"$WORK/haproxy.cfg" <<EOF
global
    # 9,900 proxied connections need 19,800 sockets; HAProxy also reserves 2 fds per splice
    # pipe (maxpipes, default maxconn/4), so cap pipes to stay under the 20,000 open-files
    # limit. 24 pipes are plenty for the at most 4 concurrent streams of the throughput tests.
    maxconn $((IDLE_CONNS + 40))
    maxpipes 24
    nbthread 1
defaults
    mode tcp
    option splice-auto
    timeout connect 5s
    timeout client 10m
    timeout server 10m
listen iperf
    bind 127.0.0.1:17001 defer-accept
    server s 127.0.0.1:15201
listen web
    bind 127.0.0.1:17002 defer-accept
    server s 127.0.0.1:18080
listen idle
    bind 127.0.0.1:17009 defer-accept
    server s 127.0.0.1:19000
EOF
start haproxy "$PROXY_CPU" haproxy -db -f "$WORK/haproxy.cfg"
cat >"$WORK/stream.conf" <<EOF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $WORK/stream.pid.nginx;
error_log $WORK/stream.err;
events { worker_connections 19990; }
stream {
    proxy_timeout 10m;
    server { listen 127.0.0.1:18001; proxy_pass 127.0.0.1:15201; }
    server { listen 127.0.0.1:18001 udp rcvbuf=4m sndbuf=4m; proxy_pass 127.0.0.1:15201; }
    server { listen 127.0.0.1:18011 udp rcvbuf=4m sndbuf=4m; proxy_pass 127.0.0.1:15211; }
    server { listen 127.0.0.1:18002; proxy_pass 127.0.0.1:18080; }
    server { listen 127.0.0.1:18009; proxy_pass 127.0.0.1:19000; }
    # As frontdoor and HAProxy do by default: a FIN is passed on and the other direction
    # carries on (nginx's default ends the session at the first FIN).
    server { listen 127.0.0.1:18012; proxy_pass 127.0.0.1:18080; proxy_half_close on; }
}
EOF
start nginx "$PROXY_CPU" nginx -c "$WORK/stream.conf" -g 'daemon off; master_process off;'
for p in 15201 18080 19000 16001 16002 16009 16012 $b_ports 17001 17002 17009 18001 18002 18009 18012; do wait_port $p; done

RES="$WORK/results.tsv"
: >"$RES"
# row TEST TARGET VALUE UNIT CPU_SECONDS WORK_UNITS — one measurement.
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RES"; }

# RSS per idle connection first, while every proxy is fresh: IDLE_CONNS connections held
# open through each proxy, one byte sent on each.
for t in frontdoor:16009 haproxy:17009 nginx:18009; do
	IFS=: read -r name port <<<"$t"
	want idle && [[ "$TARGETS" == *" $name "* ]] || continue
	pid=$(pidof_ "$name")
	r0=$(rss_kb "$pid")
	start "hold-$name" "$LOAD_CPU" "$WORK/fdproxy" hold -connect "127.0.0.1:$port" -n "$IDLE_CONNS"
	for _ in $(seq 600); do
		grep -q holding "$WORK/hold-$name.log" && break
		grep -q 'proxy:' "$WORK/hold-$name.log" && break
		sleep 0.1
	done
	sleep 5
	r1=$(rss_kb "$pid")
	held=$(awk '/holding/{print $2}' "$WORK/hold-$name.log")
	held=${held:-0}
	row idle_rss "$name" "$(echo "($r1-$r0)*1024/($held+($held==0))" | bc)" "B/conn: $held held, RSS ${r0}->${r1} KB" 0 "$held"
	kill "$(pidof_ "hold-$name")"
	sleep 3
done

# frontdoor-nohc is frontdoor's TCP process on a listener with half_close: false, which ends a
# connection at the backend's FIN as nginx stream does by default (HAProxy half-closes, as
# frontdoor does by default); it runs the connection-rate test only.
targets=("direct:15201:18080:" "frontdoor:16001:16002:frontdoor" "frontdoor-nohc::16012:frontdoor" "haproxy:17001:17002:haproxy" "nginx:18001:18002:nginx" "nginx-hc::18012:nginx")
[ -z "$FD_B" ] || targets=("direct:15201:18080:" "frontdoor:16001:16002:frontdoor" "fd-b:16101:16102:fd-b" "frontdoor-nohc::16012:frontdoor" "fd-b-nohc::16112:fd-b" "haproxy:17001:17002:haproxy" "nginx:18001:18002:nginx" "nginx-hc::18012:nginx")

# measure TEST NAME PID CMD... — runs CMD, charging the proxy PID's CPU time to TEST.
c0=0
cpu_start() { c0=0; [ -z "$1" ] || c0=$(cpu_ticks "$1"); }
cpu_used() { local c1=0; [ -z "$1" ] || c1=$(cpu_ticks "$1"); echo "($c1-$c0)/$TCK" | bc -l; }

# The machine is shared, so every test runs ROUNDS times with the targets interleaved, and
# the report takes the median. Each round starts one target further on, so that no target
# always follows the same one (the kernel state a run leaves, TIME_WAIT sockets among it).
for round in $(seq "$ROUNDS"); do
	for i in "${!targets[@]}"; do
		t=${targets[(i + round - 1) % ${#targets[@]}]}
		IFS=: read -r name iport wport pname <<<"$t"
		[[ "$TARGETS" == *" $name "* ]] || continue
		pid=""
		[ -n "$pname" ] && pid=$(pidof_ "$pname")
		for streams in 1 4; do
			want tcp && [ -n "$iport" ] || continue
			cpu_start "$pid"
			taskset -c "$LOAD_CPU" iperf3 -c 127.0.0.1 -p "$iport" -t "$DUR" -P "$streams" -J >"$WORK/iperf.json"
			cpu=$(cpu_used "$pid")
			read -r bps bytes < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]["sum_received"]; print(e["bits_per_second"], e["bytes"])' "$WORK/iperf.json")
			row "tcp_${streams}" "$name" "$bps" bit/s "$cpu" "$bytes"
			sleep 1
		done
		if want conn; then
			cpu_start "$pid"
			taskset -c "$LOAD_CPU" wrk -t1 -c32 -d"${DUR}s" -H 'Connection: close' "http://127.0.0.1:$wport/" >"$WORK/wrk.txt"
			cpu=$(cpu_used "$pid")
			rps=$(awk '/Requests\/sec/{print $2}' "$WORK/wrk.txt")
			reqs=$(awk '/requests in/{print $1}' "$WORK/wrk.txt")
			errs=$(awk '/Socket errors|Non-2xx/{print}' "$WORK/wrk.txt" | tr '\n' ' ')
			[ -z "$errs" ] || echo "wrk via $name: $errs" >&2
			row conn_rate "$name" "$rps" conn/s "$cpu" "$reqs"
			sleep 1
		fi
		want udp && [ -n "$iport" ] || continue
		[ "$name" != haproxy ] || continue # HAProxy has no UDP
		[ "$name" != frontdoor ] || pid=$(pidof_ frontdoor-udp)
		for len in 64 1200; do
			d0=$(udp_drops "$iport")
			cpu_start "$pid"
			taskset -c "$LOAD_CPU" iperf3 -c 127.0.0.1 -p "$iport" -u -b 0 -l "$len" -t "$DUR" -J >"$WORK/udp.json" || true
			cpu=$(cpu_used "$pid")
			d1=$(udp_drops "$iport")
			read -r pps loss pkts fwd ploss fwdn < <(python3 -c '
import json,sys
s=json.load(open(sys.argv[1]))["end"]["sum"]
got=s["packets"]-s["lost_packets"]
drops=int(sys.argv[2])
fwd=s["packets"]-drops
print(got/s["seconds"], s["lost_percent"], got, fwd/s["seconds"], 100*drops/max(s["packets"],1), fwd)' "$WORK/udp.json" "$((d1 - d0))")
			[ -n "$pid" ] || { fwd=$pps; ploss=$loss; fwdn=$pkts; } # direct: no proxy socket
			# The proxy's CPU is charged per datagram it read from its socket and forwarded.
			row "udp_${len}" "$name" "$pps" "pkt/s loss=$loss fwd=$fwd ploss=$ploss" "$cpu" "$fwdn"
			sleep 1
		done
		# The other direction (iperf3 -R: the backend sends, the proxy relays its replies to the
		# client from the listening socket), as display traffic mostly flows. The proxy's CPU is
		# charged per datagram the backend sent.
		# Drops at the proxy are those at its own sockets' full receive queues (the flow socket
		# the backend sends to, mostly).
		for len in 64 1200; do
			d0=0
			[ -z "$pid" ] || d0=$(pid_udp_drops "$pid")
			cpu_start "$pid"
			taskset -c "$LOAD_CPU" iperf3 -c 127.0.0.1 -p "$iport" -u -b 0 -l "$len" -t "$DUR" -R -J >"$WORK/udp.json" || true
			cpu=$(cpu_used "$pid")
			d1=0
			[ -z "$pid" ] || d1=$(pid_udp_drops "$pid")
			read -r pps loss pkts ploss < <(python3 -c '
import json,sys
s=json.load(open(sys.argv[1]))["end"]["sum"]
got=s["packets"]-s["lost_packets"]
print(got/s["seconds"], s["lost_percent"], s["packets"], 100*int(sys.argv[2])/max(s["packets"],1))' "$WORK/udp.json" "$((d1 - d0))")
			row "rudp_${len}" "$name" "$pps" "pkt/s loss=$loss ploss=$ploss" "$cpu" "$pkts"
			sleep 1
		done
	done
	# Saturation: the proxy's CPU is charged per datagram that arrived.
	for t in direct:15211 frontdoor:16011 nginx:18011; do
		IFS=: read -r name fport <<<"$t"
		want flood && [[ "$TARGETS" == *" $name "* ]] || continue
		pid=""
		[ "$name" = direct ] || pid=$(pidof_ "$name")
		[ "$name" != frontdoor ] || pid=$(pidof_ frontdoor-udp)
		for rev in false true; do
			for len in 64 1200; do
				cpu_start "$pid"
				taskset -c "$LOAD_CPU" "$WORK/fdproxy" flood -proxy "127.0.0.1:$fport" -backend 127.0.0.1:15211 \
					-len "$len" -dur "${DUR}s" -reverse="$rev" >"$WORK/flood.txt"
				cpu=$(cpu_used "$pid")
				read -r sent got secs < <(awk '{print $2, $4, $6}' "$WORK/flood.txt")
				test=flood_$len
				[ "$rev" = false ] || test=rflood_$len
				row "$test" "$name" "$(echo "$got/$secs" | bc -l)" \
					"pkt/s loss=$(echo "100*($sent-$got)/($sent+($sent==0))" | bc -l) sent=$(echo "$sent/$secs" | bc -l)" "$cpu" "$got"
				sleep 1
			done
		done
	done
done

# The command line that reproduces this run: the settings it changed, then the script.
cmd=""
[ "$ROUNDS" = 3 ] || cmd+="ROUNDS=$ROUNDS "
[ "$TESTS" = " idle tcp conn udp flood " ] || cmd+="TESTS=\"$(echo $TESTS)\" "
[ -z "$FD_B" ] || cmd+="FD_B=\"$FD_B_NAME\" "
[ "$TARGETS" = " $DEFAULT_TARGETS " ] || cmd+="TARGETS=\"$(echo $TARGETS)\" "
cmd+="bench/proxy.sh $DUR"
python3 - "$RES" "$OUT" "$DUR" "$PROXY_CPU" "$LOAD_CPU" "$IDLE_CONNS" "$ROUNDS" "$(nproc)" "$(uname -r)" "$cmd" "$FD_B_NAME" <<'PY'
import sys, collections, statistics
res, out, dur, pcpu, lcpu, idle, rounds, ncpu, kernel, cmd, fdb = sys.argv[1:]
runs = collections.OrderedDict()
for line in open(res):
    test, target, value, unit, cpu, work = line.rstrip("\n").split("\t")
    runs.setdefault(test, collections.OrderedDict()).setdefault(target, []).append((float(value), unit, float(cpu), float(work)))
def med(xs):
    return statistics.median(xs)
def fmt(v, unit):
    if unit == "bit/s":
        return f"{v/1e9:.2f} Gbit/s"
    if unit.startswith("pkt/s"):
        return f"{v/1e3:.1f} kpkt/s"
    if unit == "conn/s":
        return f"{v:.0f} conn/s"
    if unit.startswith("B/conn"):
        return f"{v:.0f} B/conn"
    return f"{v:.0f} {unit}"
names = {"tcp_1": "iperf3 TCP, 1 stream", "tcp_4": "iperf3 TCP, 4 streams",
         "conn_rate": "wrk -c32, Connection: close (one new TCP connection per request) to a loopback nginx origin",
         "udp_64": "iperf3 UDP, 64-byte datagrams, -b 0 (received datagrams/s)",
         "udp_1200": "iperf3 UDP, 1200-byte datagrams, -b 0 (received datagrams/s)",
         "rudp_64": "iperf3 UDP -R (backend to client, the replies path), 64-byte datagrams, -b 0 (received datagrams/s)",
         "rudp_1200": "iperf3 UDP -R (backend to client, the replies path), 1200-byte datagrams, -b 0 (received datagrams/s)",
         "flood_64": "UDP saturation, client to backend, 64-byte datagrams (`proxy flood`: sendmmsg as fast as one thread can; received datagrams/s)",
         "flood_1200": "UDP saturation, client to backend, 1200-byte datagrams (received datagrams/s)",
         "rflood_64": "UDP saturation, backend to client (the replies path), 64-byte datagrams (received datagrams/s)",
         "rflood_1200": "UDP saturation, backend to client (the replies path), 1200-byte datagrams (received datagrams/s)",
         "idle_rss": f"RSS per idle connection, {idle} connections held open"}
L = ["# frontdoor L4 proxy benchmark", ""]
L.append(f"Produced by `{cmd}` (each test {dur} s, {rounds} rounds with the targets interleaved; "
         f"medians shown, all rounds listed). Machine: {ncpu} CPUs, Linux {kernel}, shared with other work, so "
         f"absolute numbers move between runs; compare within a table. Proxies pinned to CPU {pcpu}, load "
         f"generators and origins to CPU {lcpu} (taskset). One thread/worker each: HAProxy `nbthread 1` in tcp mode "
         f"with `option splice-auto`, nginx stream 1 worker, frontdoor TCP with GOMAXPROCS from its one-CPU affinity, frontdoor UDP in a process of its own with two Ps added for its blocking workers. "
         f"frontdoor's and HAProxy's TCP listeners defer accepts until the client has sent bytes (TCP_DEFER_ACCEPT; nginx 1.22 stream cannot). "
         f"Proxy CPU is user+system time of the proxy process during the test (loopback TCP work done in the "
         f"sender's context is charged to it).")
L.append("")
for test, t in runs.items():
    L.append(f"## {names.get(test, test)}")
    L.append("")
    L.append("| target | median | proxy CPU | all rounds | frontdoor ÷ target |")
    L.append("|---|---|---|---|---|")
    fdv = med([r[0] for r in t["frontdoor"]]) if "frontdoor" in t else None
    for target, rs in t.items():
        v = med([r[0] for r in rs])
        unit = rs[0][1]
        per = ""
        if target != "direct" and test != "idle_rss":
            cpu_per = [r[2] / r[3] for r in rs if r[3] > 0]
            if cpu_per:
                c = med(cpu_per)
                if test.startswith("tcp"):
                    per = f"{c*1e9:.2f} CPU s/GB"
                elif test == "conn_rate":
                    per = f"{c*1e6:.0f} CPU µs/conn"
                elif test.startswith("rudp"):
                    per = f"{c*1e9:.0f} CPU ns/datagram the backend sent"
                elif "flood" in test:
                    per = f"{c*1e9:.0f} CPU ns/received datagram"
                else:
                    per = f"{c*1e9:.0f} CPU ns/forwarded datagram"
        extra = ""
        if unit.startswith("pkt/s"):
            extra = " (loss " + "/".join(f"{float(r[1].split()[1].split('=')[1]):.0f}%" for r in rs) + ")"
        if test == "idle_rss":
            extra = " (" + "; ".join(r[1] for r in rs) + ")"
        allr = ", ".join(fmt(r[0], unit) for r in rs)
        ratio = f"{fdv/v:.2f}×" if fdv and target != "frontdoor" and v else ""
        L.append(f"| {target} | {fmt(v, unit)} | {per} | {allr}{extra} | {ratio} |")
    L.append("")
    # Rounds are interleaved, so a round's targets shared the machine's state of the moment:
    # the ratio within each round is steadier than the ratio of medians. b may be a tuple of
    # targets: each round's best of them (its highest rate, and that target's CPU per unit).
    def paired(a, b):
        bs = b if isinstance(b, tuple) else (b,)
        if a not in t or any(x not in t for x in bs):
            return None
        ys = [max(rs, key=lambda y: y[0]) for rs in zip(*(t[x] for x in bs))]
        ra = [x[0] / y[0] for x, y in zip(t[a], ys) if y[0]]
        ca = [(x[2] / x[3]) / (y[2] / y[3]) for x, y in zip(t[a], ys) if x[3] > 0 and y[3] > 0 and y[2] > 0]
        if not ra:
            return None
        bn = b if isinstance(b, str) else "the better of " + " and ".join(bs)
        unit = "connection" if test == "conn_rate" else "byte"
        s = (f"{a} ÷ {bn}: rate {med(ra):.2f}× (rounds {min(ra):.2f}–{max(ra):.2f}, "
             f"≥ 1 in {sum(r >= 1 for r in ra)} of {len(ra)})")
        if ca:
            s += (f", CPU per {unit} {med(ca):.2f}× (rounds {min(ca):.2f}–{max(ca):.2f}, "
                  f"≤ 1 in {sum(c <= 1 for c in ca)} of {len(ca)})")
        return s
    pairs = ()
    if test == "conn_rate":
        L.append("Paired by round (median of the per-round ratios, and their range). Like for like: "
                 "frontdoor, HAProxy and nginx-hc (`proxy_half_close on`) pass a FIN on and keep the other "
                 "direction; frontdoor-nohc (`half_close: false`) and nginx (its default) end the connection "
                 "at the backend's FIN. nginx is fastest in its default, the second kind; HAProxy's tcp "
                 "mode always passes a FIN on.")
        L.append("")
        pairs = (("frontdoor", "haproxy"), ("frontdoor", "nginx-hc"), ("frontdoor-nohc", "nginx"),
                 ("frontdoor-nohc", "haproxy"), ("frontdoor", "nginx"),
                 ("frontdoor-nohc", ("haproxy", "nginx")), ("frontdoor", ("haproxy", "nginx-hc")),
                 ("fd-b", "frontdoor"), ("fd-b-nohc", "frontdoor-nohc"),
                 ("fd-b", "haproxy"), ("fd-b", "nginx-hc"), ("fd-b-nohc", "nginx"), ("fd-b-nohc", "haproxy"),
                 ("fd-b-nohc", ("haproxy", "nginx")), ("fd-b", ("haproxy", "nginx-hc")))
    elif test.startswith("tcp"):
        L.append("Paired by round (median of the per-round ratios, and their range).")
        L.append("")
        pairs = (("frontdoor", "haproxy"), ("frontdoor", "nginx"),
                 ("fd-b", "frontdoor"), ("fd-b", "haproxy"), ("fd-b", "nginx"))
    lines = [p for p in (paired(a, b) for a, b in pairs) if p]
    if lines:
        if fdb and any(l.startswith("fd-b") for l in lines):
            L.append(f"fd-b is `{fdb}`.")
            L.append("")
        L.extend(f"- {p}" for p in lines)
        L.append("")
    if test.startswith("rudp"):
        kv = lambda r: dict(x.split("=") for x in r[1].split()[1:])
        L.append("Dropped at the proxy (share of the backend's datagrams lost at the full receive "
                 "queues of the proxy's own sockets; the rest of the loss is at the receiving client): "
                 + "; ".join(f"{tg} " + "/".join(f"{float(kv(r)['ploss']):.1f}%" for r in rs)
                             for tg, rs in t.items() if tg != "direct") + ".")
        L.append("")
    if "flood" in test:
        kv = lambda r: dict(x.split("=") for x in r[1].split()[1:])
        L.append("Sent per second: " + "; ".join(f"{tg} " + ", ".join(f"{float(kv(r)['sent'])/1e3:.1f}k" for r in rs)
                                                  for tg, rs in t.items()) + ".")
        L.append("")
    if test.startswith("udp"):
        # What each proxy read from its listening socket and sent on (the client's datagrams
        # minus those dropped because the proxy's receive queue was full), whatever the
        # receiver then managed to take.
        kv = lambda r: dict(x.split("=") for x in r[1].split()[1:])
        L.append("Forwarded by the proxy (datagrams/s it read from its socket and sent on; "
                 "dropped = share of the client's datagrams lost at the proxy's full receive queue):")
        L.append("")
        L.append("| target | forwarded, median | dropped at the proxy | all rounds | frontdoor ÷ target |")
        L.append("|---|---|---|---|---|")
        fwd = {tg: [float(kv(r)["fwd"]) for r in rs] for tg, rs in t.items() if tg != "direct"}
        fdf = med(fwd["frontdoor"]) if "frontdoor" in fwd else None
        for target, rs in t.items():
            if target == "direct":
                continue
            v = med(fwd[target])
            drop = "/".join(f"{float(kv(r)['ploss']):.0f}%" for r in rs)
            allr = ", ".join(f"{x/1e3:.1f}" for x in fwd[target])
            ratio = f"{fdf/v:.2f}×" if fdf and target != "frontdoor" and v else ""
            L.append(f"| {target} | {v/1e3:.1f} kpkt/s | {drop} | {allr} kpkt/s | {ratio} |")
        L.append("")
open(out, "w").write("\n".join(L))
print("\n".join(L))
PY
