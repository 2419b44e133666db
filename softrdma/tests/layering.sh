#!/usr/bin/env bash
# Checks that softrdma's units call each other one way only: every srd_* symbol an
# object uses must be defined by a unit of a lower layer (docs/softrdma.md, "Units").
# Usage: layering.sh <dir with the units' .o files>. Prints the offending references
# and "layering: N units, N violations"; exits non-zero on any violation.
set -u
obj=${1:?usage: layering.sh OBJDIR}
# layer of each unit: a unit may use units of strictly lower layers
declare -A layer=(
	[events]=0 [device]=0 [faults]=0 [pd]=0 [misc]=0 [shm]=0
	[cq]=1 [net]=1
	[rq]=2
	[sq]=3
	[responder]=4
	[requester]=5
	[agent]=6
	[qp]=7
	[context]=8
)
declare -A owner=()
bad=0
n=0
for o in "$obj"/*.o; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || { echo "layering: unit $u has no layer (add it to $0)"; bad=$((bad + 1)); continue; }
	n=$((n + 1))
	for s in $(nm --defined-only "$o" | awk '$2 ~ /^[TDBR]$/ && $3 ~ /^srd_/ {print $3}'); do
		owner[$s]=$u
	done
done
for o in "$obj"/*.o; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || continue
	for s in $(nm --undefined-only "$o" | awk '$2 ~ /^srd_/ {print $2}'); do
		d=${owner[$s]:-}
		if [ -z "$d" ]; then
			echo "layering: $u uses $s, which no unit defines"
			bad=$((bad + 1))
		elif [ "${layer[$d]}" -ge "${layer[$u]}" ]; then
			echo "layering: $u (layer ${layer[$u]}) calls $d (layer ${layer[$d]}): $s"
			bad=$((bad + 1))
		fi
	done
done
echo "layering: $n units, $bad violations"
[ $bad = 0 ]
