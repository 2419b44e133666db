#!/usr/bin/env bash
# The in-process C benchmark for several builds of softrdma, alternated in one run
# (docs/performance.md): RUNS times, each build in turn runs
#   LD_LIBRARY_PATH=<LIBDIR> <LIBDIR>/../bench/inproc_lat 30000 40
# and its figures (best of 40 rounds in thread CPU time, ns per operation) are printed raw;
# at the end, per build, the minimum and the median of its RUNS figures, with the load
# average before and after.
#
#   softrdma/bench/inproc_ab.sh RUNS NAME=LIBDIR [NAME=LIBDIR...]
#
# LIBDIR holds libibverbs.so.1, and bench/inproc_lat one level up (make BUILD=<dir> all
# <dir>/bench/inproc_lat).
set -eu
runs=${1:?usage: inproc_ab.sh RUNS NAME=LIBDIR [NAME=LIBDIR...]}
shift
(($#)) || { echo "usage: inproc_ab.sh RUNS NAME=LIBDIR [NAME=LIBDIR...]" >&2; exit 2; }
names=() libs=()
for a in "$@"; do
	names+=("${a%%=*}")
	libs+=("${a#*=}")
done
work=$(mktemp -d /tmp/softrdma-inproc-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "load before: $(uptime)"
for i in "${!names[@]}"; do
	echo "build ${names[$i]} = ${libs[$i]}: $(md5sum <"${libs[$i]}/libibverbs.so.1" | cut -c1-12)"
done
for r in $(seq "$runs"); do
	for i in "${!names[@]}"; do
		out=$(LD_LIBRARY_PATH=${libs[$i]} "${libs[$i]}/../bench/inproc_lat" 30000 40)
		w=$(awk '/RDMA WRITE/ { print $NF }' <<<"$out")
		s=$(awk '/SEND 8 B/ { print $NF }' <<<"$out")
		echo "run $r ${names[$i]} WRITE $w SEND $s"
		echo "$w" >>"$work/${names[$i]}.w"
		echo "$s" >>"$work/${names[$i]}.s"
	done
done
echo "load after: $(uptime)"
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "min %.1f med %.1f", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for n in "${names[@]}"; do
	echo "$n WRITE $(stats "$work/$n.w")  SEND $(stats "$work/$n.s")"
done
