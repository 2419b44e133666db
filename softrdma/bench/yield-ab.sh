#!/bin/bash
# The poller's yield policies side by side (docs/softrdma.md, SOFTRDMA_YIELD_US): the two-process
# Netty echo (64 B, p50/p99 and the client loop's passes per round trip), verbs4j's raw verbs
# loop (`channel-bench --raw`, half round trip p50/p99) and the channel with its polling thread
# (`channel-bench`), each variant in turn within every round, so that the load moves them alike.
#
#   softrdma/bench/yield-ab.sh [-r ROUNDS] [-n ECHO_ROUNDS] [-p PINGS] [VARIANT...]
#
# Variants: every8 (the default: a yield on every 8th empty poll), waitN (SOFTRDMA_YIELD_US=N: a
# yield once N us of empty polls went by, then at most once per N us), never (SOFTRDMA_YIELD_EVERY=0);
# default: every8 wait20. Needs softrdma built (make -C softrdma) and the Java side built by
# scripts/netty-benchmark once (its class path file) and ./mvnw package (scripts/verbs4j).
# With SCHED=1, the first round records the scheduler's switches for 1 s of each variant's echo
# (perf record -e sched:sched_switch -a) and prints whom the two echo loops hand their CPU to.
# Prints `uptime` before and after; the tools' output stays in target/yield-ab/.
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top" || exit 2
rounds=3 echo_rounds=300000 pings=100000
while getopts r:n:p: o; do
  case $o in r) rounds=$OPTARG ;; n) echo_rounds=$OPTARG ;; p) pings=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
variants=("$@")
((${#variants[@]})) || variants=(every8 wait20)
lib=$top/softrdma/target/lib logs=$top/target/yield-ab
mkdir -p "$logs"
[[ -f $lib/libibverbs.so.1 ]] || { echo "yield-ab: build softrdma first (make -C softrdma)" >&2; exit 2; }
[[ -f verbs-netty/target/netty-benchmark-classpath.txt ]] || { echo "yield-ab: run scripts/netty-benchmark once first" >&2; exit 2; }
java_home=$(scripts/find-jdk)
export JAVA_HOME=$java_home
cp="$top/verbs-netty/target/test-classes:$top/verbs-netty/target/classes:$(cat verbs-netty/target/netty-benchmark-classpath.txt)"
bench=("$java_home/bin/java" --enable-native-access=ALL-UNNAMED
  -Dverbs4j.libibverbs="$lib/libibverbs.so.1" -Dverbs4j.librdmacm="$lib/librdmacm.so.1"
  -cp "$cp" io.github.verbs4j.netty.bench.NettyTransportBenchmark)

set_variant() {
  unset SOFTRDMA_YIELD_US SOFTRDMA_YIELD_EVERY
  case $1 in
    every8) export SOFTRDMA_YIELD_US=0 ;;
    wait[0-9]*) export SOFTRDMA_YIELD_US=${1#wait} ;;
    never) export SOFTRDMA_YIELD_EVERY=0 ;;
    *) echo "yield-ab: unknown variant $1 (every8, wait20, never)" >&2; exit 2 ;;
  esac
}

wait_for() { # file sed-expression pid -> the first match, waiting up to 60 s
  local got
  for _ in $(seq 600); do
    got=$(sed -n "$2" "$1" 2>/dev/null | head -1)
    [[ -n $got ]] && { echo "$got"; return 0; }
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

echo_run() { # variant round -> "p50 p99 passes"
  local v=$1 r=$2 slog=$logs/echo-$1-$2.server clog=$logs/echo-$1-$2.client spid cpid port
  "${bench[@]}" serve rdma >"$slog" 2>&1 &
  spid=$!
  port=$(wait_for "$slog" 's/^PORTS \([0-9]*\) [0-9]*$/\1/p' $spid) || { kill $spid; wait $spid; echo failed; return; }
  "${bench[@]}" echo-client rdma 127.0.0.1 "$port" 64 "$echo_rounds" >"$clog" 2>&1 &
  cpid=$!
  if [[ ${SCHED:-0} == 1 && $r == 1 ]]; then
    sleep 3 # the JVM's start and the 20,000 warm-up rounds
    tasks=$(ls /proc/$spid/task /proc/$cpid/task 2>/dev/null | tr '\n' ' ')
    perf record -q -e sched:sched_switch -a -o "$logs/sched-$v.data" -- sleep 1 >/dev/null 2>&1
    perf script -i "$logs/sched-$v.data" 2>/dev/null >"$logs/sched-$v.txt"
    sched_summary "$v" "$tasks" >"$logs/sched-$v.summary"
  fi
  wait $cpid
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  awk '/RESULT rdma echo-64B-rtt-p50/ {p50 = $4} /RESULT rdma echo-64B-rtt-p99/ {p99 = $4}
       /^PASSES/ {for (i = 1; i < NF; i++) if ($i == "passes") pa = $(i + 1)}
       END {printf "%s %s %s", p50 ? p50 : "failed", p99, pa}' "$clog"
}

sched_summary() { # variant "tids of both JVMs": whom the two JVMs' busiest threads switch to
  local v=$1
  awk -v v="$v" -v ts="$2" '
    BEGIN { n = split(ts, t, " "); for (i = 1; i <= n; i++) if (t[i] ~ /^[0-9]+$/) jvm[t[i]] = 1 }
    / sched:sched_switch: / {
      match($0, /prev_pid=[0-9]+/); pp = substr($0, RSTART + 9, RLENGTH - 9)
      match($0, /prev_state=[^ ]+/); st = substr($0, RSTART + 11, RLENGTH - 11)
      match($0, /next_comm=.* next_pid=/); nc = substr($0, RSTART + 10, RLENGTH - 20)
      match($0, /next_pid=[0-9]+/); np = substr($0, RSTART + 9, RLENGTH - 9)
      match($0, /prev_comm=.* prev_pid=/); pc = substr($0, RSTART + 10, RLENGTH - 20)
      if (!(pp in jvm)) next
      out[pp] = pc; outs[pp]++; if (st == "R" || st == "R+") runnable[pp]++
      who = (np in jvm) ? "echo JVM thread " nc : (np == 0 ? "idle" : "other process " nc)
      if (st == "R" || st == "R+") to[pp, who]++
    }
    END {
      for (p in outs) if (outs[p] > 200) {
        printf "sched %s: thread %s (%s) switched out %d times in 1 s, %d of them runnable (yield or preemption), to:\n", v, p, out[p], outs[p], runnable[p]
        for (k in to) { split(k, a, SUBSEP); if (a[1] == p && to[k] * 50 >= runnable[p]) printf "    %6d  %s\n", to[k], a[2] }
      }
    }' "$logs/sched-$v.txt"
}

cb_run() { # variant round raw|channel -> "half-p50 half-p99" (µs)
  local v=$1 r=$2 m=$3 slog=$logs/cb-$3-$1-$2.server clog=$logs/cb-$3-$1-$2.client spid port raw=()
  [[ $m == raw ]] && raw=(--raw)
  LD_LIBRARY_PATH=$lib scripts/verbs4j --softrdma channel-bench -s -a 127.0.0.1 -p 0 "${raw[@]}" >"$slog" 2>&1 &
  spid=$!
  port=$(wait_for "$slog" 's/.*listening on .*(port \([0-9]*\)).*/\1/p' $spid) || { kill $spid; wait $spid; echo failed; return; }
  LD_LIBRARY_PATH=$lib scripts/verbs4j --softrdma channel-bench -c -a 127.0.0.1 -p "$port" \
    -S 64 -n 1000 -w 8 --pings "$pings" "${raw[@]}" >"$clog" 2>&1
  wait $spid
  awk '$1 == 64 && NF == 9 {printf "%s %s", $6, $7; found = 1} END {if (!found) printf "failed"}' "$clog"
}

echo "yield-ab: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)"
echo "before: $(uptime)"
echo "round variant | echo 64 B rtt p50 p99 (us) passes/rtt | raw loop half-rtt p50 p99 (us) | channel half-rtt p50 p99 (us)"
for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    set_variant "$v"
    e=$(echo_run "$v" "$r")
    [[ ${SCHED:-0} == 1 && $r == 1 ]] && cat "$logs/sched-$v.summary"
    raw=$(cb_run "$v" "$r" raw)
    ch=$(cb_run "$v" "$r" channel)
    echo "$r $v | $e | $raw | $ch"
  done
done
echo "after: $(uptime)"
