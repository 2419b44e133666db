#!/usr/bin/env bash
# Checks that the units of softrdma's librdmacm call each other one way only: every global
# symbol an object uses that another unit defines must be defined by a unit of a lower
# layer (the same rule as ../../tests/layering.sh for the verbs library's units; the CM's
# internal symbols carry no common prefix, so every defined global symbol counts).
# Usage: layering.sh UNIT.o... (the Makefile passes the objects of the current sources).
# Prints the offending references and "cm layering: N units, N violations"; exits non-zero
# on any violation.
set -u
(($#)) || { echo "usage: layering.sh UNIT.o..." >&2; exit 2; }
# layer of each unit: a unit may use units of strictly lower layers
declare -A layer=(
	[cm_util]=0 [stubs]=0
	[cm_device]=1 [addrinfo]=1
	[cm_id]=2 [cm_event]=2 [cm_msg]=2
	[cm_qp]=3
	[cm_conn]=4
	[cm_thread]=5
	[cm_api]=6
	[cm_ep]=7
)
declare -A owner=()
bad=0
n=0
for o in "$@"; do
	[ -f "$o" ] || { echo "cm layering: $o is missing (build first)"; exit 1; }
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || { echo "cm layering: unit $u has no layer (add it to $0)"; bad=$((bad + 1)); continue; }
	n=$((n + 1))
	for s in $(nm --defined-only "$o" | awk '$2 ~ /^[TDBR]$/ {print $3}'); do
		owner[$s]=$u
	done
done
for o in "$@"; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || continue
	for s in $(nm --undefined-only "$o" | awk '{print $2}'); do
		d=${owner[$s]:-}
		[ -n "$d" ] || continue # libc, libibverbs
		if [ "${layer[$d]}" -ge "${layer[$u]}" ]; then
			echo "cm layering: $u (layer ${layer[$u]}) calls $d (layer ${layer[$d]}): $s"
			bad=$((bad + 1))
		fi
	done
done
echo "cm layering: $n units, $bad violations"
[ $bad = 0 ]
