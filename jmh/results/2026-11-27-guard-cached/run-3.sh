#!/bin/bash
# Run 3: the no-op rows only, 3 forks x 10 iterations, the thread-local form and the cached form
# in one run. Usage (from the repository root, after ./mvnw -B -pl jmh -am package -DskipTests):
# jmh/results/2026-11-27-guard-cached/run-3.sh OUTDIR
OUT=$1
export JAVA_HOME=$(scripts/find-jdk)
echo "== nop $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
LD_LIBRARY_PATH=softrdma/target/lib $JAVA_HOME/bin/java --enable-native-access=ALL-UNNAMED \
  -Dverbs4j.libibverbs=$PWD/softrdma/target/lib/libibverbs.so.1 -jar jmh/target/benchmarks.jar \
  'JavaVsC\.nopJavaCritical(ByAddress|Guarded|GuardedCached)$' -f 3 -wi 5 -w 500ms -i 10 -r 250ms -prof gc \
  -rf json -rff $OUT/nop3.json 2>&1 | grep -E "^(Benchmark|JavaVsC)" | grep -v "gc\.\(count\|time\|alloc.rate \)"
echo "== end $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
