# Shell helpers of the scripts that start daemons by hand and stop them by process id (workflow/tracking_server.sh,
# tests/slurm/cluster.sh). Sourced; the script sets LOG_NAME (its log prefix) and LOG_DIR (where its logs are).

log() { echo "[$LOG_NAME $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }

# Polls `$@` once a second until it succeeds; fails naming `what` after `limit` seconds.
wait_for() {
    local limit=$1 what=$2; shift 2
    for _ in $(seq "$limit"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
    die "$what not ready after ${limit}s; logs in $LOG_DIR"
}

# name pidfile [group]: SIGTERM to the process (to its process group with `group`), SIGKILL after 30 s; removes
# the pid file.
stop_pid() {
    local pid target
    [ -s "$2" ] || return 0
    pid=$(cat "$2"); target=$pid; [ "${3:-}" = group ] && target=-$pid
    if kill -0 "$pid" 2>/dev/null; then
        kill -- "$target" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$1 ($pid) ignored SIGTERM for 30 s: SIGKILL"; kill -9 -- "$target" 2>/dev/null || true
        fi
    fi
    rm -f "$2"
}
