#!/bin/sh
# slurm.sh: a real one-node Slurm (Debian's slurmctld, slurmd and munge) for tests, private to one directory.
#
#   tests/cluster/slurm.sh up DIR      # starts munged, slurmctld and slurmd; prints "export SLURM_CONF=DIR/slurm.conf"
#   tests/cluster/slurm.sh down DIR    # stops them and removes DIR
#
# DIR must not exist yet; it is created 0700. Everything lives in it: the munge key and socket, slurm.conf,
# state, spool, logs and pid files; the daemons listen on free ports picked at start. The node declares 4 CPUs
# whatever the machine has (SlurmdParameters=config_overrides), so `srun -n 4` runs on a 2-core machine.
# Nothing is installed or changed outside DIR; `down` leaves no process and no file.
set -eu
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up|down DIR" >&2; exit 2; }

stop() {
    for p in slurmd slurmctld; do
        kill "$(cat "$dir/$p.pid" 2>/dev/null)" 2>/dev/null || true
    done
    kill "$(cat "$dir/munge/pid" 2>/dev/null)" 2>/dev/null || true
    # wait (bounded) for the daemons and any job step of theirs to go
    for i in $(seq 50); do
        alive=0
        for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
            kill -0 "$(cat "$f" 2>/dev/null)" 2>/dev/null && alive=1
        done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
        kill -9 "$(cat "$f" 2>/dev/null)" 2>/dev/null || true
    done
}

case "$cmd" in
up)
    [ ! -e "$dir" ] || { echo "slurm.sh: $dir exists; give a new directory" >&2; exit 2; }
    for b in munged slurmctld slurmd srun sbatch sinfo; do
        command -v $b >/dev/null || { echo "slurm.sh: $b not found: apt-get install slurmctld slurmd slurm-client munge" >&2; exit 2; }
    done
    mkdir -m 700 "$dir"
    mkdir -m 700 "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
    head -c 128 /dev/urandom > "$dir/munge/munge.key"
    chmod 600 "$dir/munge/munge.key"
    munged -f --socket="$dir/munge/sock" --key-file="$dir/munge/munge.key" --log-file="$dir/log/munged.log" \
        --pid-file="$dir/munge/pid" --seed-file="$dir/munge/seed"
    ports=$(/usr/bin/python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
    set -- $ports
    host=$(hostname)
    cat > "$dir/slurm.conf" <<CONF
ClusterName=batontest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmctldPort=$1
SlurmdPort=$2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=batontest Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
    export SLURM_CONF="$dir/slurm.conf"
    if ! slurmctld -f "$SLURM_CONF" || ! slurmd -f "$SLURM_CONF"; then
        stop; rm -rf "$dir"; echo "slurm.sh: the daemons did not start" >&2; exit 1
    fi
    for i in $(seq 100); do
        sinfo -h -o %T 2>/dev/null | grep -qx idle && { echo "export SLURM_CONF=$SLURM_CONF"; exit 0; }
        sleep 0.1
    done
    echo "slurm.sh: the node did not become idle within 10 s; logs in $dir/log:" >&2
    tail -n 5 "$dir"/log/*.log >&2 || true
    stop; rm -rf "$dir"; exit 1
    ;;
down)
    [ -d "$dir" ] || exit 0
    stop
    rm -rf "$dir"
    ;;
*) echo "usage: $0 up|down DIR" >&2; exit 2 ;;
esac
