#!/usr/bin/env bash
# Checks that softrdma's units call each other one way only: every global symbol an
# object uses that a unit defines (the srd_* internals, and the exported verbs too) must
# be defined by a unit of a lower layer (docs/softrdma.md, "Units"), but for the calls
# up named in up_allowed below. It also checks the calls up that run through a function
# pointer, which no symbol shows: every global variable a unit defines must be listed
# below, either as a run-time upcall (hook_home) or as shared state (shared_vars), and a
# hook may be referenced only by the unit that defines it and the units listed as its
# setters.
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
# The run-time upcalls ("hooks"). A hook is a global function pointer that a lower unit
# defines and calls and that higher units set to a function of their own: control runs up
# at run time while every symbol reference points down (the setters use the lower unit's
# variable), so the rule above cannot see it. Each is named srd_*_hook and listed here:
# hook_home, the unit that defines and calls it; hook_setters, the only other units that
# may reference it (each of a higher layer, each still referencing it); hook_reason, why
# the call must go up. A unit that defines a global variable listed nowhere, a hook
# referenced by a unit not listed, or a hook listed that no unit defines fails the check.
declare -A hook_home=([srd_cq_idle_hook]=cq [srd_xrc_ctrl_hook]=agent)
declare -A hook_setters=([srd_cq_idle_hook]="agent" [srd_xrc_ctrl_hook]="xctl qp")
declare -A hook_reason=(
	[srd_cq_idle_hook]="a thread polling an empty CQ takes the packets waiting in this process's same-host rings and runs the requester and responder for them (agent's poll_hook), so a busy poller needs no other thread to progress"
	[srd_xrc_ctrl_hook]="the agent (or a polling thread) hands OP_XRC_CTRL packets to xctl (srd_xctl_rx), which serves other processes' ibv_open_qp handles through the public verbs; set when this process creates a TGT QP (qp) or opens another process's (xctl)"
)
# The global variables that are not hooks, with the unit that defines each: state that units
# above read or write directly (no function pointer among them; a new one is a decision to
# list here, so that a function pointer cannot slip in under another name).
declare -A shared_vars=(
	[srd_br_fence]=lock [srd_tl_reader]=lock             # the brlocks' fence mode, this thread's reader record
	[srd_lock_bias_owned]=lock [srd_lock_bias_revoked]=lock # SOFTRDMA_STATS's counts of biased locks and revocations
	[srd_close_race_on]=closerace                        # the close-race check is on
	[srd_qpn_table_lock]=net [srd_st]=net                # the QPN table's lock; packet statistics
	[srd_mr_table_lock]=pd                               # the MR key table's lock
	[verbs_allow_disassociate_destroy]=misc              # libibverbs' ABI variable
)
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
	# global variables (initialised, zeroed, common, read-only, small, weak objects)
	for s in $(nm --defined-only "$o" | awk '$2 ~ /^[BCDGRSV]$/ {print $3}'); do
		owner[$s]=$u
		if [ -n "${hook_home[$s]:-}" ]; then
			[ "${hook_home[$s]}" = "$u" ] || { echo "layering: hook $s is defined by $u, listed as ${hook_home[$s]}'s"; bad=$((bad + 1)); }
		elif [ -n "${shared_vars[$s]:-}" ]; then
			[ "${shared_vars[$s]}" = "$u" ] || { echo "layering: variable $s is defined by $u, listed as ${shared_vars[$s]}'s"; bad=$((bad + 1)); }
		elif [[ $s == srd_*_hook ]]; then
			echo "layering: $u defines hook $s, which hook_home does not list (with its setters and reason)"
			bad=$((bad + 1))
		else
			echo "layering: $u defines global variable $s, listed neither as a hook (a function pointer a higher unit sets: name it srd_*_hook, list it in hook_home) nor in shared_vars"
			bad=$((bad + 1))
		fi
	done
done
# every listed hook exists where the table says, and its setters lie above it
for h in "${!hook_home[@]}"; do
	home=${hook_home[$h]}
	if [ "${owner[$h]:-}" != "$home" ]; then
		echo "layering: hook $h is listed (home $home) but no unit defines it there: remove it from the table"
		bad=$((bad + 1))
		continue
	fi
	for w in ${hook_setters[$h]:-}; do
		if [ -z "${layer[$w]:-}" ] || [ "${layer[$w]}" -le "${layer[$home]}" ]; then
			echo "layering: $w, listed as a setter of hook $h, is not above $home"
			bad=$((bad + 1))
		fi
	done
	[ -n "${hook_reason[$h]:-}" ] || { echo "layering: hook $h has no reason in hook_reason"; bad=$((bad + 1)); }
done
declare -A hook_used=()
for o in "${objs[@]}"; do
	u=$(basename "$o" .o)
	[ -n "${layer[$u]:-}" ] || continue
	for s in $(nm --undefined-only "$o" | awk '{print $2}'); do
		d=${owner[$s]:-}
		if [ -n "${hook_home[$s]:-}" ]; then
			hook_used[$u:$s]=1
			if [[ " ${hook_setters[$s]:-} " != *" $u "* ]]; then
				echo "layering: $u references hook $s, which only ${hook_home[$s]} and its setters (${hook_setters[$s]:-none}) may"
				bad=$((bad + 1))
			fi
		fi
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
# a setter that no longer references its hook is a stale entry
for h in "${!hook_setters[@]}"; do
	[ "${owner[$h]:-}" = "${hook_home[$h]}" ] || continue
	for w in ${hook_setters[$h]}; do
		[ -n "${layer[$w]:-}" ] || continue
		[ -n "${hook_used[$w:$h]:-}" ] || { echo "layering: $w is listed as a setter of hook $h but does not reference it"; bad=$((bad + 1)); }
	done
done
echo "layering: $n units, ${#hook_home[@]} hooks, $bad violations"
[ $bad = 0 ]
