# perftest over softrdma, server and client as two processes on this host (sourced by the
# benchmark scripts: channel-benchmark, channel-ring-ab, netty-benchmark, netty-stream-ab,
# transfer-benchmark). The one launcher they share: the server starts on a port nothing listens
# on and counts as started once it listens there itself; when another program takes the port
# first it starts again on another (softrdma/tests/ports.sh: a collision is never a failure);
# then the client runs against it on 127.0.0.1. Both run on softrdma (its libraries first on
# LD_LIBRARY_PATH, -d softrdma0 -x 1).
#
#   perftest_pair LOG TIMEOUT TOOL ARGS...   # e.g. perftest_pair "$logs/bw" 600 ib_write_bw -s 65536 -n 1000
#   perftest_row LOG                         # the client's result row (the line under "#bytes")
#
# The outputs go to LOG.server and LOG.client. perftest_pair returns 0 when both exited 0.
# For callers that watch the processes while they run: perftest_server (sets $port and $spid),
# then perftest_client_bg (sets $cpid) and perftest_wait, or perftest_client (runs and waits).
# $spid and $cpid are the `timeout` processes; the tools are their children.

perftest_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../softrdma/tests/ports.sh
. "$perftest_here/../../softrdma/tests/ports.sh"
perftest_lib=$(cd "$perftest_here/../.." && pwd)/softrdma/target/lib

# perftest_server LOG TIMEOUT TOOL ARGS...: "TOOL -d softrdma0 -x 1 ARGS -p PORT" in the
# background; sets $port and $spid; returns as start_server does (0: it listens).
perftest_server() {
	local log=$1 tmo=$2 tool=$3 rc
	shift 3
	perftest_log=$log perftest_tmo=$tmo
	LD_LIBRARY_PATH=$perftest_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		start_server "$log.server" "$tmo" "" "$tool -d softrdma0 -x 1 $* -p @P@"
	rc=$?
	if [ $rc != 0 ]; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
	return $rc
}

# perftest_client_bg TOOL ARGS...: the client against the last perftest_server, in the
# background; sets $cpid.
perftest_client_bg() {
	local tool=$1
	shift
	LD_LIBRARY_PATH=$perftest_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
		timeout "$perftest_tmo" "$tool" -d softrdma0 -x 1 "$@" -p "$port" 127.0.0.1 >"$perftest_log.client" 2>&1 &
	cpid=$!
}

# perftest_wait: waits for the client and the server (the server killed when the client
# failed: it would wait for a client that is gone); 0 when both exited 0.
perftest_wait() {
	local crc src
	wait "$cpid"
	crc=$?
	[ "$crc" != 0 ] && kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}

# perftest_client TOOL ARGS...: perftest_client_bg, then perftest_wait.
perftest_client() {
	perftest_client_bg "$@"
	perftest_wait
}

# perftest_pair LOG TIMEOUT TOOL ARGS...: the server, then the client; 0 when both exited 0.
perftest_pair() {
	perftest_server "$@" || return 1
	shift 2
	perftest_client "$@"
}

# perftest_row LOG: the client's result row (the first line under its "#bytes" header), or nothing.
perftest_row() {
	awk '/^ *#bytes/ { getline; print; exit }' "$1.client" 2>/dev/null
}
