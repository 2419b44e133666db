#!/usr/bin/env bash
# How many threads a stock ibv_rc_pingpong pair keeps busy: per-thread CPU time of both
# processes over a window in the middle of the run, for one or more builds in turn, ROUNDS
# times, with the load average. A thread at 50 % of a CPU or more counts as busy.
#
#   softrdma/bench/pingpong-threads.sh [-s SIZE] [-n ITERS] [-r ROUNDS] [-w SECS] LIBDIR...
#
# LIBDIR holds a softrdma libibverbs.so.1. ITERS should keep the pair running past
# 1 + SECS seconds (the window starts a second after the client). SOFTRDMA_STATS=1 in the
# environment adds the agent's counters (handover takes, holds, bounded waits).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/ports.sh"
size=64 iters=200000 rounds=1 win=3
while getopts s:n:r:w: o; do
	case $o in
	s) size=$OPTARG ;; n) iters=$OPTARG ;; r) rounds=$OPTARG ;; w) win=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-s SIZE] [-n ITERS] [-r ROUNDS] [-w SECS] LIBDIR..." >&2; exit 2; }
command -v ibv_rc_pingpong >/dev/null || { echo "ibv_rc_pingpong not installed" >&2; exit 1; }
RANDOM=$$
work=$(mktemp -d /tmp/softrdma-threads.XXXXXX)
trap 'rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)

ticks() { # pids...: "pid/tid utime+stime" per thread
	local p t
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			awk -v id="$p/${t##*/}" '{ print id, $14 + $15 }' "$t/stat" 2>/dev/null
		done
	done | sort
}

one() { # lib
	local lib=$1 spid cpid
	LD_LIBRARY_PATH=$lib start_server "$work/server" 120 "" \
		"ibv_rc_pingpong -g 1 -s $size -n $iters -p @P@" || { echo "(server failed)"; return; }
	LD_LIBRARY_PATH=$lib timeout 120 ibv_rc_pingpong -g 1 -s "$size" -n "$iters" -p "$port" 127.0.0.1 \
		>"$work/client" 2>&1 &
	cpid=$!
	sleep 1
	# the tools themselves, not the timeout processes that started them
	local tools
	tools=$(pgrep -P "$spid"; pgrep -P "$cpid")
	ticks $tools >"$work/a"
	sleep "$win"
	ticks $tools >"$work/b"
	echo "  load $(cut -d' ' -f1-3 /proc/loadavg)"
	join "$work/a" "$work/b" | awk -v hz="$hz" -v w="$win" '
		{ pct = 100 * ($3 - $2) / hz / w; printf "  thread %s %3.0f%%\n", $1, pct; if (pct >= 50) busy++ }
		END { printf "  busy threads: %d\n", busy }'
	wait "$cpid"
	wait "$spid"
	grep -h "iters in\|softrdma\[" "$work/server" "$work/client" | sed 's/^/  /'
}

for r in $(seq "$rounds"); do
	for lib in "$@"; do
		echo "round $r: $lib (ibv_rc_pingpong -s $size -n $iters)"
		one "$lib"
	done
done
