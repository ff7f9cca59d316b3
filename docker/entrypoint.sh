#!/bin/bash
# Entry point of every container of the slurm-green test cluster.
#   cluster-entrypoint slurmctld|slurmd|controller    start that role
#   cluster-entrypoint health ROLE                    Docker healthcheck
# Inputs (bind-mounted read-only by docker/docker-compose.yml):
#   /run/cluster/slurm/       rendered Slurm config (slurm.conf, gres.conf, slurmdbd.conf, ...)
#   /run/cluster/munge.key    shared munge key
#   /run/cluster/slurm-green/ decision.key and cluster.env for /etc/slurm-green
#   /run/cluster/repo         the repository (nodes; /opt/slurm-green links to it)
set -euo pipefail

log() { echo "[cluster-entrypoint $(hostname)] $*" >&2; }

install_config() {
    [[ -f /run/cluster/munge.key ]] || { log "missing /run/cluster/munge.key"; exit 1; }
    install -o munge -g munge -m 0400 /run/cluster/munge.key /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge /etc/munge
    chmod 0755 /run/munge

    # Slurm config: copied (not mounted) so owners and modes are right inside the container.
    rm -f /etc/slurm/*.conf /etc/slurm/*.lua
    for f in /run/cluster/slurm/*; do
        [[ -f $f ]] || continue
        case $(basename "$f") in
            slurmdbd.conf) install -o slurm -g slurm -m 0600 "$f" /etc/slurm/ ;;
            *)             install -o root -g root -m 0644 "$f" /etc/slurm/ ;;
        esac
    done

    # /etc/slurm-green: cluster facts and the decision-signing key; state and log
    # directories for the slurm-green hooks (Prolog/Epilog run as root).
    install -d -m 0755 /etc/slurm-green /var/lib/slurm-green /var/log/slurm-green
    # Metered energy: written by the Epilogs (root), read and removed by the controller (sgreen).
    install -d -m 0755 -o sgreen /var/spool/slurm-green/telemetry
    # Jobs' progress reports (the training helper's): each user writes their own, none can
    # replace another's (sticky, as /tmp); the controller reads them and, as the directory's
    # owner, removes those of jobs that ended (controller/progress.py).
    install -d -m 1777 -o sgreen /var/spool/slurm-green/telemetry/progress
    [[ -f /run/cluster/slurm-green/cluster.env ]] && \
        install -m 0644 /run/cluster/slurm-green/cluster.env /etc/slurm-green/cluster.env
    if [[ -f /run/cluster/slurm-green/decision.key ]]; then
        case $1 in
            controller) install -o root -g sgreen -m 0440 /run/cluster/slurm-green/decision.key /etc/slurm-green/ ;;
            slurmctld)  install -o root -g slurm  -m 0440 /run/cluster/slurm-green/decision.key /etc/slurm-green/ ;;
            *)          install -o root -g root   -m 0400 /run/cluster/slurm-green/decision.key /etc/slurm-green/ ;;
        esac
    fi
}

start_munge() {
    runuser -u munge -- /usr/sbin/munged --num-threads=4
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && return 0; sleep 0.1; done
    log "munged did not come up"; exit 1
}

wait_for_ctld() {
    # Up to $1 seconds; returns 1 if slurmctld never answered.
    local deadline=$((SECONDS + $1))
    while ((SECONDS < deadline)); do
        scontrol ping 2>/dev/null | grep -q 'is UP' && return 0
        sleep 0.5
    done
    return 1
}

sacctmgr_q() { sacctmgr -i -Q "$@" >/dev/null 2>&1 || true; }

bootstrap_accounting() {
    local cluster
    cluster=$(sed -n 's/^ClusterName=//p' /etc/slurm/slurm.conf)
    if [[ -z $(sacctmgr -n -P list cluster "$cluster" format=cluster 2>/dev/null) ]]; then
        log "registering cluster $cluster and accounts in slurmdbd"
        sacctmgr_q add cluster "$cluster"
        # A new accounting database: state saved for an older one would make slurmctld
        # stop with "CLUSTER ID MISMATCH".
        rm -f /var/lib/slurm/slurmctld/clustername
    fi
    if [[ -z $(sacctmgr -n -P list user sgreen format=user 2>/dev/null) ]]; then
        sacctmgr_q add account research Description=research Organization=lab
        sacctmgr_q add account ops Description=operations Organization=lab
        sacctmgr_q add user alice account=research
        sacctmgr_q add user bob account=research
        sacctmgr_q add user sgreen account=ops adminlevel=Operator
    fi
}

role_slurmctld() {
    install -d -o mysql -g mysql /run/mysqld
    chown -R mysql:mysql /var/lib/mysql
    log "starting mariadb"
    mariadbd --user=mysql 2>&1 | sed -u 's/^/mariadb: /' >&2 &
    for _ in $(seq 120); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.25; done
    install -d -o slurm -g slurm /var/lib/slurm/slurmctld /var/log/slurm
    log "starting slurmdbd"
    slurmdbd -D 2>&1 | sed -u 's/^/slurmdbd: /' >&2 &
    for _ in $(seq 120); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.25; done
    bootstrap_accounting
    log "starting slurmctld"
    exec slurmctld -D -i
}

install_hooks() {
    # The repository copy at /opt/slurm-green: a symlink to the read-only mount, so code
    # edits reach the nodes at once and a test may `mv` the copy away like an admin could.
    [[ -e /opt/slurm-green || -L /opt/slurm-green ]] || ln -s /run/cluster/repo /opt/slurm-green
    # The Prolog/Epilog slurm.conf names, written outside the copy as docs/enactment.md tells
    # an admin to: the node's plain python3 and the repository copy, nothing else.
    if [[ -f /opt/slurm-green/slurm_green/gpu/wrappers.py ]]; then
        PYTHONPATH=/opt/slurm-green python3 -m slurm_green.gpu.wrappers \
            --python /usr/bin/python3 --home /opt/slurm-green >/dev/null \
            || { log "writing the Prolog/Epilog wrappers failed"; exit 1; }
    fi
}

role_slurmd() {
    install_hooks
    # Emulated GPUs: character devices with NVIDIA's major number 195.
    for i in 0 1 2 3; do
        [[ -e /dev/nvidia$i ]] || mknod -m 666 /dev/nvidia$i c 195 $i
    done
    [[ -e /dev/nvidiactl ]] || mknod -m 666 /dev/nvidiactl c 195 255
    mkdir -p /var/spool/slurmd
    if ! wait_for_ctld 120; then log "slurmctld not answering yet; starting slurmd anyway"; fi
    log "starting slurmd"
    exec slurmd -D
}

role_controller() {
    wait_for_ctld 120 || log "slurmctld not answering yet"
    log "controller ready"
    exec sleep infinity
}

health() {
    munge -n >/dev/null 2>&1 || { echo "munge down"; exit 1; }
    case $1 in
        slurmctld)
            scontrol ping 2>/dev/null | grep -q 'is UP' || { echo "slurmctld down"; exit 1; }
            sacctmgr -n list cluster format=cluster >/dev/null 2>&1 || { echo "slurmdbd down"; exit 1; } ;;
        slurmd)
            kill -0 "$(cat /run/slurmd.pid 2>/dev/null)" 2>/dev/null || { echo "slurmd down"; exit 1; } ;;
        controller)
            scontrol ping 2>/dev/null | grep -q 'is UP' || { echo "cannot reach slurmctld"; exit 1; } ;;
    esac
}

role=${1:-slurmd}
case $role in
    health) health "${2:-slurmd}"; exit 0 ;;
    slurmctld|slurmd|controller)
        install_config "$role"
        start_munge
        "role_$role" ;;
    *) exec "$@" ;;
esac
