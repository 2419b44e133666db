#!/usr/bin/env bash
# Runs unmodified Debian rdma_cm tools (rdma-core's rping, ucmatose, udaddy,
# rdma_server/rdma_client and perftest's -R mode) on softrdma's
# libibverbs.so.1 + librdmacm.so.1, server and client as separate processes
# on 127.0.0.1. Prints one line per tool, then "N passed, N failed"; exits
# non-zero when anything failed or a tool is missing.
#
#   SOFTRDMA_LIB=<dir with both libraries>  (default: softrdma/target/lib)
set -u

here=$(cd "$(dirname "$0")" && pwd)
LIB=${SOFTRDMA_LIB:-$here/../../target/lib}
LIB=$(cd "$LIB" 2>/dev/null && pwd) || { echo "FAIL no library directory ${SOFTRDMA_LIB:-}"; echo "0 passed, 1 failed"; exit 1; }
for f in libibverbs.so.1 librdmacm.so.1; do
	if [ ! -f "$LIB/$f" ]; then
		echo "FAIL $LIB/$f is missing (build softrdma first)"
		echo "0 passed, 1 failed"
		exit 1
	fi
done
export LD_LIBRARY_PATH=$LIB

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
. "$here/../../tests/ports.sh"
RANDOM=$$
TMO=${STOCK_CM_TIMEOUT:-90}

# pair NAME "SERVER CMD" "CLIENT CMD" [check function] [fixed port]
# @P@ in the commands is the port: a free one, or the fixed one the tool insists on.
pair() {
	local name=$1 scmd=$2 ccmd=$3 check=${4:-} fixed=${5:-}
	local s="$tmp/$name.server" c="$tmp/$name.client" spid port src=0 crc=0 why=""

	for tool in ${scmd%% *} ${ccmd%% *}; do
		if ! command -v "$tool" >/dev/null; then
			echo "FAIL $name: $tool not installed"
			failed=$((failed + 1))
			return
		fi
	done
	start_server "$s" "$TMO" "$fixed" "$scmd"
	case $? in
	2)
		# another program holds the port: not the tool's failure
		echo "SKIP $name: port ${fixed:-collisions on 5 ports} taken by another program"
		return
		;;
	1)
		why="server never listened on port $port"
		kill "$spid" 2>/dev/null
		;;
	esac
	if [ -z "$why" ]; then
		timeout "$TMO" ${ccmd//@P@/$port} >"$c" 2>&1 || crc=$?
	fi
	wait "$spid" || src=$?
	if [ -z "$why" ] && [ "$src" != 0 -o "$crc" != 0 ]; then
		why="server exit $src, client exit $crc"
	fi
	if [ -z "$why" ] && [ -n "$check" ]; then
		why=$($check "$s" "$c")
	fi
	if [ -z "$why" ]; then
		echo "PASS $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name: $why"
		for f in "$s" "$c"; do
			[ -f "$f" ] && sed 's/^/    | /' "$f" | tail -15
		done
		failed=$((failed + 1))
	fi
}

# rping -V verifies every buffer itself; -v prints each ping so we can count them.
rping_check() {
	local n=$1 s=$2 c=$3 got
	got=$(grep -c '^ping data: rdma-ping-' "$c")
	[ "$got" = "$n" ] || { echo "client printed $got of $n pings"; return; }
	got=$(grep -c '^server ping data: rdma-ping-' "$s")
	[ "$got" = "$n" ] || { echo "server printed $got of $n pings"; return; }
	grep -q 'data mismatch' "$s" "$c" && echo "rping reported a data mismatch"
}
rping10() { rping_check 10 "$@"; }
rping5() { rping_check 5 "$@"; }

perftest_check() {
	local s=$1 c=$2 f
	for f in "$s" "$c"; do
		grep -Eq '^ *2 +1000 ' "$f" || { echo "no result line in $(basename "$f")"; return; }
	done
}

# read and atomic tests report on the requester (client) side only
perftest_client_check() {
	grep -Eq '^ *2 +1000 ' "$2" || echo "no result line in the client output"
}

# bandwidth tests: a result row (bytes, iterations, numbers) from the client
perftest_bw_check() {
	grep -Eq '^ *65536 +[0-9]+ +[0-9.]+ +[0-9.]+' "$2" || echo "no bandwidth result in the client output"
}

complete_check() {
	grep -q 'return status 0' "$1" && grep -q 'return status 0' "$2" || echo "tool did not report status 0"
}

endpoint_check() {
	grep -q 'rdma_server: end 0' "$1" && grep -q 'rdma_client: end 0' "$2" || echo "endpoint tools did not end 0"
}

pair rping-V-10-iterations "rping -s -a 127.0.0.1 -p @P@ -v -V -C 10" \
	"rping -c -a 127.0.0.1 -p @P@ -v -V -C 10" rping10
pair rping-self-managed-qp "rping -s -q -a 127.0.0.1 -p @P@ -v -V -C 5" \
	"rping -c -q -a 127.0.0.1 -p @P@ -v -V -C 5" rping5
pair ib_send_lat-R "ib_send_lat -R -x 1 -p @P@" "ib_send_lat -R -x 1 -p @P@ 127.0.0.1" perftest_check
pair ib_write_lat-R "ib_write_lat -R -x 1 -p @P@" "ib_write_lat -R -x 1 -p @P@ 127.0.0.1" perftest_check
pair ib_read_lat-R "ib_read_lat -R -x 1 -p @P@" "ib_read_lat -R -x 1 -p @P@ 127.0.0.1" perftest_client_check
pair ib_send_lat-R-UD "ib_send_lat -R -x 1 -c UD -p @P@" "ib_send_lat -R -x 1 -c UD -p @P@ 127.0.0.1" \
	perftest_check
pair ib_send_lat-R-events "ib_send_lat -R -x 1 -e -p @P@" "ib_send_lat -R -x 1 -e -p @P@ 127.0.0.1" perftest_check
pair ib_write_bw-R-4-qps "ib_write_bw -R -x 1 -q 4 -p @P@" "ib_write_bw -R -x 1 -q 4 -p @P@ 127.0.0.1" \
	perftest_bw_check
pair ucmatose-4-connections "ucmatose -b 127.0.0.1 -p @P@ -c 4 -C 10" \
	"ucmatose -s 127.0.0.1 -p @P@ -c 4 -C 10" complete_check
# udaddy has no port option: it always uses 7174 (its -p is the port space)
pair udaddy-ud-2-connections "udaddy -b 127.0.0.1 -c 2 -C 10" "udaddy -s 127.0.0.1 -c 2 -C 10" complete_check 7174
pair rdma_server-rdma_client "rdma_server -p @P@" "rdma_client -s 127.0.0.1 -p @P@" endpoint_check

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
