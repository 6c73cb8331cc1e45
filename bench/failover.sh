#!/usr/bin/env bash
# Health prober benchmark: detection time of frontdoor's health package against HAProxy 2.6
# with the same interval/timeout/fall/rise on the same loopback listeners, in the same run,
# and the CPU cost of probing 1,000 targets × 3 ports at a 1 s interval, with the targets in
# two placements: on loopback, and behind a veth pair in a network namespace.
#
#   [DETECT=0] bench/failover.sh [runs-per-scenario] [cpu-seconds]
#
# Writes bench/results/failover.md. Needs root for apt-get (HAProxy is installed if missing) and
# for the network namespace. DETECT=0 skips the detection part (default: run it).
# Detection: everything listens on 127.0.0.1; the prober/backends run on CPU 0, HAProxy on CPU 1.
# CPU, loopback: the probed services on both CPUs (one CPU could not answer 1,000 TLS handshakes
# a second on loopback here), the prober on CPU 0.
# CPU, veth: the script creates the namespace fdbench-<pid> and a veth pair, 10.201.0.1/24 in
# the root namespace and 10.201.0.2/24 inside (it stops if 10.201.0.0/24 is already in use),
# steers each side's receive processing with RPS to its own CPU (root side CPU 0, namespace
# side CPU 1), runs the services inside on CPU 1 and the prober in the root namespace on CPU 0.
# Every process started here is stopped by its PID; the namespace and the veth pair are deleted
# on exit, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
CPUSECS=${2:-30}
DETECT=${DETECT:-1}
OUT=bench/results/failover.md
NS=fdbench-$$
VETH_ROOT=fdb$$r # in the root namespace, 10.201.0.1
VETH_NS=fdb$$n   # in $NS, 10.201.0.2
ROOT_ADDR=10.201.0.1
NS_ADDR=10.201.0.2

if ! command -v haproxy >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy
fi
BIN=$(mktemp -d)
SERVE_PID=
NS_MADE=
VETH_MADE=
cleanup() {
	if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
	if [ -n "$VETH_MADE" ]; then ip link del "$VETH_ROOT" 2>/dev/null || true; fi
	if [ -n "$NS_MADE" ]; then ip netns del "$NS" 2>/dev/null || true; fi
	rm -rf "$BIN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
go build -o "$BIN/failover" ./bench/failover

{
	echo "# Health prober: failover detection and CPU cost"
	echo
	echo "Produced by \`bench/failover.sh $RUNS $CPUSECS\` on $(date -u +%Y-%m-%d) ($(nproc) CPUs shared with other work; load average at start: $(cut -d' ' -f1-3 /proc/loadavg));"
	echo "$(haproxy -v | head -1 | cut -d' ' -f1-3), $(go version | cut -d' ' -f3)."
	echo
	echo "## Detection: frontdoor vs HAProxy, same listeners, same run"
	echo
	echo "Each run injects the failure at a random phase of both probers' schedules. Verdict ="
	echo "time from the failure to the DOWN decision (frontdoor: the Event; HAProxy: its \"Server ... is DOWN\""
	echo "log line, timestamped on arrival at a local syslog socket). \"New conns avoid it\" = a client opens"
	echo "a new connection every 10 ms through each forwarding peer; the time from the failure to the start"
	echo "of the first connection from which on every new connection was served by the spare server."
	echo "HAProxy: victim + backup server, retries 0, so only its health verdict moves traffic. frontdoor:"
	echo "its proxy package, pool of victim (weight 1000) + spare (weight 1), health via Checker.Eligible;"
	echo "the proxy always retries another backend after a failed connect (retries cannot be 0), so when"
	echo "connects fail (kill, port closed, blackhole after the 250 ms connect timeout) new connections reach"
	echo "the spare before the verdict; the hung-TLS row, where connects succeed, shows the verdict path alone."
	echo
	echo "Command: \`taskset -c 0 failover -runs $RUNS detect\` (HAProxy pinned to CPU 1)."
	echo
	if [ "$DETECT" != 0 ]; then
		taskset -c 0 "$BIN/failover" -runs "$RUNS" -haproxy-cpu 1 detect 2>"$BIN/detect.log"
	else
		echo "Not run (DETECT=0)."
	fi
	echo
	echo "## CPU cost: 1,000 targets, 1 s interval"
	echo
	echo "The probed services (a TLS, a TCP and a UDP echo port per target) run in a separate process;"
	echo "the prober runs alone on CPU 0 and reports its own CPU time (getrusage) over ${CPUSECS}s after a"
	echo "warm-up; HAProxy's is read from /proc/<pid>/stat. The runs use a 900 ms probe timeout: with the"
	echo "default 250 ms, CPU starvation of this shared host (see the load average) turns into probe"
	echo "timeouts that say nothing about the targets; the last frontdoor row of each placement shows that"
	echo "run with 250 ms. The same rows are measured with the targets in two placements:"
	echo
	echo "- **Loopback** (127.0.0.1, services on both CPUs): the receiving side of every packet is"
	echo "  processed in the sender's context, so the targets' kernel work (their half of each TCP"
	echo "  handshake and reset, the UDP echo's receive) is charged to the prober, and each connect()"
	echo "  wakes a target thread that may preempt the prober on its CPU. This overstates the prober's cost."
	echo "- **veth + netns** (${NS_ADDR} behind a veth pair in a network namespace the script creates, services"
	echo "  on CPU 1 only): RPS on each end of the pair (rps_cpus: CPU 1 inside the namespace, CPU 0 in the"
	echo "  root namespace) makes each side's received packets be processed on its own CPU, as with a"
	echo "  remote target: the targets' kernel work runs on CPU 1 and is not the prober's. What the prober"
	echo "  is charged for is its own stack, both ways, plus the hand-offs between the CPUs: an"
	echo "  inter-processor interrupt (IPI) to CPU 1 for a packet it sends when CPU 1's backlog is idle, and"
	echo "  the IPI from CPU 1 that brings a reply, when it lands while the prober runs. On a paravirtualised"
	echo "  host each IPI traps to the hypervisor; a real NIC puts its own transmit and interrupt costs in"
	echo "  their place, usually batched."
	echo
	echo "### Loopback"
	echo
	echo "| targets × checks | interval / timeout | probes/s | failed probes | CPU of one core | CPU µs per probe | targets not up at the end |"
	echo "|---|---|---|---|---|---|---|"
} >"$OUT"
cpu_rows() { # address ports-file log: the frontdoor and HAProxy rows for one placement
	local addr=$1 ports=$2 log=$3 kinds
	for kinds in tls,tcp,udp tcp,udp tcp udp tls; do
		taskset -c 0 "$BIN/failover" -addr "$addr" -ports "$ports" -interval 1s -timeout 900ms -duration "${CPUSECS}s" -kinds "$kinds" cpu 2>>"$log" >>"$OUT"
	done
	taskset -c 0 "$BIN/failover" -addr "$addr" -ports "$ports" -interval 1s -timeout 250ms -duration "${CPUSECS}s" -kinds tls,tcp,udp cpu 2>>"$log" >>"$OUT"
	for kinds in tcp tls; do
		taskset -c 0 "$BIN/failover" -addr "$addr" -ports "$ports" -interval 1s -duration "${CPUSECS}s" -kinds "$kinds" -haproxy-cpu 0 hapcpu >>"$OUT"
	done
}
wait_ports() { # file: wait up to 10s for serve to write it
	for _ in $(seq 100); do [ -f "$1" ] && return 0; sleep 0.1; done
	echo "failover serve did not write $1" >&2
	return 1
}

taskset -c 0,1 "$BIN/failover" -n 1000 -ports "$BIN/ports" serve &
SERVE_PID=$!
wait_ports "$BIN/ports"
"$BIN/failover" -ports "$BIN/ports" reach >/dev/null
cpu_rows 127.0.0.1 "$BIN/ports" "$BIN/cpu-loopback.log"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=

# The veth placement. Stop rather than touch addresses someone else uses.
if [ -n "$(ip -o addr show to 10.201.0.0/24)" ] || [ -n "$(ip route show to match "$NS_ADDR" | grep -v '^default')" ]; then
	echo "10.201.0.0/24 is already in use here; not creating the veth pair" >&2
	exit 1
fi
ip netns add "$NS"
NS_MADE=1
ip link add "$VETH_ROOT" type veth peer name "$VETH_NS" netns "$NS"
VETH_MADE=1
ip addr add "$ROOT_ADDR/24" dev "$VETH_ROOT"
ip link set "$VETH_ROOT" up
ip -n "$NS" addr add "$NS_ADDR/24" dev "$VETH_NS"
ip -n "$NS" link set lo up
ip -n "$NS" link set "$VETH_NS" up
echo 1 >"/sys/class/net/$VETH_ROOT/queues/rx-0/rps_cpus"
# ip netns exec mounts the namespace's own /sys.
ip netns exec "$NS" sh -c "echo 2 >/sys/class/net/$VETH_NS/queues/rx-0/rps_cpus"
ip route get "$NS_ADDR" | grep -q "dev $VETH_ROOT " || { echo "$NS_ADDR is not routed through $VETH_ROOT" >&2; exit 1; }
# ip netns exec and taskset exec in place: the PID is failover's.
ip netns exec "$NS" taskset -c 1 "$BIN/failover" -n 1000 -addr "$NS_ADDR" -ports "$BIN/ports-veth" serve &
SERVE_PID=$!
wait_ports "$BIN/ports-veth"
# Both ends answer: a TCP connect, a TLS handshake and a UDP echo from the root namespace.
"$BIN/failover" -addr "$NS_ADDR" -ports "$BIN/ports-veth" reach >/dev/null
{
	echo
	echo "### veth + netns, RPS"
	echo
	echo "| targets × checks | interval / timeout | probes/s | failed probes | CPU of one core | CPU µs per probe | targets not up at the end |"
	echo "|---|---|---|---|---|---|---|"
} >>"$OUT"
cpu_rows "$NS_ADDR" "$BIN/ports-veth" "$BIN/cpu-veth.log"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=
ip link del "$VETH_ROOT"; VETH_MADE=
ip netns del "$NS"; NS_MADE=
{
	echo
	echo "Failed-probe reasons (cpu runs), loopback:"
	echo
	echo '```'
	grep -v "operation was canceled" "$BIN/cpu-loopback.log" || echo "none"
	echo '```'
	echo
	echo "veth + netns:"
	echo
	echo '```'
	grep -v "operation was canceled" "$BIN/cpu-veth.log" || echo "none"
	echo '```'
	echo
	echo "## Not measured here"
	echo
	echo "- The node wiring (cmd/node) of health into proxy and gslb: here the bench wires Checker.Eligible"
	echo "  into proxy.Options.Health by hand; passive reports (proxy.Options.Passive -> ReportFailure) are"
	echo "  left off so that the verdict columns compare probing alone."
	echo "- The time a client spends on its first failed attempt (a connect timeout) is not in these numbers."
	echo "- HAProxy with one backend per port tied together by \"track\" (which would see the one-port"
	echo "  failure); the configuration measured is the seed's: one check on 443 for the whole server."
	if [ "$DETECT" != 0 ]; then
		echo
		echo "Per-run detection log:"
		echo
		echo '```'
		cat "$BIN/detect.log"
		echo '```'
	fi
} >>"$OUT"
echo "wrote $OUT"
