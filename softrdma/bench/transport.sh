#!/usr/bin/env bash
# softrdma's transport, two builds side by side in one run (docs/performance.md,
# "softrdma transport"): the in-process C benchmark, ib_send_lat, ib_write_bw at 64 KiB
# and scripts/pingpong-demo, each run for build A then build B, ROUNDS times, with the
# load average before and after.
#
#   softrdma/bench/transport.sh A_LIBDIR B_LIBDIR [ROUNDS [all|c|pingpong]]
#
# (c: the C benchmark and perftest only; pingpong: scripts/pingpong-demo only)
# A_LIBDIR/B_LIBDIR hold libibverbs.so.1, and bench/inproc_lat one level up (the same
# binary may serve both: LD_LIBRARY_PATH picks the library; do not build it with
# `make BUILD=<A's dir>` from another tree's sources, which would rebuild A's library). perftest and the built verbs4j
# jar (for pingpong-demo, which then runs with --system over the library chosen by
# LD_LIBRARY_PATH) are needed. Server TCP ports are picked free (tests/ports.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
a=${1:?usage: transport.sh A_LIBDIR B_LIBDIR [ROUNDS]}
b=${2:?usage: transport.sh A_LIBDIR B_LIBDIR [ROUNDS]}
rounds=${3:-3}
what=${4:-all}
. "$here/../tests/ports.sh"
RANDOM=$$
work=$(mktemp -d /tmp/softrdma-transport.XXXXXX)
trap 'rm -rf "$work"' EXIT

perf_pair() { # lib tool args... : prints the client's result line
	local lib=$1 tool=$2
	shift 2
	LD_LIBRARY_PATH=$lib start_server "$work/server" 120 "" "$tool -x 1 $* -p @P@" || { echo "(server failed)"; return; }
	LD_LIBRARY_PATH=$lib timeout 120 "$tool" -x 1 "$@" -p "$port" 127.0.0.1 >"$work/client" 2>&1
	wait "$spid"
	grep -E '^ +[0-9]' "$work/client" | tail -1
}

pingpong() { # lib : prints the client's usec/iter line
	local lib=$1
	pick_port
	LD_LIBRARY_PATH=$lib PINGPONG_DEMO_PORT=$port timeout 300 "$top/scripts/pingpong-demo" --system -g 1 \
		-n 2000 -s 4096 >"$work/pp" 2>&1
	sed -n '/--- client/,$p' "$work/pp" | grep -E 'usec/iter' | tail -1
}

echo "load before: $(uptime)"
for lib in "$a" "$b"; do echo "build $lib: $(md5sum <"$lib/libibverbs.so.1" | cut -c1-12)"; done
for r in $(seq "$rounds"); do
	for lib in "$a" "$b"; do
		tag=$([ "$lib" = "$a" ] && echo A || echo B)
		echo "== round $r, build $tag"
		if [ "$what" != pingpong ]; then
			LD_LIBRARY_PATH=$lib "$lib/../bench/inproc_lat" 200000 9
			echo "ib_send_lat -s 2 -n 5000 (bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%):"
			perf_pair "$lib" ib_send_lat -s 2 -n 5000
			echo "ib_write_bw -s 65536 -n 5000 (bytes iters BW_peak BW_avg MB/s, Mpps):"
			perf_pair "$lib" ib_write_bw -s 65536 -n 5000
		fi
		if [ "$what" != c ]; then
			echo "pingpong-demo --system -g 1 -n 2000 -s 4096, client:"
			pingpong "$lib"
		fi
	done
done
echo "load after: $(uptime)"
