# Port handling shared by the stock-tool scripts (sourced). No test may depend on
# a fixed port being free: a server starts on a port nobody listens on, counts
# as started only once it listens there itself (not merely "something listens
# on that port"), and when another program takes the port first the server is
# started again elsewhere. A collision is never the tool's failure.

# pick_port: sets $port to a random port below the ephemeral range (32768+),
# not perftest's default 18515, that nothing listens on now.
pick_port() {
	local p
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 20000))
		[ "$p" = 18515 ] && continue
		port_taken "$p" && continue
		port=$p
		return 0
	done
	port=$p
}

# port_taken PORT: something listens on TCP PORT (IPv4 or IPv6; from /proc/net/tcp[6]
# where ss is missing, as on a machine with nothing but Linux and python3).
port_taken() {
	if command -v ss >/dev/null; then
		ss -ltnH "sport = :$1" 2>/dev/null | grep -q .
	else
		awk -v p="$(printf ':%04X' "$1")" 'FNR > 1 && substr($2, length($2) - 4) == p && $4 == "0A" { found = 1 }
			END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
	fi
}

# owned_listener PORT PID: PID, or a process it started (the tool under
# timeout), listens on TCP PORT.
owned_listener() {
	local port=$1 top=$2 p
	for p in $(ss -ltnpH "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2); do
		while [ -n "$p" ] && [ "$p" -gt 1 ]; do
			[ "$p" = "$top" ] && return 0
			p=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)
		done
	done
	return 1
}

# await_server PORT PID LOG: 0 once PID listens on PORT; 2 when the port was
# taken by another program (the server failed to bind, or something else
# holds it); 1 when the server failed on its own or never listened.
await_server() {
	local port=$1 pid=$2 log=$3
	if ! command -v ss >/dev/null; then # no owner to see: PORT listening while PID lives
		for _ in $(seq 400); do
			kill -0 "$pid" 2>/dev/null || break
			port_taken "$port" && return 0
			sleep 0.05
		done
		grep -qiE 'address already in use|EADDRINUSE' "$log" && return 2
		return 1
	fi
	for _ in $(seq 400); do
		owned_listener "$port" "$pid" && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			if grep -qiE 'address already in use|EADDRINUSE' "$log" || port_taken "$port"; then
				return 2
			fi
			return 1
		fi
		sleep 0.05
	done
	port_taken "$port" && return 2
	return 1
}

# start_server LOG TIMEOUT FIXED-PORT CMD: runs "timeout TIMEOUT CMD" in the
# background with every @P@ in CMD replaced by the port (FIXED-PORT, or a
# free one when empty); sets $port and $spid. Returns as await_server does,
# after up to 5 ports (or 5 tries of the fixed one) lost to collisions.
start_server() {
	local log=$1 tmo=$2 fixed=$3 cmd=$4 rc
	for _ in 1 2 3 4 5; do
		if [ -n "$fixed" ]; then port=$fixed; else pick_port; fi
		timeout "$tmo" ${cmd//@P@/$port} >"$log" 2>&1 &
		spid=$!
		await_server "$port" "$spid" "$log"
		rc=$?
		[ $rc != 2 ] && return $rc
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		[ -n "$fixed" ] && sleep 1
	done
	return 2
}
