#!/usr/bin/env bash
# Runs the launch benchmark (bench/market-on-tree.sh) and reads PostgreSQL's pg_stat_statements over one
# rate's window: reset when "RATE launches/s for" starts, read when that window's rentals are stopped.
# Needs pg_stat_statements loaded (ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';
# restart; CREATE EXTENSION pg_stat_statements) and psql on PATH; PG* settings as for psql
# (default 127.0.0.1, user postgres).
#   bench/market-pg-statements.sh TREE RATE [SQL] -- BENCHMARK ARGS...
# SQL, when given, runs in the benchmark's database once its hosts are listed (e.g. to give them records).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$1; rate=$2; shift 2
sql=""
if [ "${1:-}" != "--" ]; then sql=$1; shift; fi
shift # --
shown=$(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<< "$rate") # as the benchmark prints it: 1,000
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-postgres}
log=$(mktemp)
bench/market-on-tree.sh "$tree" "$@" > "$log" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true; rm -f "$log"' EXIT
until grep -q "read side: GET /v1/offers" "$log"; do sleep 0.5; kill -0 $bench || { cat "$log"; exit 1; }; done
if [ -n "$sql" ]; then
  db=$(psql -At -c "SELECT datname FROM pg_database WHERE datname LIKE 'tickmark_bench_match%' ORDER BY oid DESC LIMIT 1")
  psql -q -d "$db" -c "$sql" -c "ANALYZE"
  echo "ran in $db: $sql"
fi
# the measured window's line (a warm-up's line, at whatever rate, follows a "-- warm-up" line); then its stop
window() {
  awk -v pat=" $shown launches/s for " -v want="$1" '
    index($0, pat) && index($0, "(from") && prev !~ /warm-up/ { found = 1 }
    found && want == "stopped" && /stopped [0-9,]+ rentals/ { stopped = 1 }
    { prev = $0 }
    END { exit !(want == "stopped" ? stopped : found) }' "$log"
}
until window started; do sleep 0.2; kill -0 $bench || { cat "$log"; exit 1; }; done
psql -q -c "SELECT pg_stat_statements_reset()" > /dev/null
until window stopped; do sleep 0.2; kill -0 $bench || { cat "$log"; exit 1; }; done
psql -c "SELECT calls, round(total_exec_time::numeric) AS ms, round((total_exec_time / calls)::numeric, 3) AS ms_a_call, rows,
  left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS statement FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 10"
wait $bench || true
grep -E "^ *[0-9,]+ +[0-9,]+ +[0-9,]+ " "$log" || true
