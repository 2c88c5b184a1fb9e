#!/usr/bin/env bash
# An MLflow tracking server on PostgreSQL, for many jobs on many nodes logging at once (SQLite, the default
# store, does not survive concurrent writers on a network file system). `make tracking-server` runs `start`.
#   workflow/tracking_server.sh install   Debian's postgresql (apt-get; root), when missing
#   workflow/tracking_server.sh start     create (first time) and start the database and `mlflow server`; prints
#                                         what jobs export: MLFLOW_TRACKING_URI, and the login when it has logins
#   workflow/tracking_server.sh add-user NAME   a lab member's account (needs the server running with logins);
#                                         prints the password once, or stores it in the 0600 file $PASSWORD_FILE
#   workflow/tracking_server.sh stop      stop the MLflow server, then the database, by their process ids
#   workflow/tracking_server.sh stop-mlflow | start-mlflow   the MLflow server alone (the database keeps running)
# Settings (environment):
#   PUT_TRACKING_DIR   database, artifacts, logs and pid files (default: .mlflow-server in the current folder);
#                      keep it on a disk of the machine that runs the server, not on a network file system
#   PUT_TRACKING_HOST  address the server listens on (default 127.0.0.1: this machine only). Jobs on other nodes
#                      need an address they reach, e.g. the head node's cluster-network address
#   PUT_TRACKING_PORT  port (default: a free one chosen at the first start, then kept in $PUT_TRACKING_DIR/port)
#   PUT_TRACKING_AUTH  1: logins (MLflow's basic-auth app); 0: none. Default 1 beyond loopback, where 0 is refused,
#                      and 0 on loopback (this machine's users only, as before). The admin's password is made once,
#                      at random, into $PUT_TRACKING_DIR/admin-password (mode 0600); accounts in $PUT_TRACKING_DIR/auth.db
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
ADMIN=admin
PASSWORD=$DIR/admin-password
SECRET_KEY=$DIR/secret-key
AUTH_CONFIG=$DIR/basic_auth.ini

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

loopback() { case "$HOST" in 127.*|localhost|::1) return 0 ;; *) return 1 ;; esac; }

# Whether the server has logins: PUT_TRACKING_AUTH, by default on beyond loopback, where none is refused.
auth() {
    local wanted=${PUT_TRACKING_AUTH:-$(loopback && echo 0 || echo 1)}
    [ "$wanted" = 1 ] && return 0
    loopback || die "PUT_TRACKING_AUTH=0 on $HOST: beyond loopback the server has logins (unset PUT_TRACKING_AUTH)"
    return 1
}

# The admin's password and the key the app signs its forms with (CSRF), made once at random (mode 0600: the
# folder's other readers cannot log in with them), and
# the basic-auth app's configuration: its accounts in $DIR/auth.db; every account may read and log runs, an
# account's own experiments and models are its to manage (docs/mlflow.md, "Logins"). A verified login is
# remembered for AUTH_CACHE_S seconds (MLflow's auth cache, keyed by an HMAC of the password): without it every
# request pays a password-hash check (tens of ms of the server's CPU), and a stage's logging is hundreds of requests;
# a changed or removed password stays valid that long.
AUTH_CACHE_S=60
auth_setup() {
    local file
    for file in "$PASSWORD" "$SECRET_KEY"; do
        if [ ! -s "$file" ]; then
            (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' >"$file")
            log "created $file (mode 0600)"
        fi
        [ "$(stat -c %a "$file")" = 600 ] || die "$file is readable by others (mode $(stat -c %a "$file")): chmod 600 it"
    done
    (umask 077; printf '[mlflow]\ndefault_permission = EDIT\ndatabase_uri = sqlite:///%s\nadmin_username = %s\n%s\n%s\n' \
        "$DIR/auth.db" "$ADMIN" "authorization_function = mlflow.server.auth:authenticate_request_basic_auth" \
        "auth_cache_ttl_seconds = $AUTH_CACHE_S" >"$AUTH_CONFIG")
}

# What jobs export: the address, and the login (the password read from its file, never printed).
exports() {
    echo "export MLFLOW_TRACKING_URI=$(uri)"
    [ -s "$DIR/auth" ] || return 0
    echo "export MLFLOW_TRACKING_USERNAME=$ADMIN"
    echo "export MLFLOW_TRACKING_PASSWORD=\"\$(cat $PASSWORD)\""
}

start_mlflow() {
    local app=() logins=0
    auth && logins=1  # first: a refusal starts nothing
    [ ! -s "$DIR/mlflow.pid" ] || ! kill -0 "$(cat "$DIR/mlflow.pid")" 2>/dev/null ||
        die "an MLflow server runs already (pid $(cat "$DIR/mlflow.pid")): $(uri)"
    if [ -n "${PUT_TRACKING_PORT:-}" ]; then echo "$PUT_TRACKING_PORT" >"$DIR/port"
    elif [ ! -s "$DIR/port" ]; then free_port >"$DIR/port"; fi
    mkdir -p "$DIR/artifacts" "$DIR/log"
    rm -f "$DIR/auth"
    if [ "$logins" = 1 ]; then
        auth_setup
        app=(--app-name basic-auth)
        echo basic-auth >"$DIR/auth"  # this start has logins (exports, add-user)
    fi
    # its own session: `stop` ends the server and its workers as a group, by the leader's pid. The admin's
    # password reaches the server in its environment, not on its command line (ps) or in its log.
    MLFLOW_AUTH_CONFIG_PATH=$AUTH_CONFIG MLFLOW_AUTH_ADMIN_PASSWORD=$( [ "$logins" = 0 ] || cat "$PASSWORD") \
        MLFLOW_FLASK_SERVER_SECRET_KEY=$( [ "$logins" = 0 ] || cat "$SECRET_KEY") \
        setsid "$MLFLOW" server "${app[@]}" --backend-store-uri "postgresql://postgres@/$DB?host=$DIR/pg-run" \
        --artifacts-destination "$DIR/artifacts" --host "$HOST" --port "$(cat "$DIR/port")" --workers 2 \
        </dev/null >>"$DIR/log/mlflow.log" 2>&1 &
    echo $! >"$DIR/mlflow.pid"
    wait_for 180 "the MLflow server at $(uri)" python3 -c \
        "import urllib.request; urllib.request.urlopen('$(uri)/health', timeout=5)"
}

# A lab member's account, made by the admin through the server (MLflow's users API).
add_user() {
    local name=${1:-} password
    [ -n "$name" ] || die "usage: $0 add-user NAME"
    [ -s "$DIR/auth" ] || die "the server at $DIR has no logins: start it with PUT_TRACKING_AUTH=1 (or beyond loopback)"
    password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')
    MLFLOW_TRACKING_USERNAME=$ADMIN MLFLOW_TRACKING_PASSWORD=$(cat "$PASSWORD") NAME=$name NEW=$password \
        URI=$(uri) "$(dirname "$(command -v "$MLFLOW")")/python" -c 'import os
from mlflow.server.auth.client import AuthServiceClient
AuthServiceClient(os.environ["URI"]).create_user(os.environ["NAME"], os.environ["NEW"])' \
        >/dev/null 2>>"$DIR/log/add-user.log" ||
        die "could not create the account $name (exists already? see $DIR/log/add-user.log)"
    if [ -n "${PASSWORD_FILE:-}" ]; then
        (umask 077; echo "$password" >"$PASSWORD_FILE"); log "account $name: its password is in $PASSWORD_FILE"
    else
        log "account $name created; its password (shown once): $password"
    fi
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
        auth || true  # a refusal before the database starts
        start_postgres
        start_mlflow
        log "MLflow on PostgreSQL, artefacts in $DIR/artifacts$( [ ! -s "$DIR/auth" ] || echo ", logins on"); stop with: $0 stop"
        exports ;;
    stop) stop_pid "MLflow server" "$DIR/mlflow.pid" group; stop_postgres; log "stopped (data kept in $DIR)" ;;
    start-mlflow) start_mlflow; exports ;;
    add-user) add_user "${2:-}" ;;
    stop-mlflow) stop_pid "MLflow server" "$DIR/mlflow.pid" group ;;
    *) echo "usage: $0 install|start|stop|start-mlflow|stop-mlflow|add-user NAME" >&2; exit 2 ;;
esac
