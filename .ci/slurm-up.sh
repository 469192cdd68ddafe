#!/usr/bin/env bash
# Start a one-node SLURM on this machine (Debian 12, as root), for the tests of
# `tlstm-bench sweep --executor slurm` (tests/test_slurm.py). CI runs it from .ci/run;
# on a developer's Debian machine: `sudo .ci/slurm-up.sh`.
#
# What it does, each step skipped when already done (running it twice is fine):
#   1. apt-get installs slurmctld, slurmd, slurm-client and munge (no recommends).
#   2. Makes a munge key and starts munged (SLURM authenticates every RPC with it).
#   3. Writes /etc/slurm/slurm.conf: one node, this machine, with the CPUs and memory that
#      `slurmd -C` reports; process tracking and task plugins that need no cgroups and no
#      systemd (proctrack/linuxproc, task/none), so it works in a container; no accounting
#      database (so no `sacct`); root is the SLURM user.
#   4. Starts slurmctld and slurmd (restarted if the config changed) and waits until `sinfo`
#      shows the node idle; on timeout prints the daemons' logs and exits 1.
#
# Environment: SLURM_UP_TIMEOUT (seconds to wait for the node, default 90).
set -euo pipefail

timeout_s=${SLURM_UP_TIMEOUT:-90}
conf_dir=/etc/slurm
conf=$conf_dir/slurm.conf
log_dir=/var/log/slurm
run_dir=/run/slurm
partition=ci

say() { echo "slurm-up: $*"; }
die() { echo "slurm-up: error: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
    die "must run as root (it installs packages and starts daemons): sudo $0"
fi

# ---- 1. packages ---------------------------------------------------------------------------------
packages=(slurmctld slurmd slurm-client munge)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sinfo >/dev/null \
        || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || die "no apt-get here: install ${packages[*]} by hand"
    say "installing ${packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$(mktemp)
    # The packages' postinst would start the daemons through their init scripts, unconfigured (and
    # fail the install): forbid that for the install, as Docker images do; this script starts them.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
    fi
    apt_install() {
        apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${packages[@]}" >"$apt_log" 2>&1
    }
    # A clean machine may have no package lists yet: update only when the install needs it.
    installed=1
    if ! apt_install; then
        if ! { apt-get update -qq >"$apt_log" 2>&1 && apt_install; }; then
            installed=0
        fi
    fi
    if [ "$installed" = 0 ]; then
        cat "$apt_log" >&2
        die "apt-get could not install ${packages[*]} (its output is above)"
    fi
    rm -f "$apt_log"
fi

# ---- 2. munge ----------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
    say "making a munge key"
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.1
    done
    munge -n | unmunge >/dev/null || die "munged does not answer; see /var/log/munge/munged.log"
fi

# ---- 3. slurm.conf -------------------------------------------------------------------------------
host=$(hostname -s)
# `slurmd -C` prints this node's real hardware as a NodeName line (CPUs, sockets, cores, memory).
node_line=$(slurmd -C | grep '^NodeName=') || die "slurmd -C printed no NodeName line"
case "$node_line" in
    "NodeName=$host "*) ;;
    *) die "slurmd -C names another host than \`hostname -s\` ($host): $node_line" ;;
esac
mkdir -p "$conf_dir" "$log_dir" "$run_dir" /var/spool/slurmctld /var/spool/slurmd
new_conf=$(cat <<EOF
# Written by tlstm-bench's .ci/slurm-up.sh: a one-node SLURM for the tests.
ClusterName=tlstm-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# No cgroups and no systemd in a CI container: track processes by parent pid, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Cores are the consumable resource (memory is not), so small jobs share the node.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$run_dir/slurmctld.pid
SlurmdPidFile=$run_dir/slurmd.pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd.log
$node_line State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
)
changed=0
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$new_conf" ]; then
    say "writing $conf ($node_line)"
    printf '%s\n' "$new_conf" > "$conf"
    changed=1
fi

# ---- 4. daemons --------------------------------------------------------------------------------
running() {  # running NAME: its pid file names a live process of that name
    local pid
    pid=$(cat "$run_dir/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}
stop() {
    local pid
    running "$1" || return 0
    pid=$(cat "$run_dir/$1.pid")
    say "stopping $1 (pid $pid): its configuration changed"
    kill "$pid"
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    die "$1 (pid $pid) did not stop"
}
if [ "$changed" = 1 ]; then
    stop slurmd
    stop slurmctld
fi
if ! running slurmctld; then
    say "starting slurmctld"
    slurmctld
fi
if ! running slurmd; then
    say "starting slurmd"
    slurmd
fi

show_logs() {
    for f in "$log_dir/slurmctld.log" "$log_dir/slurmd.log" /var/log/munge/munged.log; do
        echo "---- last lines of $f" >&2
        tail -n 40 "$f" >&2 2>/dev/null || echo "(missing)" >&2
    done
}
deadline=$((SECONDS + timeout_s))
state=""
while :; do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1 || true)
    case "$state" in
        idle|mixed|allocated|completing) break ;;
        down*|drain*|drained*)  # e.g. left down by an earlier, killed slurmd
            scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "slurm-up: error: node $host is not idle after ${timeout_s} s (sinfo says: ${state:-nothing})" >&2
        sinfo >&2 || true
        show_logs
        exit 1
    fi
    sleep 0.5
done
say "SLURM is up: node $host $state in partition $partition ($(sinfo -V))"
