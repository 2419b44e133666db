#!/bin/bash
# Runs 1 and 2: this build (A, the record cached in the request objects) and a build of cb952ad
# (B, the thread-local lookup per call), alternated in one session. Usage: run-1-2.sh A B OUTDIR
A=$1; B=$2; OUT=$3
export JAVA_HOME=$($A/scripts/find-jdk)
J=$JAVA_HOME/bin/java
run() { # dir label regex
  cd $1 && echo "== $2 $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  LD_LIBRARY_PATH=softrdma/target/lib $J --enable-native-access=ALL-UNNAMED \
    -Dverbs4j.libibverbs=$PWD/softrdma/target/lib/libibverbs.so.1 -jar jmh/target/benchmarks.jar \
    "$3" -f 1 -wi 3 -w 500ms -i 5 -r 250ms -prof gc -rf json -rff $OUT/$2.json 2>&1 | grep -E "^(Benchmark|JavaVsC)" | grep -v "gc\.\(count\|time\|alloc.rate \)"
}
NOP='JavaVsC\.nopJavaCritical(ByAddress|Guarded|GuardedCached)?$'
VERB='JavaVsC\.(write|read|pollEmpty|sendRecv)(Java|JavaRawFfm)$'
run $A after-nop1 "$NOP"
run $B before-verb1 "$VERB"
run $A after-verb1 "$VERB"
run $A after-nop2 "$NOP"
run $B before-verb2 "$VERB"
run $A after-verb2 "$VERB"
echo "== end $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
