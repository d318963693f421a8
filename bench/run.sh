#!/usr/bin/env bash
# Runs the settlement benchmark from a built tree (mvn -B -q -DskipTests package first) in its own JVM.
# Arguments go to the program (--help lists them); JAVA_OPTS carries JVM flags and -D journal settings:
#   JAVA_OPTS="-Djdbc-journal.parallelism=2" bench/run.sh --duration=30
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d bench/target/classes/dev/tickmark/bench ] || ! ls cluster-config/target/tickmark-node.jar >/dev/null 2>&1; then
  echo "bench is not built: run 'mvn -B -q -DskipTests package' in $(pwd) first" >&2
  exit 2
fi
source bench/third-party-classpath.sh
# shellcheck disable=SC2086
exec java ${JAVA_OPTS:-} -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
  dev.tickmark.bench.SettlementBenchmark "$@"
