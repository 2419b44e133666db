#!/usr/bin/env bash
# Checks that softrdma's units call each other one way only: every global symbol an
# object uses that a unit defines (the srd_* internals, and the exported verbs too) must
# be defined by a unit of a lower layer (docs/softrdma.md, "Units"), but for the calls
# up named in up_allowed below.
# Usage: layering.sh UNIT.o... (the Makefile passes the objects of the current
# sources, so a stale object of a removed or renamed unit is never read), or
# layering.sh OBJDIR for every .o in it. Prints the offending references and
# "layering: N units, N violations"; exits non-zero on any violation.
set -u
(($#)) || { echo "usage: layering.sh UNIT.o... | OBJDIR" >&2; exit 2; }
if (($# == 1)) && [ -d "$1" ]; then
	objs=("$1"/*.o)
else
	objs=("$@")
fi
for o in "${objs[@]}"; do
	[ -f "$o" ] || { echo "layering: $o is missing (build first)"; exit 1; }
done
# layer of each unit: a unit may use units of strictly lower layers
declare -A layer=(
	[lock]=-1 [odp]=-1 [closerace]=-1
	[events]=0 [device]=0 [faults]=0 [pd]=0 [misc]=0 [shm]=0
	[cq]=1 [net]=1 [xrc]=1
	[rq]=2
	[sq]=3
	[responder]=4
	[requester]=5
	[agent]=6
	[xctl]=7
	[qp]=8
	[qpx]=9
	[context]=10
)
# The calls up the check allows, unit:symbol, each for a reason. xctl serves another
# process's ibv_open_qp handle of a TGT QP by running the verb on the QP through the
# public verbs, as that process's application would; it is reached for that only from
# the agent's run-time hook (srd_xrc_ctrl_hook), never from qp.c's calls into it.
declare -A up_allowed=([xctl:ibv_query_qp]=1 [xctl:ibv_modify_qp]=1)
declare -A owner=()
bad=0
n=0
for o in "${objs[@]}"; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || { echo "layering: unit $u has no layer (add it to $0)"; bad=$((bad + 1)); continue; }
	n=$((n + 1))
	for s in $(nm --defined-only "$o" | awk '$2 ~ /^[TDBR]$/ {print $3}'); do
		owner[$s]=$u
	done
done
for o in "${objs[@]}"; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || continue
	for s in $(nm --undefined-only "$o" | awk '{print $2}'); do
		d=${owner[$s]:-}
		if [ -z "$d" ]; then
			[[ $s == srd_* ]] || continue # libc and the like
			echo "layering: $u uses $s, which no unit defines"
			bad=$((bad + 1))
		elif [ -n "${up_allowed[$u:$s]:-}" ]; then
			continue
		elif [ "${layer[$d]}" -ge "${layer[$u]}" ]; then
			echo "layering: $u (layer ${layer[$u]}) calls $d (layer ${layer[$d]}): $s"
			bad=$((bad + 1))
		fi
	done
done
echo "layering: $n units, $bad violations"
[ $bad = 0 ]
