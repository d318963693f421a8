#!/usr/bin/env bash
# Runs MarketBenchmark against the node classes of another built checkout (TREE, e.g. a `git worktree`
# of an older commit after `mvn -B -DskipTests package` there), with this checkout's bench classes and
# third-party jars: a before/after comparison in one session on one machine.
#   bench/market-on-tree.sh /path/to/before --parts=match --hosts=1000 --rates=20,100
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$1; shift
source bench/third-party-classpath.sh
ext=$(tr ':' '\n' <<< "$third_party_cp" | grep -v '/dev/tickmark/' | paste -sd:)
mods=""
for m in cluster-config engine persistence http console agent wire cli; do mods="$mods:$tree/$m/target/classes"; done
exec java ${JAVA_OPTS:--Xmx4g} -cp "bench/target/classes$mods:$tree/engine/target/test-classes:$ext" \
  dev.tickmark.bench.MarketBenchmark "$@"
