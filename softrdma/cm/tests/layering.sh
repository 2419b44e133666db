#!/usr/bin/env bash
# Checks that the units of softrdma's librdmacm call each other one way only: every global
# symbol an object uses that another unit defines must be defined by a unit of a lower
# layer (the same rule as ../../tests/layering.sh for the verbs library's units; the CM's
# internal symbols carry no common prefix, so every defined global symbol counts).
# Usage: layering.sh UNIT.o... (the Makefile passes the objects of the current sources).
# It also lists every global variable: the rule above sees symbols, and a function pointer a
# higher unit sets would carry a call upward that no symbol shows (../../tests/layering.sh calls
# those hooks and lists them); the CM has no hook, so every global variable must be plain shared
# state named in shared_vars with the unit that defines it, and a new one is a decision to list.
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
# The global variables, with the unit that defines each (no function pointer among them).
declare -A shared_vars=(
	[g_lock]=cm_util [g_cond]=cm_util                     # the library's one lock and its condition
	[g_ids]=cm_id                                         # every live id, for the CM thread and rdma_destroy_*
	[g_timeout_ms]=cm_thread [g_refused_retry_ms]=cm_thread # SOFTRDMA_CM_TIMEOUT_MS / _REFUSED_RETRY_MS, read at start
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
	# global variables (initialised, zeroed, common, read-only, small, weak objects)
	for s in $(nm --defined-only "$o" | awk '$2 ~ /^[BCDGRSV]$/ {print $3}'); do
		owner[$s]=$u
		if [ -z "${shared_vars[$s]:-}" ]; then
			echo "cm layering: $u defines global variable $s, not listed in shared_vars (a function pointer set from above would be a hidden upward call: list plain state with its unit, or do without)"
			bad=$((bad + 1))
		elif [ "${shared_vars[$s]}" != "$u" ]; then
			echo "cm layering: variable $s is defined by $u, listed as ${shared_vars[$s]}'s"
			bad=$((bad + 1))
		fi
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
for s in "${!shared_vars[@]}"; do
	[ "${owner[$s]:-}" = "${shared_vars[$s]}" ] || { echo "cm layering: $s is listed (unit ${shared_vars[$s]}) but that unit does not define it: remove it from shared_vars"; bad=$((bad + 1)); }
done
echo "cm layering: $n units, $bad violations"
[ $bad = 0 ]
