#!/usr/bin/env bash
# Runs every benchmark in bench/ in a short mode, each in its own JVM, and prints one summary table
# of ratios against same-run baselines, with issue 15's targets (dev.tickmark.bench.AllBenchmarks;
# about 20-30 minutes on the 2-core machine). Build first, from the repository root:
#   mvn -B -q -o -DskipTests package
# Arguments go to the driver (--help lists them), e.g.
#   bench/all.sh --only=settlement,meter-ticks
#   bench/all.sh --skip=failover --echo
# The class path is this tree's own jars (bench classes, the node jar, engine's test jar for the
# simulation, the CLI jar for `tickmark connect`) plus the third-party jars Maven resolves for bench.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in bench/target/classes/dev/tickmark/bench/AllBenchmarks.class cluster-config/target/tickmark-node.jar \
  cli/target/tickmark.jar; do
  if [ ! -e "$f" ]; then
    echo "not built ($f missing): run 'mvn -B -q -o -DskipTests package' in $(pwd) first" >&2
    exit 2
  fi
done
engine_tests=$(ls engine/target/tickmark-engine-*-tests.jar 2>/dev/null | head -n 1 || true)
if [ -z "$engine_tests" ]; then
  echo "engine's test jar is missing: run 'mvn -B -q -o -DskipTests package' in $(pwd) first" >&2
  exit 2
fi
source bench/third-party-classpath.sh
commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null || true)" ]; then commit="$commit+changes"; fi
cp="bench/target/classes:cluster-config/target/tickmark-node.jar:$engine_tests:cli/target/tickmark.jar:$third_party_cp"
# shellcheck disable=SC2086
exec java ${JAVA_OPTS:--Xmx256m} -Dtickmark.bench.commit="$commit" -cp "$cp" dev.tickmark.bench.AllBenchmarks "$@"
