# bench/lib.sh — what the proxy benchmarks (proxy.sh, proxy-ab.sh) share; source it from the
# repository's top directory.

# install_missing CHECK=PACKAGE... — installs with apt-get each PACKAGE whose CHECK, a command
# or (starting with /) a file, is missing.
install_missing() {
	local need=() c
	for c in "$@"; do
		if [[ ${c%%=*} == /* ]]; then
			[ -e "${c%%=*}" ] || need+=("${c#*=}")
		else
			command -v "${c%%=*}" >/dev/null || need+=("${c#*=}")
		fi
	done
	if [ ${#need[@]} -gt 0 ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	fi
}

# WORK is a directory removed at exit, with every process start() ran.
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# start NAME CPU CMD... — runs CMD pinned to CPU in the background; its PID goes to $WORK/NAME.pid.
start() {
	local name=$1 cpu=$2
	shift 2
	taskset -c "$cpu" "$@" >"$WORK/$name.log" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	echo "$pid" >"$WORK/$name.pid"
}
pidof_() { cat "$WORK/$1.pid"; }
# cpu_ticks PID — user+system clock ticks of a process.
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)
wait_port() { # wait_port PORT — until something accepts TCP on 127.0.0.1:PORT (bounded).
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "port $1 never opened" >&2
	exit 1
}

# start_origin CPU — the loopback HTTP origin of the short-connection tests on
# 127.0.0.1:18080: nginx answering "ok" and closing each connection.
start_origin() {
	cat >"$WORK/origin.conf" <<CONF
worker_processes 1;
pid $WORK/origin.pid.nginx;
error_log $WORK/origin.err;
events { worker_connections 4096; }
http {
    access_log off;
    server { listen 127.0.0.1:18080 reuseport; keepalive_timeout 0; location / { return 200 "ok\n"; } }
}
CONF
	start origin "$1" nginx -c "$WORK/origin.conf" -g 'daemon off; master_process off;'
}

# start_tls_haproxy PLAIN_PORT PLAIN_BACKEND TLS_PORT TLS_BACKEND — HAProxy (nbthread 1, on
# RELAY_CPU) terminating TLS 1.3 (TLS_AES_128_GCM_SHA256, as Go picks with AES-NI) with the
# site's relay certificate on 127.0.0.1:PLAIN_PORT, to the plain backend PLAIN_BACKEND, and on
# 127.0.0.1:TLS_PORT, re-encrypting to TLS_BACKEND with the relay certificate as its client
# certificate: the peer of frontdoor's gateway. Needs SITE (ca.pem, relay.pem); waits for
# both ports.
start_tls_haproxy() {
	cat >"$WORK/haproxy.cfg" <<CFG
global
    nbthread 1
    maxconn 1000
    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256
    ssl-default-bind-options ssl-min-ver TLSv1.3
    ssl-default-server-ciphersuites TLS_AES_128_GCM_SHA256
    ssl-default-server-options ssl-min-ver TLSv1.3
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
listen tls-to-plain
    bind 127.0.0.1:$1 ssl crt $SITE/relay.pem
    server s $2
listen tls-to-tls
    bind 127.0.0.1:$3 ssl crt $SITE/relay.pem
    server s $4 ssl verify required ca-file $SITE/ca.pem crt $SITE/relay.pem
CFG
	start haproxy "$RELAY_CPU" haproxy -db -f "$WORK/haproxy.cfg"
	wait_port "$1"
	wait_port "$3"
}
