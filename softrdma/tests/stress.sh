#!/usr/bin/env bash
# Stock ibv_rc_pingpong pairs over softrdma while other processes burn both cores, and the
# same with forged packets: a NAK, an ACK and a stray READ response, each sent every second
# from a local process towards both QPs of the pair (over UDP from the peer's port on another
# loopback address, and written into the same-host ring), at a PSN far outside the window.
# A pair must live through its whole run (it is stopped by timeout, never by an error) and
# its receive checks (-c) must find no wrong byte.
#
# SOFTRDMA_LIB: directory holding libibverbs.so.1; FORGE: the forge tool (tests/tools/forge.c).
# STRESS_PAIRS (default 2) pairs in a row for each of the two forms, STRESS_SECS (default 15)
# seconds each, STRESS_BURNERS (default 2) busy loops beside them. The full form of issue 28:
#   STRESS_PAIRS=10 STRESS_SECS=60 make -C softrdma stress
# The pairs' same-host rings live in a SOFTRDMA_SHM_DIR of the run's own (removed at exit).
# Prints one line per pair and "N passed, N failed"; exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRDMA_LIB:-$here/../target/lib}
forge=${FORGE:-$lib/../forge}
pairs=${STRESS_PAIRS:-2}
secs=${STRESS_SECS:-15}
burners=${STRESS_BURNERS:-2}
for f in "$lib/libibverbs.so.1" "$forge"; do
	[ -e "$f" ] || { echo "stress: $f not built" >&2; exit 1; }
done
command -v ibv_rc_pingpong >/dev/null || { echo "FAIL stress: needs ibv_rc_pingpong"; exit 1; }
export LD_LIBRARY_PATH=$lib
. "$here/ports.sh"
logdir=$(mktemp -d /tmp/softrdma-stress.XXXXXX)
# the pairs' rings (and forge -r's way into them) in a directory of their own, removed at exit:
# no other softrdma process of this user sweeps or reaches them
shmdir=$(mktemp -d /dev/shm/softrdma-check.XXXXXX) || { echo "FAIL stress: needs a directory of its own in /dev/shm"; exit 1; }
trap 'rm -rf "$shmdir"' EXIT
export SOFTRDMA_SHM_DIR=$shmdir
pass=0
fail=0
RANDOM=$$

# qpn_psn LOG: "QPN PSN" of the local address line ibv_rc_pingpong printed
qpn_psn() {
	sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\), PSN \(0x[0-9a-f]*\).*/\1 \2/p' "$1" | head -n1
}

# forge_loop SQPN SPSN CQPN CPSN: every second, each kind at each QP, by datagram and by ring
forge_loop() {
	local sq=$1 sp=$2 cq=$3 cp=$4 k
	# half the PSN space away from each requester's start: outside its window for the whole run
	local far_s=$(((sp + 0x800000) & 0xffffff)) far_c=$(((cp + 0x800000) & 0xffffff))
	while :; do
		for k in nak ack read; do
			"$forge" -k $k -p $far_s "$sq" "$cq"
			"$forge" -k $k -p $far_c "$cq" "$sq"
			"$forge" -r -k $k -p $far_s "$sq" "$cq"
			"$forge" -r -k $k -p $far_c "$cq" "$sq"
		done
		sleep 1
	done
}

run_pair() { # name forged(0/1)
	local name=$1 forged=$2 log=$logdir/$1 spid cpid src crc fpid= burn=() b s c
	for ((b = 0; b < burners; b++)); do
		timeout $((secs + 10)) sh -c 'while :; do :; done' &
		burn+=($!)
	done
	start_server "$log.server" $((secs + 30)) "" "stdbuf -oL ibv_rc_pingpong -g 1 -s 64 -n 1000000000 -c -p @P@"
	case $? in
	2) echo "SKIP $name (every port tried was taken)"; kill "${burn[@]}" 2>/dev/null; wait; return ;;
	1) echo "FAIL $name (the server never listened; $log.server)"; fail=$((fail + 1))
	   kill "$spid" "${burn[@]}" 2>/dev/null; wait; return ;;
	esac
	timeout $((secs + 30)) stdbuf -oL ibv_rc_pingpong -g 1 -s 64 -n 1000000000 -c -p "$port" 127.0.0.1 >"$log.client" 2>&1 &
	cpid=$!
	local t_end=$((SECONDS + secs))
	if [ "$forged" = 1 ]; then
		for _ in $(seq 50); do
			s=$(qpn_psn "$log.server"); c=$(qpn_psn "$log.client")
			[ -n "$s" ] && [ -n "$c" ] && break
			sleep 0.1
		done
		if [ -n "$s" ] && [ -n "$c" ]; then
			forge_loop $s $c >"$log.forge" 2>&1 &
			fpid=$!
		else
			echo "no QPNs in $log.server / $log.client" >"$log.forge"
		fi
	fi
	while [ $SECONDS -lt $t_end ] && kill -0 "$(pgrep -P "$spid")" "$(pgrep -P "$cpid")" 2>/dev/null; do
		sleep 1
	done
	# both ends stopped together (SIGSTOP) before either is judged: a peer that ends first
	# would fail the other's QP (its process is gone), which is no death under load
	local sp cp alive=0
	sp=$(pgrep -P "$spid"); cp=$(pgrep -P "$cpid")
	[ -n "$sp" ] && [ -n "$cp" ] && kill -STOP "$sp" "$cp" 2>/dev/null && alive=1
	[ -n "$fpid" ] && { kill "$fpid"; wait "$fpid" 2>/dev/null; }
	kill -KILL $sp $cp 2>/dev/null
	wait "$cpid" 2>/dev/null; crc=$?
	wait "$spid" 2>/dev/null; src=$?
	kill "${burn[@]}" 2>/dev/null
	wait "${burn[@]}" 2>/dev/null
	local why=
	[ $alive = 1 ] || why="died before the end (client exit $crc, server exit $src)"
	grep -q "invalid data" "$log.server" "$log.client" && why="$why wrong bytes"
	grep -q "iters in" "$log.client" && why="$why finished early"
	[ "$forged" = 1 ] && [ -z "$fpid" ] && why="$why no forging"
	if [ -z "$why" ]; then
		echo "PASS $name (load $(cut -d' ' -f1 /proc/loadavg))"
		pass=$((pass + 1))
	else
		echo "FAIL $name:$why (load $(cut -d' ' -f1 /proc/loadavg); $log.*)"
		fail=$((fail + 1))
	fi
}

for ((i = 1; i <= pairs; i++)); do run_pair "busy-$i" 0; done
for ((i = 1; i <= pairs; i++)); do run_pair "forged-$i" 1; done
echo "stress: $pass passed, $fail failed (${secs}s per pair, $burners busy loops)"
[ $fail = 0 ]
