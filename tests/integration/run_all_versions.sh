#!/usr/bin/env bash
# Run the integration suite against each Slurm version.
#
#   tests/integration/run_all_versions.sh [VERSION...]     (default: 24.11 22.05 26.05)
#
# The first version gets the whole suite (-m integration), alone; the others only the
# tests marked `contract` (-m "integration and contract"), unless
# SLURM_GREEN_FULL_ALL_VERSIONS=1. Extra pytest arguments: PYTEST_ARGS="-x -k gpu".
# Each pytest session brings its cluster up (docker/cluster up --slurm V) and takes
# it down at the end (unless SLURM_GREEN_KEEP_CLUSTER=1).
#
# The versions after the first run at once, two clusters side by side, each its own compose
# project and network (SLURM_GREEN_CLUSTER_BESIDE=1): the suites mostly wait on Slurm, and one
# after the other they were most of CI's hour. Their images are built first, one at a time;
# each suite's output goes to docker/.build/itest-<version>.log and is printed whole when both
# have ended. Two at once ran as fast as one alone here; all three at once were a third slower
# each, with a load average of 5-7 on 2 cores, which eats into the live tests' timing margins.
# SLURM_GREEN_VERSIONS_AT_ONCE=0 runs them one after the other instead.
#
# Exit status: 0 only if every version passed. pytest's exit code 5 (no tests
# collected) fails the full run of the first version (the suite must not be empty)
# but is only a warning for a contract-only run (no contract tests yet).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
pytest_bin=${PYTEST:-$repo/.venv/bin/pytest}
[[ -x $pytest_bin ]] || { echo "run_all_versions: $pytest_bin not found (run \`make venv\`)" >&2; exit 2; }

versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(24.11 22.05 26.05)
for v in "${versions[@]}"; do
    case $v in 22.05|24.11|26.05) ;; *) echo "run_all_versions: unknown Slurm version '$v'" >&2; exit 2 ;; esac
done

read -r -a extra <<<"${PYTEST_ARGS:-}"
declare -a summary=()
failed=0

# run_one VERSION KIND: one pytest session; returns its exit status.
run_one() {
    local v=$1 kind=$2 mark rc=0 t0=$SECONDS
    if [[ $kind == full ]]; then mark="integration and not campaign"; else mark="integration and contract and not campaign"; fi
    echo "=== Slurm $v: pytest -m \"$mark\" tests/integration ==="
    # --durations: the slowest tests of each version in the log, where CI's time goes
    SLURM_GREEN_SLURM=$v "$pytest_bin" -m "$mark" --durations=12 tests/integration "${extra[@]}" || rc=$?
    echo "=== Slurm $v: pytest exit $rc in $((SECONDS - t0)) s ==="
    return "$rc"
}

# record VERSION KIND RC SECONDS: its summary line, and whether the run failed.
record() {
    local v=$1 kind=$2 rc=$3 dt=$4 result
    case $rc in
        0) result="passed" ;;
        5) if [[ $kind == full ]]; then result="FAILED (no tests collected)"; failed=1
           else result="no contract tests (not a failure)"; fi ;;
        *) result="FAILED (pytest exit $rc)"; failed=1 ;;
    esac
    summary+=("$(printf 'Slurm %-6s %-9s %-36s %4d s' "$v" "$kind" "$result" "$dt")")
}

kind_of() { [[ $1 == first || ${SLURM_GREEN_FULL_ALL_VERSIONS:-0} == 1 ]] && echo full || echo contract; }

t0=$SECONDS; rc=0
run_one "${versions[0]}" "$(kind_of first)" || rc=$?
record "${versions[0]}" "$(kind_of first)" "$rc" $((SECONDS - t0))

rest=("${versions[@]:1}")
declare -A pids=()
# Interrupted: the suites running in the background stop too (a background job ignores SIGINT).
stop_rest() {
    for v in "${!pids[@]}"; do pkill -TERM -P "${pids[$v]}" 2>/dev/null || true; done
    echo "run_all_versions: interrupted; a cluster may be left up: docker/cluster down --slurm V" >&2
    exit 130
}
if [[ ${#rest[@]} -gt 1 && ${SLURM_GREEN_VERSIONS_AT_ONCE:-1} != 0 ]]; then
    trap stop_rest INT TERM
    for v in "${rest[@]}"; do  # one build at a time, before either suite starts
        ./docker/cluster build --slurm "$v" || { echo "run_all_versions: building Slurm $v's images failed" >&2; exit 1; }
    done
    for v in "${rest[@]}"; do
        SLURM_GREEN_CLUSTER_BESIDE=1 run_one "$v" "$(kind_of rest)" >"docker/.build/itest-$v.log" 2>&1 &
        pids[$v]=$!
        echo "=== Slurm $v: started beside the other (output: docker/.build/itest-$v.log) ==="
    done
    declare -A ended=()
    for v in "${rest[@]}"; do
        rc=0; wait "${pids[$v]}" || rc=$?
        ended[$v]=$rc
    done
    for v in "${rest[@]}"; do
        log="docker/.build/itest-$v.log"
        cat "$log"
        # its own time, from run_one's last line (waited for in turn, it may have ended earlier)
        dt=$(sed -n 's/^=== Slurm .*: pytest exit [0-9]* in \([0-9]*\) s ===$/\1/p' "$log" | tail -n 1)
        record "$v" "$(kind_of rest)" "${ended[$v]}" "${dt:-0}"
    done
else
    for v in "${rest[@]}"; do
        t0=$SECONDS; rc=0
        run_one "$v" "$(kind_of rest)" || rc=$?
        record "$v" "$(kind_of rest)" "$rc" $((SECONDS - t0))
    done
fi

echo
echo "=== integration summary ==="
printf '%s\n' "${summary[@]}"
exit $failed
