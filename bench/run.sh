#!/usr/bin/env bash
# Runs the settlement benchmark from a built tree (mvn -B install -DskipTests first) in its own JVM.
# Arguments go to the program (--help lists them); JAVA_OPTS carries JVM flags and -D journal settings:
#   JAVA_OPTS="-Djdbc-journal.parallelism=2" bench/run.sh --duration=30
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d bench/target/classes/dev/tickmark/bench ]; then
  echo "bench is not built: run 'mvn -B install -DskipTests' in $(pwd) first" >&2
  exit 2
fi
cp_file=bench/target/classpath.txt
if [ ! -s "$cp_file" ] || [ bench/pom.xml -nt "$cp_file" ]; then
  mvn -B -q -o -pl bench dependency:build-classpath -Dmdep.outputFile=target/classpath.txt \
    || mvn -B -q -pl bench dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
fi
# shellcheck disable=SC2086
exec java ${JAVA_OPTS:-} -cp "bench/target/classes:$(cat "$cp_file")" dev.tickmark.bench.SettlementBenchmark "$@"
