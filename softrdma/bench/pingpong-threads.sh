#!/usr/bin/env bash
# How many threads a stock ibv_rc_pingpong pair keeps busy: per-thread CPU time of both
# processes over a window in the middle of the run (the thread's name says which is the
# application's and which softrdma's agent), for one or more variants in turn, ROUNDS times,
# with the load average, and the agent's counters (SOFTRDMA_STATS) per second of the run.
# A thread at 50 % of a CPU or more counts as busy.
#
#   softrdma/bench/pingpong-threads.sh [-s SIZE] [-n ITERS] [-r ROUNDS] [-w SECS] [-e] VARIANT...
#
# VARIANT is LIBDIR, a directory holding a softrdma libibverbs.so.1, optionally followed by
# environment settings for both processes: LIBDIR,SOFTRDMA_HANDOVER=0. ITERS should keep the
# pair running past 1 + SECS seconds (the window starts a second after the client). -e runs
# the pair with completion events (ibv_rc_pingpong -e: no thread polls an empty CQ).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../tests/ports.sh"
size=64 iters=200000 rounds=1 win=3 ev=
while getopts s:n:r:w:e o; do
	case $o in
	s) size=$OPTARG ;; n) iters=$OPTARG ;; r) rounds=$OPTARG ;; w) win=$OPTARG ;; e) ev=-e ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-s SIZE] [-n ITERS] [-r ROUNDS] [-w SECS] [-e] LIBDIR[,VAR=VAL...]..." >&2; exit 2; }
command -v ibv_rc_pingpong >/dev/null || { echo "ibv_rc_pingpong not installed" >&2; exit 1; }
RANDOM=$$
work=$(mktemp -d /tmp/softrdma-threads.XXXXXX)
trap 'rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)

ticks() { # pids...: "pid/tid:name utime+stime" per thread
	local p t
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			awk -v id="$p/${t##*/}:$(cat "$t/comm" 2>/dev/null)" \
				'{ sub(/^.*\) /, ""); print id, $12 + $13 }' "$t/stat" 2>/dev/null
		done
	done | sort
}

one() { # lib [VAR=VAL...]
	local lib=$1 spid cpid
	shift
	local -x SOFTRDMA_STATS=1 kv
	for kv in "$@"; do local -x "$kv"; done # the variant's settings, for both processes
	LD_LIBRARY_PATH=$lib start_server "$work/server" 120 "" \
		"ibv_rc_pingpong -g 1 $ev -s $size -n $iters -p @P@" || { echo "(server failed)"; return; }
	LD_LIBRARY_PATH=$lib timeout 120 ibv_rc_pingpong -g 1 $ev -s "$size" -n "$iters" -p "$port" 127.0.0.1 \
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
	# the counters per second of the run: the agent's wake-ups while it had handed the rings
	# over, its takes, holds, and the doorbells senders rang
	cat "$work/server" "$work/client" | awk '
		/iters in/ { secs = $4; print "  " $0 }
		/softrdma\[/ { line[++k] = $0 }
		END {
			for (i = 1; i <= k; i++) {
				n = split(line[i], f, " ")
				for (j = 2; j < n; j++) v[f[j]] = f[j + 1]
				printf "  %s\n", line[i]
				if (secs > 0)
					printf "  %s per second: agent_handed_waits %.0f agent_takeback %.0f agent_hold %.0f doorbells %.0f\n",
						f[1], v["agent_handed_waits"] / secs, v["agent_takeback"] / secs,
						v["agent_hold"] / secs, v["doorbells"] / secs
			}
		}'
}

for r in $(seq "$rounds"); do
	for variant in "$@"; do
		IFS=, read -r -a parts <<<"$variant"
		echo "round $r: $variant (ibv_rc_pingpong $ev -s $size -n $iters)"
		one "${parts[@]}"
	done
done
