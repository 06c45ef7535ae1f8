#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for testing the recipes in slurm/.
#
#   bash slurm/cluster/local-slurm.sh start    # install (if needed), configure, start, wait idle
#   bash slurm/cluster/local-slurm.sh status   # daemons and sinfo
#   bash slurm/cluster/local-slurm.sh stop     # cancel jobs, stop the daemons
#
# `start` prints `export SLURM_CONF=...`; eval it (or pass SLURM_CONF) before sbatch/sinfo.
# Everything lives in a scratch folder ($MDLOADER_SLURM_DIR, default ~/.cache/mdloader-slurm):
# a private munge key and socket, slurm.conf, state, spool, pid and log files, so nothing in
# /etc is touched and a stop/start leaves no stale state behind. Both commands are idempotent.
# The daemons run as root from that folder's key and config, so it must be yours alone: it is
# made with mode 700, and a folder that is a link, belongs to another user or that others may
# write (a fixed name in /tmp that someone else made first) is refused in one line.
#
# Trade-offs: loopback addresses only (works even when the host name does not resolve); root
# only (SlurmUser=root keeps the setup to one user); proctrack/linuxproc and task/none because
# containers rarely give a usable cgroup tree (no CPU binding or memory enforcement, fine for
# tests); CPUs and memory come from `slurmd -C`, so a job with more tasks
# than cores needs `#SBATCH --overcommit` (with --oversubscribe it would stay pending).
#
# Settings (environment): MDLOADER_SLURM_DIR, MDLOADER_SLURM_PORT (slurmctld, default 6817;
# slurmd uses PORT+1), MDLOADER_SLURM_PARTITION (default "debug"), MDLOADER_SLURM_CPUS
# (default: as detected), MDLOADER_SLURM_TIMEOUT (seconds to wait for idle, default 60).
set -euo pipefail

DIR=${MDLOADER_SLURM_DIR:-${HOME:?HOME is not set; set MDLOADER_SLURM_DIR}/.cache/mdloader-slurm}
PORT=${MDLOADER_SLURM_PORT:-6817}
PARTITION=${MDLOADER_SLURM_PARTITION:-debug}
TIMEOUT=${MDLOADER_SLURM_TIMEOUT:-60}
CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket.2
export SLURM_CONF=$CONF

die() { echo "local-slurm: error: $*" >&2; exit 1; }
say() { echo "local-slurm: $*" >&2; }

# The folder must be this user's alone (see the header); `create` makes it (mode 700) if missing.
private_dir() {
    local owner mode
    [[ -L $DIR ]] && die "$DIR is a symbolic link; set MDLOADER_SLURM_DIR to a folder of your own"
    if [[ ! -e $DIR ]]; then
        [[ ${1:-} == create ]] || return 0
        mkdir -p "$(dirname "$DIR")" && mkdir -m 700 "$DIR" || die "cannot make $DIR"
    fi
    [[ -d $DIR ]] || die "$DIR is not a folder; set MDLOADER_SLURM_DIR to a folder of your own"
    owner=$(stat -c %u "$DIR")
    mode=$(stat -c %a "$DIR")
    [[ $owner == "$(id -u)" ]] || die "$DIR belongs to uid $owner, not to you (uid $(id -u)): \
set MDLOADER_SLURM_DIR to a folder of your own"
    (( (8#$mode & 8#022) == 0 )) || die "$DIR is writable by others (mode $mode): chmod 700 it \
or set MDLOADER_SLURM_DIR to a folder of your own"
}

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (SlurmUser=root, munged as root); try sudo"
}

install_packages() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
    say "installing slurm-wlm and munge (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
    if ! apt-cache show slurm-wlm >/dev/null 2>&1; then
        "${apt[@]}" update >/dev/null || die "apt-get update failed"
    fi
    "${apt[@]}" install slurm-wlm munge >/dev/null \
        || die "apt-get install slurm-wlm munge failed (is this Debian/Ubuntu with network?)"
}

# pid of daemon NAME from its pid file, if that process is alive and is NAME (a stale file's
# pid may belong to another process by now: never signal that one)
alive_pid() {
    local name=$1 file=$DIR/run/$1.pid pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 1
    echo "$pid"
}

write_munge_key() {
    mkdir -p "$DIR/munge"
    chmod 700 "$DIR/munge"
    if [[ ! -s $DIR/munge/munge.key ]]; then
        head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
        chmod 400 "$DIR/munge/munge.key"
    fi
}

node_line() {
    local host=$1 detected cpus mem
    detected=$(slurmd -C 2>/dev/null | head -n 1) || die "slurmd -C failed"
    cpus=$(grep -o 'CPUs=[0-9]*' <<<"$detected" | cut -d= -f2)
    mem=$(grep -o 'RealMemory=[0-9]*' <<<"$detected" | cut -d= -f2)
    cpus=${MDLOADER_SLURM_CPUS:-${cpus:-2}}
    echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=${mem:-1000} State=UNKNOWN"
}

write_conf() {
    local host=$1
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run"
    cat >"$CONF" <<EOF
# Written by slurm/cluster/local-slurm.sh: a one-node test cluster (do not use in production).
ClusterName=mdloader
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=5
$(node_line "$host")
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munged() {
    alive_pid munged >/dev/null && return 0
    munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" 2>>"$DIR/log/munged.err" \
        || die "munged did not start; see $DIR/log/munged.log"
}

start_slurm_daemons() {
    if ! alive_pid slurmctld >/dev/null; then
        slurmctld -f "$CONF" -i || die "slurmctld did not start; see $DIR/log/slurmctld.log"
    fi
    if ! alive_pid slurmd >/dev/null; then
        slurmd -f "$CONF" || die "slurmd did not start; see $DIR/log/slurmd.log"
    fi
}

wait_idle() {
    local deadline=$((SECONDS + TIMEOUT)) state=""
    while ((SECONDS < deadline)); do
        state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n 1 || true)
        case $state in
            idle*|mix*|alloc*) return 0 ;;
        esac
        sleep 1
    done
    die "node not idle after ${TIMEOUT}s (state '${state:-no answer}'); see $DIR/log/"
}

cmd_start() {
    require_root
    install_packages
    local host
    host=$(hostname -s)
    write_munge_key
    # Rewrite the config only when no daemon is using it (a running cluster keeps its own).
    if ! alive_pid slurmctld >/dev/null; then
        write_conf "$host"
    fi
    start_munged
    start_slurm_daemons
    wait_idle
    say "one-node cluster up: node $host, partition $PARTITION, files in $DIR"
    echo "export SLURM_CONF=$CONF"
}

stop_daemon() {
    local name=$1 pid
    pid=$(alive_pid "$name") || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$DIR/run/$name.pid"; return 0; }
        sleep 0.2
    done
    say "$name ($pid) ignored SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$DIR/run/$name.pid"
}

cmd_stop() {
    if alive_pid slurmctld >/dev/null; then
        scancel --quiet --partition="$PARTITION" 2>/dev/null || true
        # Give slurmd a moment to kill the job steps it owns before it goes away itself.
        for _ in $(seq 20); do
            [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.5
        done
    fi
    stop_daemon slurmd
    stop_daemon slurmctld
    stop_daemon munged
    say "stopped (files kept in $DIR)"
}

cmd_status() {
    local name pid rc=0
    for name in munged slurmctld slurmd; do
        if pid=$(alive_pid "$name"); then
            echo "$name: running (pid $pid)"
        else
            echo "$name: stopped"
            rc=3
        fi
    done
    if ((rc == 0)); then
        sinfo || rc=3
    fi
    return "$rc"
}

case ${1:-} in
    start|stop|status) private_dir "$([[ $1 == start ]] && echo create)" ;;
esac
case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
