#!/usr/bin/env bash
# verbs4j's request checks before and after the chain-level check, same provider (this
# branch's softrdma), alternated, two rounds. OLD_JAR: jmh/target/benchmarks.jar with the
# SendRequest/ReceiveRequest classes of 1882f9d (javac against this branch's classes, jar uf);
# NEW_JAR: jmh/target/benchmarks.jar of this branch.
set -u
cd "$(dirname "$0")/../.."
JAVA_HOME=${JAVA_HOME:-$(scripts/find-jdk)}
lib=$PWD/softrdma/target/lib
re='JavaVsC.(chain16WriteJava|chain16WriteJavaRawFfm|writeJava|writeJavaRawFfm)$'
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in 1 2; do
  for v in old new; do
    jar=$([ $v = old ] && echo "${OLD_JAR:?}" || echo "${NEW_JAR:-jmh/target/benchmarks.jar}")
    echo "== round $r $v ($(cut -d' ' -f1-3 /proc/loadavg))"
    LD_LIBRARY_PATH=$lib "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Dverbs4j.libibverbs=$lib/libibverbs.so.1 \
      -jar "$jar" -f 1 -wi 5 -w 1s -i 20 -r 250ms -prof gc -rf json \
      -rff jmh/results/2026-11-23-checks-$v-$r.json "$re" 2>&1 | grep -E "^JavaVsC|^Benchmark" | grep -v "gc\."
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
