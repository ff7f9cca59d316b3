# Shared body of prolog.sh and epilog.sh (sourced, not run). Slurm drains a node whose
# Prolog or Epilog fails or hangs, so: bound the run time, log everything, exit 0 always.
#
# Settings (each may also come from slurmd's environment):
#   SLURM_GREEN_HOME          where the repository is (PYTHONPATH), default /opt/slurm-green
#   SLURM_GREEN_PYTHON        interpreter, default python3
#   SLURM_GREEN_HOOK_TIMEOUT  seconds before the Python part is killed, default 20
#                             (keep it below slurm.conf's PrologEpilogTimeout)
#   SLURM_GREEN_LOG           log file, default /var/log/slurm-green/hooks.log; lines also go
#                             to syslog (tag slurm-green) when `logger` works
# GPU settings (backend, key, default cap): /etc/slurm-green/gpu.conf, see docs/enactment.md.

SLURM_GREEN_HOME=${SLURM_GREEN_HOME:-/opt/slurm-green}
SLURM_GREEN_PYTHON=${SLURM_GREEN_PYTHON:-python3}
SLURM_GREEN_HOOK_TIMEOUT=${SLURM_GREEN_HOOK_TIMEOUT:-20}
SLURM_GREEN_LOG=${SLURM_GREEN_LOG:-/var/log/slurm-green/hooks.log}
# slurmd may start us with a bare PATH; keep the caller's first.
PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin

sg_run_hook() {  # sg_run_hook prolog|epilog
    local kind=$1 output status why
    output=$(PYTHONPATH="$SLURM_GREEN_HOME${PYTHONPATH:+:$PYTHONPATH}" \
        timeout -k 2 "$SLURM_GREEN_HOOK_TIMEOUT" \
        "$SLURM_GREEN_PYTHON" -m "slurm_green.gpu.$kind" 2>&1 </dev/null)
    status=$?
    if [ "$status" -ne 0 ]; then
        case $status in
            124|137) why="timed out after ${SLURM_GREEN_HOOK_TIMEOUT}s (status $status)" ;;
            *)       why="exited with status $status" ;;
        esac
        output="${output:+$output
}slurm-green $kind job=${SLURM_JOB_ID:-?}: $SLURM_GREEN_PYTHON -m slurm_green.gpu.$kind $why; node left in service"
    fi
    [ -n "$output" ] || return 0
    mkdir -p "$(dirname "$SLURM_GREEN_LOG")" 2>/dev/null
    printf '%s\n' "$output" | sed "s/^/$(date -u +%Y-%m-%dT%H:%M:%SZ) /" >>"$SLURM_GREEN_LOG" 2>/dev/null
    printf '%s\n' "$output" | logger -t slurm-green 2>/dev/null
    return 0
}
