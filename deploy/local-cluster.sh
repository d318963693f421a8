#!/usr/bin/env bash
# A three-node Tickmark cluster on 127.0.0.1, one command:
#
#   deploy/local-cluster.sh          start (build the node jar if absent), wait until all three are ready
#   deploy/local-cluster.sh status   what runs
#   deploy/local-cluster.sh stop     stop the nodes (SIGTERM: they leave the cluster) and the embedded PostgreSQL
#
# Nodes 1..3 run with TICKMARK_PROFILE=local1..3 (cluster-config/src/main/resources/localN.conf): HTTP 8081-8083,
# Pekko Management 8559-8561, remoting 25521-25523, seed nodes node1 + node2. Any TICKMARK_* variable set when
# calling the script reaches all three nodes (see DESIGN.md "Running"); per-node ports come from the profiles.
#
# The database, first match wins:
#   1. TICKMARK_DB_URL (with TICKMARK_DB_USER / TICKMARK_DB_PASSWORD), used as it is;
#   2. a PostgreSQL server on 127.0.0.1:5432 (user postgres, or TICKMARK_DB_USER): database tickmark_local is created
#      if missing;
#   3. otherwise ONE embedded PostgreSQL on 127.0.0.1:54329 (TICKMARK_LOCAL_PG_PORT), data in deploy/.local/postgres,
#      shared by the three nodes (each node's own embedded PostgreSQL would give three separate markets).
# Logs, pids, the operator token and the embedded database live in deploy/.local/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$ROOT/deploy/.local"
JAR="$ROOT/cluster-config/target/tickmark-node.jar"
NODES=(1 2 3)
PG_PORT="${TICKMARK_LOCAL_PG_PORT:-54329}"
READY_TIMEOUT_S="${TICKMARK_LOCAL_READY_TIMEOUT:-180}"

http_port() { echo $((8080 + $1)); }
management_port() { echo $((8558 + $1)); }

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid_file() { # pid file, what
  local pid_file="$1" what="$2"
  if alive "$pid_file"; then
    local pid; pid="$(cat "$pid_file")"
    echo "stopping $what (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then echo "$what did not stop in 30 s: SIGKILL"; kill -KILL "$pid"; fi
  fi
  rm -f "$pid_file"
}

stop() {
  for n in "${NODES[@]}"; do stop_pid_file "$STATE/node$n.pid" "node$n"; done
  stop_pid_file "$STATE/postgres.pid" "embedded PostgreSQL"
}

status() {
  for n in "${NODES[@]}"; do
    if alive "$STATE/node$n.pid"; then
      local ready="not ready"
      curl -fsS "http://127.0.0.1:$(management_port "$n")/ready" >/dev/null 2>&1 && ready="ready"
      echo "node$n: pid $(cat "$STATE/node$n.pid"), $ready, http://127.0.0.1:$(http_port "$n")"
    else
      echo "node$n: not running"
    fi
  done
  alive "$STATE/postgres.pid" && echo "embedded PostgreSQL: pid $(cat "$STATE/postgres.pid"), 127.0.0.1:$PG_PORT"
  return 0
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

choose_database() {
  if [[ -n "${TICKMARK_DB_URL:-}" ]]; then
    DB_URL="$TICKMARK_DB_URL"; DB_USER="${TICKMARK_DB_USER:-postgres}"; DB_PASSWORD="${TICKMARK_DB_PASSWORD:-}"
    echo "database: $DB_URL (TICKMARK_DB_URL)"
    return
  fi
  DB_USER="${TICKMARK_DB_USER:-postgres}"; DB_PASSWORD="${TICKMARK_DB_PASSWORD:-}"
  if port_open 5432; then
    if command -v psql >/dev/null; then
      export PGPASSWORD="$DB_PASSWORD"
      if [[ "$(psql -h 127.0.0.1 -U "$DB_USER" -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'tickmark_local'")" != "1" ]]; then
        psql -h 127.0.0.1 -U "$DB_USER" -d postgres -qc "CREATE DATABASE tickmark_local" >/dev/null
        echo "created database tickmark_local on 127.0.0.1:5432"
      fi
    else
      echo "psql not found: assuming database tickmark_local exists on 127.0.0.1:5432" >&2
    fi
    DB_URL="jdbc:postgresql://127.0.0.1:5432/tickmark_local"
    echo "database: $DB_URL"
    return
  fi
  echo "no PostgreSQL on 127.0.0.1:5432: starting one embedded PostgreSQL on 127.0.0.1:$PG_PORT for the three nodes"
  if ! alive "$STATE/postgres.pid"; then
    nohup java -cp "$JAR" dev.tickmark.node.SharedDatabaseMain "$STATE/postgres" "$PG_PORT" >"$STATE/postgres.log" 2>&1 &
    echo $! >"$STATE/postgres.pid"
  fi
  for _ in $(seq 1 120); do
    grep -q "Embedded PostgreSQL ready" "$STATE/postgres.log" 2>/dev/null && break
    alive "$STATE/postgres.pid" || { echo "the embedded PostgreSQL did not start:" >&2; tail -20 "$STATE/postgres.log" >&2; exit 1; }
    sleep 0.5
  done
  DB_URL="jdbc:postgresql://127.0.0.1:$PG_PORT/postgres"; DB_USER="postgres"; DB_PASSWORD=""
  echo "database: $DB_URL (embedded, data in $STATE/postgres)"
}

start() {
  mkdir -p "$STATE"
  for n in "${NODES[@]}"; do
    if alive "$STATE/node$n.pid"; then echo "node$n already runs (pid $(cat "$STATE/node$n.pid")); '$0 stop' first" >&2; exit 1; fi
  done
  if [[ ! -f "$JAR" ]]; then
    echo "building $JAR"
    (cd "$ROOT" && mvn -B -q package -DskipTests -pl cluster-config -am)
  fi
  choose_database

  # One operator token for the cluster (each node would otherwise generate its own), kept between runs.
  if [[ -z "${TICKMARK_OPERATOR_TOKEN:-}" ]]; then
    [[ -f "$STATE/operator-token" ]] || (umask 077; echo "tmkop_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$STATE/operator-token")
    TICKMARK_OPERATOR_TOKEN="$(cat "$STATE/operator-token")"
  fi

  for n in "${NODES[@]}"; do
    TICKMARK_PROFILE="local$n" \
    TICKMARK_DB_URL="$DB_URL" TICKMARK_DB_USER="$DB_USER" TICKMARK_DB_PASSWORD="$DB_PASSWORD" \
    TICKMARK_OPERATOR_TOKEN="$TICKMARK_OPERATOR_TOKEN" \
    TICKMARK_ALLOW_SIMULATED_HOSTS="${TICKMARK_ALLOW_SIMULATED_HOSTS:-true}" \
    TICKMARK_DATA_DIR="${TICKMARK_DATA_DIR:-$STATE/node$n}" \
      nohup java ${JAVA_OPTS:--Xmx512m} -jar "$JAR" >"$STATE/node$n.log" 2>&1 &
    echo $! >"$STATE/node$n.pid"
    echo "node$n started (pid $!), log $STATE/node$n.log"
  done

  local deadline=$((SECONDS + READY_TIMEOUT_S))
  for n in "${NODES[@]}"; do
    until curl -fsS "http://127.0.0.1:$(management_port "$n")/ready" >/dev/null 2>&1 \
        && curl -fsS "http://127.0.0.1:$(http_port "$n")/health" >/dev/null 2>&1; do
      if ! alive "$STATE/node$n.pid"; then echo "node$n exited:" >&2; tail -30 "$STATE/node$n.log" >&2; stop; exit 1; fi
      if (( SECONDS > deadline )); then echo "node$n not ready within ${READY_TIMEOUT_S} s:" >&2; tail -30 "$STATE/node$n.log" >&2; exit 1; fi
      sleep 1
    done
    echo "node$n ready"
  done

  cat <<EOF

Tickmark local cluster ready (3 nodes, one database: $DB_URL)
  API:             http://127.0.0.1:8081  http://127.0.0.1:8082  http://127.0.0.1:8083
  Management:      http://127.0.0.1:8559/cluster/members  (8560, 8561)   shards: /cluster/shards/Rental
  Operator token:  $TICKMARK_OPERATOR_TOKEN   (also in $STATE/operator-token)
  Logs:            $STATE/node{1,2,3}.log

  An agent that fails over between the nodes:
    java -jar agent/target/tickmark-agent.jar --engine ws://127.0.0.1:8081 --engine ws://127.0.0.1:8082 \\
         --engine ws://127.0.0.1:8083 --token <registration token> --simulate-gpus h100-80gb:2

  Stop:            $0 stop
EOF
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
