#!/usr/bin/env bash
# A real multi-node Slurm cluster on one machine for `make test-slurm`: munge, MariaDB, slurmdbd (so that sacct
# works as on production clusters) and slurmctld on this host, and $NODES compute nodes, each a slurmd in a network
# and UTS namespace of its own (own host name putnodeK, own address on a bridge this script creates), all started
# by hand as root (no systemd), configured in $STATE and stopped by their process ids.
#   tests/slurm/cluster.sh install   Debian packages (apt-get; root)
#   tests/slurm/cluster.sh up        configure and start the daemons and the nodes' namespaces
#   tests/slurm/cluster.sh down      stop every daemon `up` started and every process left in the nodes (by pid),
#                                    remove the namespaces and the bridge; keep $STATE for the logs
#   tests/slurm/cluster.sh address   this host's address on the bridge (where the nodes reach its services)
# Network: $NET.0/24 on bridge $BRIDGE; this host (slurmctld, and the services the jobs use) is $NET.1, node K is
# $NET.(10+K). Only these addresses and the loopback are used. The controller runs under a host name of its own
# (putctl, a UTS namespace) that matches its configured address; the nodes resolve every name from
# $STATE/hosts, mounted over /etc/hosts in their mount namespaces.
# Two partitions: `batch` (default) and `urgent`, whose jobs preempt `batch` jobs (requeued), so the test
# can preempt a training job for real. Each node advertises 2 GPUs as a generic resource without devices:
# jobs asking for GPUs are scheduled as on a GPU cluster and then run on the CPU.
set -euo pipefail

STATE=${PUT_SLURM_STATE:-/tmp/put-slurm}
# Slurm's default configuration directory: jobs' nested `srun` calls (the executor plugin's job steps)
# drop SLURM_* variables, SLURM_CONF included, so the configuration must be where every client looks.
ETC=/etc/slurm
MARK="# written by put's tests/slurm/cluster.sh"
DB_PORT=${PUT_SLURM_DB_PORT:-3307}
PACKAGES="slurm-wlm slurmdbd munge mariadb-server iproute2 util-linux openssh-server"
NODES=${PUT_SLURM_NODES:-2}
NET=${PUT_SLURM_NET:-10.213.47}     # a private /24 unlikely to be in use
BRIDGE=${PUT_SLURM_BRIDGE:-putslurm0}
CONTROLLER=putctl
node_name() { echo "putnode$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }

LOG_NAME=cluster LOG_DIR=$STATE/log
source "$(dirname "$0")/../../workflow/daemons.sh"

install() {
    local tools="slurmctld slurmdbd munged mariadbd sacct ip unshare /usr/sbin/sshd"
    if [ "$(command -v $tools | wc -l)" = "$(echo $tools | wc -w)" ]; then
        log "packages present"; return
    fi
    [ "$(id -u)" = 0 ] || die "installing $PACKAGES needs root (apt-get)"
    log "installing $PACKAGES"
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
}

start_munge() {
    [ -s /etc/munge/munge.key ] || { mkdir -p /etc/munge; mungekey --create --keyfile /etc/munge/munge.key; }
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge "$STATE/munge"; chown munge:munge /run/munge "$STATE/munge"
    runuser -u munge -- munged --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
        --seed-file="$STATE/munge/seed"
    wait_for 20 munge sh -c 'munge -n | unmunge'
}

start_mariadb() {
    local data=$STATE/mysql/data run=$STATE/mysql  # owned by the mysql user: data, socket, pid, log
    mkdir -p "$data"; chown -R mysql:mysql "$run"
    timeout 120 mariadb-install-db --user=mysql --datadir="$data" --auth-root-authentication-method=socket \
        >"$STATE/log/mariadb-install.log" 2>&1
    runuser -u mysql -- mariadbd --datadir="$data" --socket="$run/mysql.sock" --port="$DB_PORT" \
        --bind-address=127.0.0.1 --pid-file="$run/mysql.pid" --log-error="$run/mariadb.log" \
        --skip-name-resolve </dev/null >/dev/null 2>&1 &
    wait_for 60 MariaDB mariadb --socket="$run/mysql.sock" -e "select 1"
    mariadb --socket="$run/mysql.sock" -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

write_config() {
    local cpus mem_mb nodes
    cpus=$(nproc)
    # the machine's memory shared by the nodes (each its share, as separate machines would have)
    mem_mb=$(awk -v n="$NODES" '/MemTotal/ {print int($2 / 1024 * 0.85 / n)}' /proc/meminfo)
    nodes="putnode[1-$NODES]"
    mkdir -p "$ETC" "$STATE/ctld" "$STATE/spool"
    for f in slurm.conf slurmdbd.conf gres.conf; do
        [ ! -s "$ETC/$f" ] || grep -qxF "$MARK" "$ETC/$f" ||
            die "$ETC/$f exists and was not written by this script: this machine has its own Slurm set-up"
    done
    cat >"$ETC/slurm.conf" <<EOF
$MARK
ClusterName=putci
SlurmctldHost=$CONTROLLER($NET.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmctldPort=${PUT_SLURM_CTLD_PORT:-6817}
SlurmdPort=${PUT_SLURM_D_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=2000
GresTypes=gpu
AccountingStorageTRES=gres/gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=${PUT_SLURMDBD_PORT:-6819}
JobAcctGatherType=jobacct_gather/linux
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
MinJobAge=300
KillWait=30
ReturnToService=2
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
EOF
    for k in $(seq "$NODES"); do
        echo "NodeName=$(node_name "$k") NodeAddr=$(node_addr "$k") CPUs=$cpus RealMemory=$mem_mb Gres=gpu:2" \
            "State=UNKNOWN"
    done >>"$ETC/slurm.conf"
    cat >>"$ETC/slurm.conf" <<EOF
PartitionName=batch Nodes=$nodes Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=$nodes MaxTime=INFINITE State=UP PriorityTier=2
EOF
    # Two stand-in GPU "devices" per node (plain files): scheduled and accounted like GPUs, bound to nothing.
    mkdir -p "$STATE/dev"; touch "$STATE/dev/gpu0" "$STATE/dev/gpu1"
    printf '%s\nAutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "$MARK" "$nodes" "$STATE/dev/gpu[0-1]" >"$ETC/gres.conf"
    cat >"$ETC/slurmdbd.conf" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdPort=${PUT_SLURMDBD_PORT:-6819}
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$ETC/slurmdbd.conf"
}

hosts_file() {  # what the nodes resolve: every name to its bridge address
    printf '127.0.0.1 localhost\n%s.1 %s\n' "$NET" "$CONTROLLER"
    for k in $(seq "$NODES"); do echo "$(node_addr "$k") $(node_name "$k")"; done
}

# The bridge, and per node a namespace joined to it by a veth pair: the node's own address, and its own loopback.
start_network() {
    ! ip link show "$BRIDGE" >/dev/null 2>&1 || die "a network interface $BRIDGE exists: another cluster? '$0 down'"
    ! ip -o -4 addr show | grep -q " $NET\." || die "$NET.0/24 is in use on this machine: set PUT_SLURM_NET"
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for k in $(seq "$NODES"); do
        local name; name=$(node_name "$k")
        ip netns add "$name"
        ip link add "${BRIDGE}v$k" type veth peer name eth0 netns "$name"
        ip link set "${BRIDGE}v$k" master "$BRIDGE" up
        ip netns exec "$name" ip addr add "$(node_addr "$k")/24" dev eth0
        ip netns exec "$name" ip link set eth0 up
        ip netns exec "$name" ip link set lo up
    done
    hosts_file >"$STATE/hosts"
}

start_nodes() {
    for k in $(seq "$NODES"); do
        local name; name=$(node_name "$k")
        mkdir -p "$STATE/spool/$name"
        # its network namespace, and its own host name and /etc/hosts (UTS and mount namespaces; not `ip netns
        # exec`, whose fresh /sys lacks the cgroup file system slurmd needs)
        nsenter --net="/run/netns/$name" unshare --uts --mount \
            sh -c "mount --bind $STATE/hosts /etc/hosts && hostname $name && exec slurmd -N $name"
    done
}

up() {
    install
    [ "$(id -u)" = 0 ] || die "the daemons run as root"
    [ ! -e "$STATE/slurmctld.pid" ] || die "$STATE holds a running cluster? run '$0 down' first"
    rm -rf "$STATE"; mkdir -p "$STATE/log"
    write_config
    log "munge";     start_munge
    log "mariadb";   start_mariadb
    log "slurmdbd";  slurmdbd
    wait_for 60 slurmdbd sacctmgr -i show cluster
    timeout 30 sacctmgr -i add cluster putci >/dev/null
    timeout 30 sacctmgr -i add account put Description=put Organization=put >/dev/null
    timeout 30 sacctmgr -i add user root Account=put DefaultAccount=put >/dev/null
    log "network";   start_network
    log "slurmctld"; unshare --uts sh -c "hostname $CONTROLLER && exec slurmctld"
    wait_for 30 slurmctld scontrol ping
    log "slurmd x $NODES"; start_nodes
    wait_for 60 "the nodes" \
        sh -c "[ \$(sinfo -h -N -p batch -o '%T' | grep -Ec '^(idle|mixed|allocated)') = $NODES ]"
    local seen
    seen=$(timeout 60 srun -p batch -t 1 -N "$NODES" --ntasks-per-node=1 hostname | sort | tr '\n' ' ') ||
        die "a first test job did not run; logs in $STATE/log"
    log "up: $(sinfo -h -o '%P %D %c %m %G %T' | tr '\n' ';') a first job ran on: $seen"
}

stop_namespace() {  # the processes left in a node's namespace (a job's), by pid; then the namespace
    local name=$1 pid
    ip netns list | grep -qw "$name" || return 0
    for pid in $(ip netns pids "$name"); do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 10); do [ -z "$(ip netns pids "$name")" ] && break; sleep 1; done
    for pid in $(ip netns pids "$name"); do log "$name: pid $pid ignored SIGTERM: SIGKILL"; kill -9 "$pid" || true; done
    ip netns delete "$name"
}

down() {
    [ -e "$ETC/slurm.conf" ] && timeout 20 scancel --user=root >/dev/null 2>&1 || true
    for k in $(seq "$NODES"); do stop_pid slurmd "$STATE/slurmd-$(node_name "$k").pid"; done
    stop_pid slurmctld "$STATE/slurmctld.pid"
    stop_pid slurmdbd "$STATE/slurmdbd.pid"
    stop_pid mariadbd "$STATE/mysql/mysql.pid"
    stop_pid munged "$STATE/munge/munged.pid"
    for k in $(seq "$NODES"); do stop_namespace "$(node_name "$k")"; done
    ! ip link show "$BRIDGE" >/dev/null 2>&1 || ip link delete "$BRIDGE"
    rm -f "$STATE"/*.pid "$STATE"/*/*.pid
    log "down (logs kept in $STATE/log)"
}

case "${1:-}" in
    install) install ;;
    up) up ;;
    down) down ;;
    address) echo "$NET.1" ;;
    *) echo "usage: $0 install|up|down|address" >&2; exit 2 ;;
esac
