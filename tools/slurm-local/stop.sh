#!/usr/bin/env bash
# Stop the local Slurm started by start.sh, in reverse start order:
#   slurmd (every node) -> slurmctld -> slurmdbd -> MariaDB -> munged
# then remove what start.sh made for the namespace nodes: their network
# namespaces, veth links, the bridge and the /etc/hosts lines.
# Only the processes named by the pid files under the state directory are
# stopped (a munged or MariaDB started by someone else is left alone). Each is
# sent TERM and waited for (30 s, then KILL). Exits 0 if nothing runs.
# State (database, spool, logs) is kept; remove SLURM_LOCAL_STATE to reset.
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/tmp/accelbench-slurm}
RUN=$STATE/run

say() { printf '[slurm-local] %s\n' "$*"; }

# alive PID: the process exists and is not a zombie (PID 1 may reap late or never).
alive() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z ]]
}

# stop_pid NAME PIDFILE
stop_pid() {
    local name=$1 pidfile=$2 pid comm i
    [[ -s $pidfile ]] || return 0
    pid=$(tr -dc '0-9' <"$pidfile")
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    if [[ -z $pid || $comm != "$name" ]] || ! alive "$pid"; then
        rm -f "$pidfile" # stale
        return 0
    fi
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        if ! alive "$pid"; then
            rm -f "$pidfile"
            return 0
        fi
        sleep 0.5
    done
    say "$name did not exit after 30 s, sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 10; i++)); do
        alive "$pid" || break
        sleep 0.5
    done
    rm -f "$pidfile"
}

[[ $(id -u) -eq 0 ]] || { echo "[slurm-local] ERROR: must run as root" >&2; exit 1; }

for pidfile in "$RUN"/slurmd-*.pid; do
    stop_pid slurmd "$pidfile"
done
stop_pid slurmctld "$RUN/slurmctld.pid"
stop_pid slurmdbd "$RUN/slurmdbd.pid"
stop_pid mariadbd "$STATE/mysql-run/mysqld.pid"
stop_pid munged "$STATE/munge/munged.pid"

# Namespace nodes. Deleting a namespace does not always delete the host end of its
# veth pair, so the links go one by one.
for ns in /run/netns/accelbench-node*; do
    [[ -e $ns ]] || continue
    say "removing network namespace ${ns##*/}"
    ip netns delete "${ns##*/}"
done
for link in $(ip -o link show | sed -n 's/^[0-9]*: \(abv[0-9]*\)[@:].*/\1/p'); do
    ip link delete "$link"
done
if ip link show abr0 >/dev/null 2>&1; then
    say "removing bridge abr0"
    ip link delete abr0
fi
if grep -q -- "# accelbench slurm-local" /etc/hosts; then
    hosts=$(grep -v -- "# accelbench slurm-local" /etc/hosts)
    printf '%s\n' "$hosts" >/etc/hosts
fi
say "Slurm stopped"
