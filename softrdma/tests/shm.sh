#!/usr/bin/env bash
# The same-host carrier (src/shm.c) with stock ibv_rc_pingpong between two processes:
# which carrier the packets took (SOFTRDMA_STATS counters), the ring files (mode 0600,
# removed at exit; a killed process's file removed by the next process), the UDP
# path kept with SOFTRDMA_SHM=0 and with fault injection, and the ring counters (one QP
# never fills a ring; a stopped receiver's ring fills and its senders wait for room),
# SOFTRDMA_SHM_DIR (a bad one: said once, UDP, no ring file; two directories: UDP; XRC's
# registries there too, with the rings, none in /dev/shm).
# The checks run with a ring directory of their own (SOFTRDMA_SHM_DIR, removed at exit), so
# no other softrdma process of this user sweeps their files and they sweep no one else's.
# SOFTRDMA_LIB: directory holding libibverbs.so.1 (default: target/lib next to this script).
# Prints one line per check and "N passed, N failed"; exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
lib=${SOFTRDMA_LIB:-$here/../target/lib}
export LD_LIBRARY_PATH=$lib
. "$here/ports.sh"
RANDOM=$$
logdir=$(mktemp -d /tmp/softrdma-shm.XXXXXX)
if [ ! -d /dev/shm ] || ! shmdir=$(mktemp -d /dev/shm/softrdma-check.XXXXXX); then
	echo "FAIL shm: needs a directory of its own in /dev/shm"
	exit 1
fi
trap 'rm -rf "$shmdir"' EXIT
export SOFTRDMA_SHM_DIR=$shmdir
pass=0
fail=0
uid=$(id -u)
# rings_owned DIR PID...: the ring files of this user in DIR whose owner (the header's pid at
# offset 16) is one of PIDs, one a line
rings_owned() {
	local dir=$1 g o p
	shift
	for g in "$dir"/softrdma-"$uid"-*; do
		[ -e "$g" ] || continue
		o=$(od -An -t d4 -j 16 -N 4 "$g" 2>/dev/null | tr -d ' ')
		for p in "$@"; do [ "$o" = "$p" ] && echo "$g"; done
	done
}

check() { # name status detail
	if [ "$2" = 0 ]; then
		echo "PASS $1"
		pass=$((pass + 1))
	else
		echo "FAIL $1 ($3)"
		fail=$((fail + 1))
	fi
}

if ! command -v ibv_rc_pingpong >/dev/null; then
	echo "FAIL shm: needs ibv_rc_pingpong"
	exit 1
fi

# stat FIELD LOG: the sum of a SOFTRDMA_STATS counter over the lines of LOG
stat_sum() {
	grep -o " $1 [0-9]*" "$2" | awk '{ s += $2 } END { print s + 0 }'
}

# pingpong NAME ENV...: an RC ping-pong of 200 x 4096 bytes, both ends with ENV; leaves
# $logdir/NAME.{server,client}
pingpong() {
	local name=$1 log=$logdir/$1
	shift
	start_server "$log.server" 60 "" "env SOFTRDMA_STATS=1 $* ibv_rc_pingpong -g 1 -n 200 -p @P@"
	local rc=$?
	if [ $rc != 0 ]; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		return 1
	fi
	env SOFTRDMA_STATS=1 "$@" timeout 60 ibv_rc_pingpong -g 1 -n 200 -p "$port" 127.0.0.1 >"$log.client" 2>&1
	rc=$?
	wait "$spid" || rc=1
	return $rc
}

# 1. default: both ends on this host use the rings, no datagram carries a packet
pingpong shm
rc=$?
cat "$logdir/shm.server" "$logdir/shm.client" >"$logdir/shm.all"
tx=$(stat_sum tx "$logdir/shm.all")
shm_tx=$(stat_sum shm_tx "$logdir/shm.all")
shm_rx=$(stat_sum shm_rx "$logdir/shm.all")
[ $rc = 0 ] && [ "$tx" = 0 ] && [ "$shm_tx" -ge 400 ] && [ "$shm_rx" = "$shm_tx" ]
check "same host: packets through the rings" $? "rc $rc, udp tx $tx, shm tx $shm_tx rx $shm_rx; $logdir/shm.*"

# 2. SOFTRDMA_SHM=0: datagrams only
pingpong udp SOFTRDMA_SHM=0
rc=$?
cat "$logdir/udp.server" "$logdir/udp.client" >"$logdir/udp.all"
tx=$(stat_sum tx "$logdir/udp.all")
shm_tx=$(stat_sum shm_tx "$logdir/udp.all")
[ $rc = 0 ] && [ "$tx" -ge 400 ] && [ "$shm_tx" = 0 ]
check "SOFTRDMA_SHM=0: packets as datagrams" $? "rc $rc, udp tx $tx, shm tx $shm_tx; $logdir/udp.*"

# 3. fault injection needs the packet path: datagrams only, and the data still arrives
pingpong faults SOFTRDMA_FAULTS=seed=7,drop=0.02,dup=0.02
rc=$?
cat "$logdir/faults.server" "$logdir/faults.client" >"$logdir/faults.all"
shm_tx=$(stat_sum shm_tx "$logdir/faults.all")
rx=$(stat_sum rx "$logdir/faults.all")
[ $rc = 0 ] && [ "$shm_tx" = 0 ] && [ "$rx" -ge 400 ]
check "SOFTRDMA_FAULTS: packets as datagrams" $? "rc $rc, udp rx $rx, shm tx $shm_tx; $logdir/faults.*"

# 4. a ring file while a process lives: this user's, mode 0600; removed at its exit
start_server "$logdir/file.server" 60 "" "ibv_rc_pingpong -g 1 -n 1 -p @P@"
sleep 0.3
pids=$(pgrep -P "$spid" 2>/dev/null; echo "$spid")
f=$(rings_owned "$shmdir" $pids | tail -n 1)
mode=$([ -n "$f" ] && stat -c '%a %u' "$f")
elsewhere=$(rings_owned /dev/shm $pids)
timeout 30 ibv_rc_pingpong -g 1 -n 1 -p "$port" 127.0.0.1 >"$logdir/file.client" 2>&1
wait "$spid"
[ -n "$f" ] && [ "$mode" = "600 $uid" ] && [ ! -e "$f" ] && [ -z "$elsewhere" ]
check "ring file: in SOFTRDMA_SHM_DIR, mode 0600 while alive, removed at exit" $? \
	"file '$f', mode '$mode', in /dev/shm '$elsewhere'"

# 5. a process killed with SIGKILL leaves its file; the next process removes it
start_server "$logdir/kill.server" 60 "" "ibv_rc_pingpong -g 1 -n 1 -p @P@"
sleep 0.3
victim=$(pgrep -P "$spid" 2>/dev/null | head -1)
victim=${victim:-$spid}
f=$(rings_owned "$shmdir" "$victim" | tail -n 1)
kill -9 "$victim" 2>/dev/null
{ wait "$spid"; } 2>/dev/null # (the shell's own "Killed" notice)
left=no
[ -n "$f" ] && [ -e "$f" ] && left=yes
# any process that opens a ring sweeps the dead ones
start_server "$logdir/sweep.server" 60 "" "ibv_rc_pingpong -g 1 -n 1 -p @P@"
sleep 0.3
gone=no
[ -n "$f" ] && [ ! -e "$f" ] && gone=yes
timeout 30 ibv_rc_pingpong -g 1 -n 1 -p "$port" 127.0.0.1 >"$logdir/sweep.client" 2>&1
wait "$spid"
[ "$left" = yes ] && [ "$gone" = yes ]
check "killed process: its file stays, the next process removes it" $? "file '$f', left $left, gone $gone"

# write_bw NAME SERVER-ARGS -- CLIENT-ARGS: ib_write_bw between two processes with
# SOFTRDMA_STATS=1; the client's output in $logdir/NAME.client, the server's in NAME.server
write_bw() {
	local name=$1 log=$logdir/$1
	shift
	start_server "$log.server" 60 "" "env SOFTRDMA_STATS=1 ib_write_bw -d softrdma0 -x 1 -p @P@ $*" || return 1
}

# ring_wait FILE flowing|full TRIES: polls the ring (src/shm.c's layout: nslots and slot_size at
# 8 and 12, the producers' tail at 64, the slots from 192, a slot's first 8 bytes its sequence)
# every 10 ms, up to TRIES times, until more than a ring of packets went through it (flowing),
# or until the slot of the next position still holds the unread packet of a lap ago (full:
# its sequence is tail - nslots + 1); 0 once seen
ring_wait() {
	local f=$1 what=$2 n ns sz tail seq
	ns=$(od -An -t u4 -j 8 -N 4 "$f" 2>/dev/null | tr -d ' ')
	sz=$(od -An -t u4 -j 12 -N 4 "$f" 2>/dev/null | tr -d ' ')
	[ -n "$ns" ] && [ -n "$sz" ] && [ "$ns" -gt 0 ] || return 1
	for ((n = 0; n < $3; n++)); do
		tail=$(od -An -t u8 -j 64 -N 8 "$f" 2>/dev/null | tr -d ' ')
		[ -n "$tail" ] || return 1
		if [ "$what" = flowing ]; then
			[ "$tail" -gt "$ns" ] && return 0
		else
			seq=$(od -An -t u8 -j $((192 + (tail % ns) * sz)) -N 8 "$f" 2>/dev/null | tr -d ' ')
			[ -n "$seq" ] && [ "$tail" -ge "$ns" ] && [ "$seq" = $((tail - ns + 1)) ] && return 0
		fi
		sleep 0.01
	done
	return 1
}

# 6. one QP never fills a ring: its RC window (256 packets) is half the ring (512 slots).
# 64 KiB WRITEs are 16 packets each, so 64 of them in flight would be 1024 packets: the
# window holds the rest at the sender, and no put waits for room.
if command -v ib_write_bw >/dev/null; then
	write_bw window -s 65536 -t 64 -n 3000
	rc=$?
	if [ $rc = 0 ]; then
		env SOFTRDMA_STATS=1 timeout 60 ib_write_bw -d softrdma0 -x 1 -p "$port" -s 65536 -t 64 -n 3000 \
			127.0.0.1 >"$logdir/window.client" 2>&1
		rc=$?
		wait "$spid" || rc=1
	fi
	full=$(stat_sum shm_full "$logdir/window.client")
	fill=$(stat_sum shm_fill_max "$logdir/window.server")
	shm_tx=$(stat_sum shm_tx "$logdir/window.client")
	[ $rc = 0 ] && [ "$shm_tx" -ge 48000 ] && [ "$full" = 0 ] && [ "$fill" -ge 1 ] && [ "$fill" -le 256 ]
	check "one QP: no put finds the ring full, at most a window (256) waits in it" $? \
		"rc $rc, shm tx $shm_tx, full puts $full, fill max $fill; $logdir/window.*"

	# 7. a receiver that stops draining (SIGSTOP) while 4 QPs stream to it: 4 windows are
	# twice the ring, so it fills, the senders count puts that waited for room (and lose
	# those that waited 5 ms, recovered by retransmission once it runs again). The steps wait
	# for events read from the receiver's ring file, not for fixed times (a loaded machine had
	# the stop land before the stream began, or end before the ring was full): packets flow,
	# the receiver stops, its ring fills, then it stays stopped 0.3 s more (the senders run
	# meanwhile: they find it full and wait) and runs again.
	write_bw stop -s 65536 -q 4 -t 16 -D 3
	rc=$?
	stopped=no filled=no
	if [ $rc = 0 ]; then
		env SOFTRDMA_STATS=1 timeout 60 ib_write_bw -d softrdma0 -x 1 -p "$port" -s 65536 -q 4 -t 16 -D 3 \
			127.0.0.1 >"$logdir/stop.client" 2>&1 &
		cpid=$!
		victim=$(pgrep -P "$spid" 2>/dev/null | head -1)
		victim=${victim:-$spid}
		f=
		for ((n = 0; n < 3000; n++)); do # its ring comes with its QPs, once connected
			f=$(rings_owned "$shmdir" "$victim" | head -n 1)
			[ -n "$f" ] && break
			sleep 0.01
		done
		if [ -n "$f" ] && ring_wait "$f" flowing 600; then
			kill -STOP "$victim"
			stopped=yes
			ring_wait "$f" full 2000 && filled=yes
			sleep 0.3
			kill -CONT "$victim"
		fi
		wait "$cpid" || rc=1
		wait "$spid" || rc=1
	fi
	full=$(stat_sum shm_full "$logdir/stop.client")
	yields=$(stat_sum shm_full_yields "$logdir/stop.client")
	waited=$(stat_sum shm_full_wait_us "$logdir/stop.client")
	fill=$(stat_sum shm_fill_max "$logdir/stop.server")
	[ $rc = 0 ] && [ $filled = yes ] && [ "$full" -ge 1 ] && [ "$yields" -ge "$full" ] && [ "$waited" -ge 1000 ] &&
		[ "$fill" = 512 ]
	check "stopped receiver: its ring fills (512), the senders wait for room and count it" $? \
		"rc $rc, stopped $stopped, ring seen full $filled, full puts $full, yields $yields, waited $waited us, fill max $fill; $logdir/stop.*"
else
	check "ring counters: needs ib_write_bw" 1 "ib_write_bw not found"
fi

# rings_of PID...: the ring files under /dev/shm (this run's directory included) and $logdir,
# two directories deep, that name one of PIDs as their owner
rings_of() {
	local d
	for d in $(find /dev/shm "$logdir" -maxdepth 2 -type d 2>/dev/null); do rings_owned "$d" "$@"; done
}

# pingpong_apart NAME SERVER-ENV CLIENT-ENV: as pingpong, each end with its own environment
# (words without spaces), both started in $logdir; sets $during to the ring files that name the
# server as their owner while it waits for the client
pingpong_apart() {
	local log=$logdir/$1 rc pids
	cd "$logdir" || return 1
	start_server "$log.server" 60 "" "env SOFTRDMA_STATS=1 $2 ibv_rc_pingpong -g 1 -n 200 -p @P@"
	rc=$?
	if [ $rc != 0 ]; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		cd - >/dev/null
		return 1
	fi
	pids=$(pgrep -P "$spid" 2>/dev/null; echo "$spid")
	during=$(rings_of $pids)
	env SOFTRDMA_STATS=1 $3 timeout 60 ibv_rc_pingpong -g 1 -n 200 -p "$port" 127.0.0.1 >"$log.client" 2>&1
	rc=$?
	wait "$spid" || rc=1
	cd - >/dev/null
	return $rc
}

# said LOG TEXT: how many of LOG's lines are softrdma's SOFTRDMA_SHM_DIR message with TEXT
said() {
	grep -cF "softrdma: SOFTRDMA_SHM_DIR=$2; no same-host rings, packets between processes go as UDP datagrams" "$1"
}

# 8. a bad SOFTRDMA_SHM_DIR: one line on stderr per process, no ring (none in /dev/shm in its
# place), and the pair talks over UDP. The server's is relative (a directory "rel" in its
# working directory), the client's a directory that does not exist.
mkdir "$logdir/rel"
pingpong_apart baddir SOFTRDMA_SHM_DIR=rel SOFTRDMA_SHM_DIR=$shmdir/missing
rc=$?
cat "$logdir/baddir.server" "$logdir/baddir.client" >"$logdir/baddir.all"
tx=$(stat_sum tx "$logdir/baddir.all")
shm_tx=$(stat_sum shm_tx "$logdir/baddir.all")
s_said=$(said "$logdir/baddir.server" "rel is not an absolute path")
c_said=$(said "$logdir/baddir.client" "$shmdir/missing: No such file or directory")
made=$(ls -A "$logdir/rel"; [ -e "$shmdir/missing" ] && echo "$shmdir/missing")
[ $rc = 0 ] && [ "$tx" -ge 400 ] && [ "$shm_tx" = 0 ] && [ "$s_said" = 1 ] && [ "$c_said" = 1 ] &&
	[ -z "$during" ] && [ -z "$made" ]
check "bad SOFTRDMA_SHM_DIR (relative, missing): said once, no ring, UDP" $? \
	"rc $rc, udp tx $tx, shm tx $shm_tx, said $s_said/$c_said, server's rings '$during', made '$made'; $logdir/baddir.*"

# 9. the same with a regular file and a path too long for a ring's name under it
touch "$logdir/plain"
long=/$(printf 'd%.0s' $(seq 4100))
pingpong_apart baddir2 SOFTRDMA_SHM_DIR=$logdir/plain SOFTRDMA_SHM_DIR=$long
rc=$?
cat "$logdir/baddir2.server" "$logdir/baddir2.client" >"$logdir/baddir2.all"
tx=$(stat_sum tx "$logdir/baddir2.all")
shm_tx=$(stat_sum shm_tx "$logdir/baddir2.all")
s_said=$(said "$logdir/baddir2.server" "$logdir/plain is not a directory")
c_said=$(grep -c "^softrdma: SOFTRDMA_SHM_DIR=$long is longer than [0-9]* bytes; no same-host rings" "$logdir/baddir2.client")
[ $rc = 0 ] && [ "$tx" -ge 400 ] && [ "$shm_tx" = 0 ] && [ "$s_said" = 1 ] && [ "$c_said" = 1 ] && [ -z "$during" ]
check "bad SOFTRDMA_SHM_DIR (a file, too long): said once, no ring, UDP" $? \
	"rc $rc, udp tx $tx, shm tx $shm_tx, said $s_said/$c_said, server's rings '$during'; $logdir/baddir2.*"

# 10. two processes with different directories: each has its ring, neither finds the other's,
# so the packets go as datagrams
mkdir "$shmdir/a" "$shmdir/b"
pingpong_apart apart SOFTRDMA_SHM_DIR=$shmdir/a SOFTRDMA_SHM_DIR=$shmdir/b
rc=$?
cat "$logdir/apart.server" "$logdir/apart.client" >"$logdir/apart.all"
tx=$(stat_sum tx "$logdir/apart.all")
shm_tx=$(stat_sum shm_tx "$logdir/apart.all")
said_any=$(grep -c "SOFTRDMA_SHM_DIR" "$logdir/apart.all")
[ $rc = 0 ] && [ "$tx" -ge 400 ] && [ "$shm_tx" = 0 ] && [ "$said_any" = 0 ] &&
	[ "$(dirname "$during" 2>/dev/null)" = "$shmdir/a" ]
check "different SOFTRDMA_SHM_DIRs: rings of their own, packets as datagrams" $? \
	"rc $rc, udp tx $tx, shm tx $shm_tx, messages $said_any, server's rings '$during'; $logdir/apart.*"

# 11. every file softrdma shares follows SOFTRDMA_SHM_DIR: XRC between two processes
# (test_xrc_procs) with a directory of their own outside /dev/shm. While both hold the domain,
# its registry and B's ring are there and neither is in /dev/shm (the program checks that and
# prints "shared file PATH" for each); B ends with _exit, as if killed, leaving its ring and
# the registry of a domain only it held, which the next process of that directory (test_xrc:
# its first ring and its first domain over a file sweep them) removes; its own files go at its
# exit: the directory is empty after.
tests=${SOFTRDMA_TESTS:-$lib/../tests}
xdir=$logdir/xrcdir
mkdir "$xdir"
SOFTRDMA_SHM_DIR=$xdir timeout 240 "$tests/test_xrc_procs" >"$logdir/xrcdir.procs" 2>&1
rc=$?
seen=$(grep -c "^shared file $xdir/softrdma-" "$logdir/xrcdir.procs")
left=$(ls -A "$xdir" | tr '\n' ' ')
SOFTRDMA_SHM_DIR=$xdir timeout 240 "$tests/test_xrc" >"$logdir/xrcdir.one" 2>&1
rc2=$?
after=$(ls -A "$xdir" | tr '\n' ' ')
[ $rc = 0 ] && [ "$seen" = 2 ] && [ $rc2 = 0 ] && [ -z "$after" ]
check "XRC with SOFTRDMA_SHM_DIR: registry and rings there, none in /dev/shm, removed after" $? \
	"rc $rc/$rc2, files seen there $seen of 2, left by the pair '$left', after the next process '$after'; $logdir/xrcdir.*"

echo "$pass passed, $fail failed"
if [ $fail = 0 ]; then rm -rf "$logdir"; fi
[ $fail = 0 ]
