#!/usr/bin/env bash
# Install (if needed) and start a local Slurm with accounting: node `localhost` on
# loopback, and two more compute nodes (node1, node2), each slurmd in its own network
# namespace with its own address on a private bridge, so multi-node jobs span hosts.
#
# Daemons, started in this order, each waited for until it answers:
#   munged -> MariaDB -> slurmdbd -> slurmctld -> slurmd (localhost, node1, node2)
# Running the script again while everything answers is a quick no-op; a daemon
# that is down is (re)started, and a changed configuration restarts the daemons
# that read it.
#
# Environment:
#   SLURM_LOCAL_STATE          state/log directory   (default /var/tmp/accelbench-slurm)
#   SLURM_LOCAL_CPU_PARTITION  default partition     (default medium)
#   SLURM_LOCAL_GPU_PARTITION  partition for GPU use (default gpu)
#   SLURM_LOCAL_NETNS_NODES    nodes in network namespaces (default 2; 0: localhost only)
#   SLURM_LOCAL_MULTINODE_PARTITION  partition of those nodes (default multinode)
#
# Why the less obvious settings are there:
# - No systemd here: package scripts cannot start services, so every daemon is
#   started by hand. Configs live in /etc/slurm so plain sbatch/sinfo/sacct work
#   without SLURM_CONF.
# - SlurmctldHost=localhost(127.0.0.1), NodeName=localhost NodeAddr=127.0.0.1 and
#   `slurmd -N localhost`: everything goes over loopback, whatever the hostname.
# - ProctrackType=proctrack/linuxproc, TaskPlugin=task/none: no usable cgroups.
# - DefMemPerCPU=1000: without it a job that asks for no memory gets the whole
#   node and jobs run one at a time.
# - Gres=gpu:2 with gres.conf File= pointing at char devices (mknod c 1 3, same
#   as /dev/null): Slurm 22.05 drains a node whose gres.conf has no File=
#   ("gres/gpu count reported lower than configured"). With File=, GPU jobs get
#   CUDA_VISIBLE_DEVICES and concurrent jobs get different indices.
# - RealMemory is `slurmd -C` minus ~10%: a node reporting less memory than
#   configured is drained.
# - slurmdbd + MariaDB: sacct (used for job status by the Snakemake Slurm
#   executor) fails without accounting storage. MariaDB runs its own instance
#   (data dir in the state directory) with --skip-networking; slurmdbd finds its
#   socket through MYSQL_UNIX_PORT. A MariaDB or munged that the package
#   scripts may have started elsewhere does not get in the way.
# - AutoDetect=off in gres.conf: the fake devices must not be probed.
# - Short SlurmctldTimeout/SlurmdTimeout/KillWait and MinJobAge=120: problems
#   show up quickly in tests; finished jobs stay visible to sacct via slurmdbd.
# - ReturnToService=2: a node marked DOWN (e.g. slurmd was stopped) returns on
#   its next valid registration; a DRAINed node is resumed explicitly below.
# - Slurm daemons run as root (SlurmUser=root): single-user test machine, and
#   it avoids ownership juggling in the state directory.
# - Namespace nodes: bridge abr0 (10.213.0.1/24) in the host namespace, one
#   namespace accelbench-nodeI per node with a veth pair (abvI on the bridge, eth0
#   with 10.213.0.(10+I) inside), no route out: their traffic stays on the bridge.
#   Each slurmd also gets its own UTS namespace with hostname nodeI, and /etc/hosts
#   maps the names: srun and torch.distributed find a node's address from its
#   hostname. The daemons reach slurmctld and slurmdbd at the bridge address, so
#   SlurmctldHost and AccountingStorageHost name 10.213.0.1. Namespaces are entered
#   with nsenter, not `ip netns exec` (which remounts /sys and breaks slurmd).
#   The nodes share this machine's cores; each declares a quarter of its memory.
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/tmp/accelbench-slurm}
CPU_PART=${SLURM_LOCAL_CPU_PARTITION:-medium}
GPU_PART=${SLURM_LOCAL_GPU_PARTITION:-gpu}
CLUSTER=accelbench
ACCOUNT=accelbench
NODE=localhost
NETNS_NODES=${SLURM_LOCAL_NETNS_NODES:-2}
MULTI_PART=${SLURM_LOCAL_MULTINODE_PARTITION:-multinode}
BRIDGE=abr0
SUBNET=10.213.0
HOSTS_MARK="# accelbench slurm-local"
NGPUS=2
CONF_DIR=/etc/slurm
# environment-modules: a site's `module load`, for workflows run with --sdm env-modules.
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server environment-modules)

LOG=$STATE/log
RUN=$STATE/run
MUNGE_DIR=$STATE/munge
DB_DATA=$STATE/mysql
DB_RUN=$STATE/mysql-run
DB_SOCK=$DB_RUN/mysqld.sock
DB_PASS_FILE=$STATE/slurmdbd.pass
export MYSQL_UNIX_PORT=$DB_SOCK

say() { printf '[slurm-local] %s\n' "$*"; }
die() { printf '[slurm-local] ERROR: %s\n' "$*" >&2; exit 1; }

# Print the end of a log file to stderr (used on failures).
show_log() {
    local f
    for f in "$@"; do
        [[ -f $f ]] || continue
        printf -- '----- last lines of %s -----\n' "$f" >&2
        tail -n 40 "$f" >&2 || true
    done
}

fail() { # fail MESSAGE LOGFILE...
    local msg=$1
    shift
    show_log "$@"
    die "$msg"
}

# alive PID: the process exists and is not a zombie (PID 1 may reap late or never).
alive() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z ]]
}

# pid_of NAME PIDFILE: print the pid if PIDFILE names a live process called NAME.
pid_of() {
    local name=$1 pidfile=$2 pid comm
    [[ -s $pidfile ]] || return 1
    pid=$(tr -dc '0-9' <"$pidfile")
    [[ -n $pid ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$name" ]] && alive "$pid" || return 1
    echo "$pid"
}

# stop_pid NAME PIDFILE: TERM, wait up to 30 s, then KILL.
stop_pid() {
    local name=$1 pidfile=$2 pid i
    pid=$(pid_of "$name" "$pidfile") || { rm -f "$pidfile"; return 0; }
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        alive "$pid" || { rm -f "$pidfile"; return 0; }
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

# port_in_use PORT: something listens on TCP PORT (IPv4 or IPv6).
port_in_use() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# check_port NAME PORT: refuse to start NAME if another process holds its port
# (e.g. an instance started with a different SLURM_LOCAL_STATE).
check_port() {
    if port_in_use "$2"; then
        die "port $2 for $1 is in use by a process not started from $STATE; stop it first"
    fi
}

# wait_until SECONDS NAME PIDFILE LOGFILE CMD...: poll until CMD succeeds and
# the daemon named by PIDFILE runs. Gives up early if the daemon's process is
# gone (after a short grace period: some daemons fork before writing it).
wait_until() {
    local secs=$1 name=$2 pidfile=$3 logfile=$4
    shift 4
    local deadline=$((SECONDS + secs)) grace=$((SECONDS + 5))
    until "$@" >/dev/null 2>&1 && pid_of "$name" "$pidfile" >/dev/null; do
        if ((SECONDS >= deadline)); then
            fail "$name did not answer within ${secs} s" "$logfile"
        fi
        if ((SECONDS >= grace)) && ! pid_of "$name" "$pidfile" >/dev/null; then
            fail "$name is not running (see log)" "$logfile"
        fi
        sleep 0.5
    done
}

[[ $(id -u) -eq 0 ]] || die "must run as root"

# ---------------------------------------------------------------- packages
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    say "installing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Lock timeout: another apt/dpkg run may still be going on.
    timeout 600 apt-get -o DPkg::Lock::Timeout=300 update -qq
    timeout 900 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${PACKAGES[@]}"
fi

# Before touching any config: the Slurm ports must be free or held by the
# daemons of this state directory.
pid_of slurmdbd "$RUN/slurmdbd.pid" >/dev/null || check_port slurmdbd 6819
pid_of slurmctld "$RUN/slurmctld.pid" >/dev/null || check_port slurmctld 6817
pid_of slurmd "$RUN/slurmd-$NODE.pid" >/dev/null || check_port slurmd 6818

# ------------------------------------------------------------- state dirs
[[ $STATE == /* && $STATE != *[[:space:]]* ]] || die "SLURM_LOCAL_STATE must be an absolute path without spaces"
case $CPU_PART$GPU_PART$MULTI_PART in *[!A-Za-z0-9_-]*) die "partition names must be [A-Za-z0-9_-]" ;; esac
[[ -n $CPU_PART && -n $GPU_PART && -n $MULTI_PART && $CPU_PART != "$GPU_PART" &&
    $MULTI_PART != "$CPU_PART" && $MULTI_PART != "$GPU_PART" ]] ||
    die "the partition names must be distinct and non-empty"
[[ $NETNS_NODES =~ ^[0-9]$ ]] || die "SLURM_LOCAL_NETNS_NODES must be 0..9"

mkdir -p "$STATE" "$LOG" "$RUN" "$STATE/spool/slurmctld" "$STATE/spool/slurmd" "$STATE/dev" "$CONF_DIR"
chmod 755 "$STATE" "$LOG" "$RUN"
install -d -o munge -g munge -m 700 "$MUNGE_DIR"
install -d -o munge -g munge -m 755 /run/munge
install -d -o mysql -g mysql -m 750 "$DB_DATA"
install -d -o mysql -g mysql -m 755 "$DB_RUN"
[[ -e $LOG/munged.log ]] || install -o munge -g munge -m 640 /dev/null "$LOG/munged.log"
[[ -e $LOG/mariadb.log ]] || install -o mysql -g mysql -m 640 /dev/null "$LOG/mariadb.log"

for ((i = 0; i < NGPUS; i++)); do
    dev=$STATE/dev/nvidia$i
    if [[ ! -c $dev ]]; then
        rm -f "$dev"
        mknod "$dev" c 1 3 || die "mknod $dev failed (needs CAP_MKNOD)"
    fi
done

if [[ ! -s $DB_PASS_FILE ]]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$DB_PASS_FILE")
fi
DB_PASS=$(cat "$DB_PASS_FILE")

# ----------------------------------------------------------------- network
# ensure_node_network I: namespace accelbench-nodeI on the bridge at SUBNET.(10+I).
ensure_node_network() {
    local i=$1 ns=accelbench-node$1 veth=abv$1
    [[ -e /run/netns/$ns ]] || ip netns add "$ns"
    if ! ip link show "$veth" >/dev/null 2>&1; then
        ip link add "$veth" type veth peer name eth0 netns "$ns"
    fi
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    nsenter --net="/run/netns/$ns" ip link set lo up
    nsenter --net="/run/netns/$ns" ip link set eth0 up
    nsenter --net="/run/netns/$ns" ip -4 addr show dev eth0 | grep -q "inet $SUBNET.$((10 + i))/" ||
        nsenter --net="/run/netns/$ns" ip addr add "$SUBNET.$((10 + i))/24" dev eth0
}
CTLD_ADDR=127.0.0.1
if ((NETNS_NODES > 0)); then
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        say "creating bridge $BRIDGE ($SUBNET.1/24) and $NETNS_NODES node namespaces"
        ip link add "$BRIDGE" type bridge || die "cannot create a bridge (needs CAP_NET_ADMIN)"
    fi
    ip -4 addr show dev "$BRIDGE" | grep -q "inet $SUBNET.1/" || ip addr add "$SUBNET.1/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for ((i = 1; i <= NETNS_NODES; i++)); do
        ensure_node_network "$i"
    done
    CTLD_ADDR=$SUBNET.1
fi
# Node names resolve to their bridge addresses, for every process on this machine.
hosts=$(grep -v -- "$HOSTS_MARK" /etc/hosts || true)
for ((i = 1; i <= NETNS_NODES; i++)); do
    hosts+=$'\n'"$SUBNET.$((10 + i)) node$i $HOSTS_MARK"
done
[[ $hosts == "$(cat /etc/hosts)" ]] || printf '%s\n' "$hosts" >/etc/hosts

# ------------------------------------------------------------------ config
# Node shape from the hardware; memory with ~10% headroom.
hw=$(timeout 20 slurmd -C | head -n 1) || die "slurmd -C failed"
node_shape=$(tr ' ' '\n' <<<"$hw" | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
mem=$(tr ' ' '\n' <<<"$hw" | sed -n 's/^RealMemory=//p')
[[ -n $node_shape && -n $mem ]] || die "could not parse 'slurmd -C' output: $hw"
mem=$((mem * 9 / 10))
gpu_last=$((NGPUS - 1))

# The namespace nodes come first: slurmctld 22.05 takes any node name for the only
# node while that one is called localhost ("Duplicated NodeHostName node1").
node_lines() {
    for ((i = 1; i <= NETNS_NODES; i++)); do
        echo "NodeName=node$i NodeAddr=$SUBNET.$((10 + i)) ${node_shape}RealMemory=$((mem / 4)) Gres=gpu:$NGPUS State=UNKNOWN"
    done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/slurm.conf" <<EOF
# Generated by tools/slurm-local/start.sh; edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=localhost($CTLD_ADDR)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=$STATE/spool/slurmctld
SlurmdSpoolDir=$STATE/spool/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
GresTypes=gpu
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=120
Waittime=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$CTLD_ADDR
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
$(node_lines)
NodeName=$NODE NodeAddr=127.0.0.1 ${node_shape}RealMemory=$mem Gres=gpu:$NGPUS State=UNKNOWN
PartitionName=$CPU_PART Nodes=$NODE Default=YES MaxTime=1-00:00:00 State=UP
PartitionName=$GPU_PART Nodes=$NODE Default=NO MaxTime=1-00:00:00 State=UP
EOF
if ((NETNS_NODES > 0)); then
    echo "PartitionName=$MULTI_PART Nodes=node[1-$NETNS_NODES] Default=NO MaxTime=1-00:00:00 State=UP" >>"$tmp/slurm.conf"
fi

cat >"$tmp/gres.conf" <<EOF
# Generated by tools/slurm-local/start.sh; edits are overwritten.
AutoDetect=off
NodeName=$NODE Name=gpu File=$STATE/dev/nvidia[0-$gpu_last]
EOF
if ((NETNS_NODES > 0)); then
    echo "NodeName=node[1-$NETNS_NODES] Name=gpu File=$STATE/dev/nvidia[0-$gpu_last]" >>"$tmp/gres.conf"
fi

cat >"$tmp/slurmdbd.conf" <<EOF
# Generated by tools/slurm-local/start.sh; edits are overwritten.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF

# install_conf NAME MODE: copy if changed; returns 0 when the file changed.
install_conf() {
    local name=$1 mode=$2
    if [[ -f $CONF_DIR/$name ]] && cmp -s "$tmp/$name" "$CONF_DIR/$name"; then
        chmod "$mode" "$CONF_DIR/$name"
        return 1
    fi
    install -m "$mode" "$tmp/$name" "$CONF_DIR/$name"
    return 0
}
slurm_changed=0
dbd_changed=0
install_conf slurm.conf 644 && slurm_changed=1
install_conf gres.conf 644 && slurm_changed=1
install_conf slurmdbd.conf 600 && dbd_changed=1 # slurmdbd refuses a readable file

if ((slurm_changed)); then
    # Daemons started with the old configuration must pick up the new one.
    for pidfile in "$RUN"/slurmd-*.pid; do
        stop_pid slurmd "$pidfile"
    done
    stop_pid slurmctld "$RUN/slurmctld.pid"
fi
((dbd_changed)) && stop_pid slurmdbd "$RUN/slurmdbd.pid"

# ------------------------------------------------------------------ munged
munge_ok() { timeout 5 munge -n </dev/null | timeout 5 unmunge >/dev/null; }
if ! munge_ok 2>/dev/null; then
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating munge key"
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 600 /etc/munge/munge.key
    fi
    stop_pid munged "$MUNGE_DIR/munged.pid"
    say "starting munged"
    timeout 30 runuser -u munge -- /usr/sbin/munged \
        --pid-file="$MUNGE_DIR/munged.pid" --seed-file="$MUNGE_DIR/munged.seed" \
        --log-file="$LOG/munged.log" </dev/null >>"$LOG/munged.log" 2>&1 ||
        fail "munged failed to start" "$LOG/munged.log"
    wait_until 20 munged "$MUNGE_DIR/munged.pid" "$LOG/munged.log" munge_ok
fi

# ----------------------------------------------------------------- MariaDB
db_ok() { timeout 5 mariadb-admin --no-defaults --socket="$DB_SOCK" -uroot ping; }
if ! db_ok >/dev/null 2>&1; then
    stop_pid mariadbd "$DB_RUN/mysqld.pid"
    if [[ ! -d $DB_DATA/mysql ]]; then
        say "initialising MariaDB data directory"
        timeout 120 mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DATA" \
            --auth-root-authentication-method=socket --skip-test-db \
            >>"$LOG/mariadb-install.log" 2>&1 ||
            fail "mariadb-install-db failed" "$LOG/mariadb-install.log"
    fi
    say "starting MariaDB"
    # Buffer pool, log file size and lock wait: slurmdbd logs an error when they
    # are below what it recommends (buffer pool memory is committed only as used).
    setsid -f /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB_DATA" \
        --socket="$DB_SOCK" --pid-file="$DB_RUN/mysqld.pid" --skip-networking \
        --log-error="$LOG/mariadb.log" \
        --innodb-buffer-pool-size=1G --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900 </dev/null >>"$LOG/mariadb.log" 2>&1
    wait_until 60 mariadbd "$DB_RUN/mysqld.pid" "$LOG/mariadb.log" db_ok
fi
timeout 30 mariadb --no-defaults --socket="$DB_SOCK" -uroot <<EOF || fail "could not create the slurm database/user" "$LOG/mariadb.log"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF

# ---------------------------------------------------------------- slurmdbd
dbd_ok() { timeout 10 sacctmgr -n -P show cluster format=cluster; }
if ! pid_of slurmdbd "$RUN/slurmdbd.pid" >/dev/null || ! dbd_ok >/dev/null 2>&1; then
    stop_pid slurmdbd "$RUN/slurmdbd.pid"
    check_port slurmdbd 6819
    say "starting slurmdbd"
    timeout 60 /usr/sbin/slurmdbd </dev/null >>"$LOG/slurmdbd.log" 2>&1 ||
        fail "slurmdbd failed to start" "$LOG/slurmdbd.log" "$LOG/mariadb.log"
    wait_until 60 slurmdbd "$RUN/slurmdbd.pid" "$LOG/slurmdbd.log" dbd_ok
fi
clusters=$(dbd_ok 2>/dev/null || true)
if ! grep -qx "$CLUSTER" <<<"$clusters"; then
    say "registering cluster $CLUSTER"
    timeout 30 sacctmgr -i add cluster "$CLUSTER" >/dev/null ||
        fail "sacctmgr add cluster failed" "$LOG/slurmdbd.log"
fi

# --------------------------------------------------------------- slurmctld
ctld_ok() {
    local out
    out=$(timeout 10 scontrol ping) && [[ $out == *"is UP"* ]]
}
if ! pid_of slurmctld "$RUN/slurmctld.pid" >/dev/null || ! ctld_ok 2>/dev/null; then
    stop_pid slurmctld "$RUN/slurmctld.pid"
    check_port slurmctld 6817
    say "starting slurmctld"
    timeout 60 /usr/sbin/slurmctld </dev/null >>"$LOG/slurmctld.log" 2>&1 ||
        fail "slurmctld failed to start" "$LOG/slurmctld.log"
    wait_until 60 slurmctld "$RUN/slurmctld.pid" "$LOG/slurmctld.log" ctld_ok
fi

# ------------------------------------------------------------------ slurmd
# start_slurmd NODE [NAMESPACE]: localhost in this namespace; a namespace node in its
# network namespace and a UTS namespace of its own whose hostname is the node's name.
start_slurmd() {
    local node=$1 ns=${2:-}
    pid_of slurmd "$RUN/slurmd-$node.pid" >/dev/null && return 0
    say "starting slurmd for $node${ns:+ in namespace $ns}"
    if [[ -z $ns ]]; then
        check_port slurmd 6818
        timeout 60 /usr/sbin/slurmd -N "$node" </dev/null >>"$LOG/slurmd-$node.log" 2>&1 ||
            fail "slurmd for $node failed to start" "$LOG/slurmd-$node.log"
    else
        timeout 60 nsenter --net="/run/netns/$ns" unshare --uts \
            sh -c 'hostname "$1" && exec /usr/sbin/slurmd -N "$1"' slurmd "$node" \
            </dev/null >>"$LOG/slurmd-$node.log" 2>&1 ||
            fail "slurmd for $node failed to start" "$LOG/slurmd-$node.log"
    fi
}
node_state() { timeout 10 scontrol -o show node "$1" | sed -n 's/.* State=\([^ ]*\).*/\1/p'; }
# wait_for_node NODE: until slurmctld has the node up, resuming it if an earlier bad
# registration or slurmd restart left it drained or down.
wait_for_node() {
    local node=$1 st started=$SECONDS deadline=$((SECONDS + 60)) resumed_at=-100
    while :; do
        st=$(node_state "$node" 2>/dev/null || true)
        case $st in
            *DRAIN* | *DOWN* | *FAIL*)
                if ((SECONDS - resumed_at >= 5)); then
                    say "node $node state $st, resuming"
                    timeout 10 scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
                    resumed_at=$SECONDS
                fi
                ;;
            IDLE* | MIXED* | ALLOCATED* | COMPLETING*)
                [[ $st == *NOT_RESPONDING* ]] || return 0
                ;;
        esac
        if ((SECONDS >= deadline)); then
            timeout 10 scontrol show node "$node" >&2 || true
            fail "node $node not usable (state '${st:-?}')" "$LOG/slurmd-$node.log" "$LOG/slurmctld.log"
        fi
        if ((SECONDS - started >= 5)) && ! pid_of slurmd "$RUN/slurmd-$node.pid" >/dev/null; then
            fail "slurmd for $node is not running (see log)" "$LOG/slurmd-$node.log"
        fi
        sleep 0.5
    done
}
start_slurmd "$NODE"
for ((i = 1; i <= NETNS_NODES; i++)); do
    start_slurmd "node$i" "accelbench-node$i"
done
wait_for_node "$NODE"
for ((i = 1; i <= NETNS_NODES; i++)); do
    wait_for_node "node$i"
done

# --------------------------------------------------------------- accounts
if [[ -z $(timeout 10 sacctmgr -n -P show account "$ACCOUNT" format=account) ]]; then
    say "adding account $ACCOUNT"
    timeout 30 sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" \
        description="accelbench tests" organization=accelbench >/dev/null ||
        fail "sacctmgr add account failed" "$LOG/slurmdbd.log"
fi
if [[ -z $(timeout 10 sacctmgr -n -P show assoc where cluster="$CLUSTER" account="$ACCOUNT" user=root format=user) ]]; then
    say "adding user root to account $ACCOUNT"
    timeout 30 sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null ||
        fail "sacctmgr add user failed" "$LOG/slurmdbd.log"
fi

timeout 10 sinfo
multi=""
((NETNS_NODES > 0)) && multi=", $MULTI_PART (node[1-$NETNS_NODES])"
say "Slurm ready: cluster $CLUSTER, partitions $CPU_PART (default), $GPU_PART$multi, state in $STATE"
