#!/bin/bash
# Round trips with and without the agent's handover of the rings to polling threads, and
# against another softrdma build: verbs4j's ping-pong (scripts/pingpong-demo, two JVMs) and
# stock ibv_rc_pingpong, the variants alternating within each round.
#
#   softrdma/bench/handover-ab.sh [-r ROUNDS] [-n ITERS] [OTHER_LIBDIR]
#
# Variants: "on" and "off" are this checkout's softrdma/target/lib with SOFTRDMA_HANDOVER=1 and
# =0; "other" (when OTHER_LIBDIR is given) is a softrdma libibverbs.so.1 built elsewhere, e.g.
# from an older commit with `make -C softrdma BUILD=/tmp/old` (then /tmp/old/lib). Needs the
# tool built (./mvnw -B package -DskipTests) and ibv_rc_pingpong (ibverbs-utils). Prints the
# load average before and after: a round trip's time moves a lot with the load on a small host.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=4 iters=20000
while getopts r:n: o; do
  case $o in r) rounds=$OPTARG ;; n) iters=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
other=${1:-}
new=$top/softrdma/target/lib
[[ -f $new/libibverbs.so.1 ]] || { echo "handover-ab: build softrdma first ($new/libibverbs.so.1 is missing)" >&2; exit 2; }
variants=(on off)
[[ -n $other ]] && variants=(other on off)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, $iters iterations per run"
for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    lib=$new handover=1
    [[ $v == off ]] && handover=0
    [[ $v == other ]] && lib=$other
    export SOFTRDMA_HANDOVER=$handover LD_LIBRARY_PATH=$lib
    java=$("$top/scripts/pingpong-demo" --system -d softrdma0 -g 1 -n "$iters" 2>&1 |
      awk '/usec\/iter/ {printf "%s ", $(NF-1)}')
    port=$((20000 + RANDOM % 20000))
    ibv_rc_pingpong -d softrdma0 -g 1 -n "$iters" -p "$port" >/dev/null 2>&1 &
    sleep 0.3
    c=$(ibv_rc_pingpong -d softrdma0 -g 1 -n "$iters" -p "$port" 127.0.0.1 2>&1 | awk '/usec\/iter/ {print $(NF-1)}')
    wait
    echo "round $r $v: verbs4j pingpong-demo us/iter (server client) ${java:-failed}| ibv_rc_pingpong client ${c:-failed}"
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
