#!/bin/sh
# slurm-green @KIND@, written by `slurm-green install --hooks` (slurm_green/gpu/wrappers.py);
# slurm.conf names this file. See docs/enactment.md, "Prolog and Epilog".
#
# Self-contained on purpose: it sources nothing and needs no file of slurm-green to run,
# so a missing repository copy, interpreter, package, key or state file, or a hung
# Python, ends as a logged line and exit status 0. Slurm drains a node whose Prolog or
# Epilog fails or hangs; this script never does either.
#
# Settings, written in at install time; slurmd's environment (not the job's) may override:
#   SLURM_GREEN_PYTHON        interpreter that runs slurm_green.gpu.@KIND@
#   SLURM_GREEN_HOME          put on PYTHONPATH (a repository copy); empty: the interpreter's own
#   SLURM_GREEN_HOOK_TIMEOUT  seconds before Python is stopped (below PrologEpilogTimeout)
#   SLURM_GREEN_LOG           log file; lines also go to syslog (tag slurm-green)
SLURM_GREEN_PYTHON=${SLURM_GREEN_PYTHON:-@PYTHON@}
SLURM_GREEN_HOME=${SLURM_GREEN_HOME-@HOME@}
SLURM_GREEN_HOOK_TIMEOUT=${SLURM_GREEN_HOOK_TIMEOUT:-@TIMEOUT@}
SLURM_GREEN_LOG=${SLURM_GREEN_LOG:-@LOG@}
# slurmd starts hooks without a search path; and `python -m` imports from the working
# directory first, so run from / where nobody but root writes.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
cd / 2>/dev/null

kind=@KIND@
case $SLURM_GREEN_HOOK_TIMEOUT in
    ''|*[!0-9]*|0) SLURM_GREEN_HOOK_TIMEOUT=@TIMEOUT@ ;;
esac
if ! command -v timeout >/dev/null 2>&1; then
    output="timeout(1) not found: Python not started, GPUs left as they are"
    status=0
else
    output=$(PYTHONPATH=$SLURM_GREEN_HOME \
        timeout -k 2 "$SLURM_GREEN_HOOK_TIMEOUT" \
        "$SLURM_GREEN_PYTHON" -m "slurm_green.gpu.$kind" 2>&1 </dev/null)
    status=$?
fi
if [ "$status" -ne 0 ]; then
    case $status in
        124|137) why="timed out after ${SLURM_GREEN_HOOK_TIMEOUT}s (status $status)" ;;
        126|127) why="could not be started (status $status): is $SLURM_GREEN_PYTHON installed?" ;;
        *)       why="exited with status $status" ;;
    esac
    case $output in
        *"No module named"*) why="$why; slurm_green is not importable by $SLURM_GREEN_PYTHON${SLURM_GREEN_HOME:+ with $SLURM_GREEN_HOME}" ;;
    esac
    output="${output:+$output
}slurm-green $kind job=${SLURM_JOB_ID:-?}: $SLURM_GREEN_PYTHON -m slurm_green.gpu.$kind $why; GPUs left as they are, node left in service"
    if [ "$kind" = epilog ]; then
        # Python did not finish: mark the job ended (slurm_green/gpu/claims.py) so that the
        # next Prolog or Epilog here releases its claims and restores what no job holds.
        # The state directory as gpu.conf or slurmd's environment sets it (read, not sourced).
        conf=${SLURM_GREEN_GPU_CONF:-/etc/slurm-green/gpu.conf}
        state=${SLURM_GREEN_STATE_DIR:-$(sed -n 's/^[[:space:]]*\(export[[:space:]]*\)\{0,1\}SLURM_GREEN_STATE_DIR[[:space:]]*=[[:space:]]*["'"'"']\{0,1\}\([^"'"'"'#[:space:]]*\).*/\2/p' "$conf" 2>/dev/null | tail -n 1)}
        case ${SLURM_JOB_ID:-x} in
            *[!0-9]*) ;;
            *) [ -d "${state:-/var/lib/slurm-green}/jobs" ] && \
                   printf 'wrapper\n' 2>/dev/null >"${state:-/var/lib/slurm-green}/jobs/$SLURM_JOB_ID.ended" ;;
        esac
    fi
fi
if [ -n "$output" ]; then
    stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
    mkdir -p "$(dirname "$SLURM_GREEN_LOG")" 2>/dev/null
    printf '%s\n' "$output" | sed "s/^/$stamp /" >>"$SLURM_GREEN_LOG" 2>/dev/null
    printf '%s\n' "$output" | logger -t slurm-green 2>/dev/null
fi
exit 0
