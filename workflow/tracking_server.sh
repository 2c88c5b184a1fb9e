#!/usr/bin/env bash
# An MLflow tracking server on PostgreSQL, for many jobs on many nodes logging at once (SQLite, the default
# store, does not survive concurrent writers on a network file system). `make tracking-server` runs `start`.
#   workflow/tracking_server.sh install   Debian's postgresql (apt-get; root), when missing
#   workflow/tracking_server.sh start     create (first time) and start the database and `mlflow server`; prints
#                                         the MLFLOW_TRACKING_URI to export
#   workflow/tracking_server.sh stop      stop the MLflow server, then the database, by their process ids
#   workflow/tracking_server.sh stop-mlflow | start-mlflow   the MLflow server alone (the database keeps running)
# Settings (environment):
#   PUT_TRACKING_DIR   database, artifacts, logs and pid files (default: .mlflow-server in the current folder);
#                      keep it on a disk of the machine that runs the server, not on a network file system
#   PUT_TRACKING_HOST  address the server listens on (default 127.0.0.1: this machine only). Jobs on other nodes
#                      need an address they reach, e.g. the head node's cluster-network address
#   PUT_TRACKING_PORT  port (default: a free one chosen at the first start, then kept in $PUT_TRACKING_DIR/port)
#   MLFLOW             the mlflow command (default: .venv/bin/mlflow, else mlflow on PATH)
# The database listens on a Unix socket in $PUT_TRACKING_DIR only (no TCP port); artefacts go through the server
# (--serve-artifacts) into $PUT_TRACKING_DIR/artifacts, so jobs need no access to that folder. As root, PostgreSQL
# runs as the `postgres` user (it refuses root), which must be able to reach $PUT_TRACKING_DIR.
set -euo pipefail

DIR=$(realpath -m "${PUT_TRACKING_DIR:-.mlflow-server}")
HOST=${PUT_TRACKING_HOST:-127.0.0.1}
MLFLOW=${MLFLOW:-$( [ -x .venv/bin/mlflow ] && echo "$PWD/.venv/bin/mlflow" || command -v mlflow || echo mlflow)}
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
DB=mlflow

LOG_NAME=tracking LOG_DIR=$DIR/log
source "$(dirname "$0")/daemons.sh"

install() {
    [ -n "$PG_BIN" ] && [ -x "$PG_BIN/postgres" ] && { log "postgresql present"; return; }
    [ "$(id -u)" = 0 ] || die "installing postgresql needs root (apt-get)"
    log "installing postgresql"
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends postgresql >/dev/null
}

# PostgreSQL's commands as the database's owner: `postgres` when we are root, else ourselves.
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start_postgres() {
    [ -n "$PG_BIN" ] || die "PostgreSQL is not installed: run '$0 install' (Debian: apt-get install postgresql)"
    local data=$DIR/pg socket=$DIR/pg-run
    mkdir -p "$data" "$socket" "$DIR/log"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$data" "$socket"; chmod 700 "$data"
        runuser -u postgres -- test -x "$data" ||
            die "the postgres user cannot reach $DIR (a private parent folder?): set PUT_TRACKING_DIR elsewhere"
        touch "$DIR/log/postgres.log"; chown postgres: "$DIR/log/postgres.log"
    fi
    if [ ! -s "$data/PG_VERSION" ]; then
        log "creating the database in $data"
        as_owner "$PG_BIN/initdb" -D "$data" -A trust -U postgres >"$DIR/log/initdb.log" 2>&1 ||
            die "initdb failed; see $DIR/log/initdb.log"
    fi
    as_owner "$PG_BIN/pg_ctl" -D "$data" -l "$DIR/log/postgres.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$socket'" start >/dev/null ||
        die "PostgreSQL did not start; see $DIR/log/postgres.log"
    head -n 1 "$data/postmaster.pid" >"$DIR/postgres.pid"
    as_owner "$PG_BIN/psql" -h "$socket" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" |
        grep -q 1 || as_owner "$PG_BIN/createdb" -h "$socket" -U postgres "$DB"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("'"$HOST"'", 0)); print(s.getsockname()[1])'; }

uri() { echo "http://$HOST:$(cat "$DIR/port")"; }

start_mlflow() {
    [ ! -s "$DIR/mlflow.pid" ] || ! kill -0 "$(cat "$DIR/mlflow.pid")" 2>/dev/null ||
        die "an MLflow server runs already (pid $(cat "$DIR/mlflow.pid")): $(uri)"
    if [ -n "${PUT_TRACKING_PORT:-}" ]; then echo "$PUT_TRACKING_PORT" >"$DIR/port"
    elif [ ! -s "$DIR/port" ]; then free_port >"$DIR/port"; fi
    mkdir -p "$DIR/artifacts" "$DIR/log"
    # its own session: `stop` ends the server and its workers as a group, by the leader's pid
    setsid "$MLFLOW" server --backend-store-uri "postgresql://postgres@/$DB?host=$DIR/pg-run" \
        --artifacts-destination "$DIR/artifacts" --host "$HOST" --port "$(cat "$DIR/port")" --workers 2 \
        </dev/null >>"$DIR/log/mlflow.log" 2>&1 &
    echo $! >"$DIR/mlflow.pid"
    wait_for 180 "the MLflow server at $(uri)" python3 -c \
        "import urllib.request; urllib.request.urlopen('$(uri)/health', timeout=5)"
}

stop_postgres() {
    [ -s "$DIR/postgres.pid" ] || return 0
    as_owner "$PG_BIN/pg_ctl" -D "$DIR/pg" -m fast -w -t 60 stop >/dev/null 2>&1 ||
        stop_pid PostgreSQL "$DIR/postgres.pid"
    rm -f "$DIR/postgres.pid"
}

case "${1:-}" in
    install) install ;;
    start)
        start_postgres
        start_mlflow
        log "MLflow on PostgreSQL, artefacts in $DIR/artifacts; stop with: $0 stop"
        echo "export MLFLOW_TRACKING_URI=$(uri)" ;;
    stop) stop_pid "MLflow server" "$DIR/mlflow.pid" group; stop_postgres; log "stopped (data kept in $DIR)" ;;
    start-mlflow) start_mlflow; echo "export MLFLOW_TRACKING_URI=$(uri)" ;;
    stop-mlflow) stop_pid "MLflow server" "$DIR/mlflow.pid" group ;;
    *) echo "usage: $0 install|start|stop|start-mlflow|stop-mlflow" >&2; exit 2 ;;
esac
