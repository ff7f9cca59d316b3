#!/usr/bin/env bash
# Run the integration suite against each Slurm version, one cluster at a time.
#
#   tests/integration/run_all_versions.sh [VERSION...]     (default: 24.11 22.05 26.05)
#
# The first version gets the whole suite (-m integration); the others only the
# tests marked `contract` (-m "integration and contract"), unless
# SLURM_GREEN_FULL_ALL_VERSIONS=1. Extra pytest arguments: PYTEST_ARGS="-x -k gpu".
# Each pytest session brings its cluster up (docker/cluster up --slurm V) and takes
# it down at the end (unless SLURM_GREEN_KEEP_CLUSTER=1).
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
first=1
for v in "${versions[@]}"; do
    if [[ $first == 1 || ${SLURM_GREEN_FULL_ALL_VERSIONS:-0} == 1 ]]; then
        mark="integration and not campaign"; kind=full
    else
        mark="integration and contract and not campaign"; kind=contract
    fi
    echo "=== Slurm $v: pytest -m \"$mark\" tests/integration ==="
    t0=$SECONDS
    rc=0
    # --durations: the slowest tests of each version in the log, where CI's time goes
    SLURM_GREEN_SLURM=$v "$pytest_bin" -m "$mark" --durations=12 tests/integration "${extra[@]}" || rc=$?
    dt=$((SECONDS - t0))
    case $rc in
        0) result="passed" ;;
        5) if [[ $kind == full ]]; then result="FAILED (no tests collected)"; failed=1
           else result="no contract tests (not a failure)"; fi ;;
        *) result="FAILED (pytest exit $rc)"; failed=1 ;;
    esac
    summary+=("$(printf 'Slurm %-6s %-9s %-36s %4d s' "$v" "$kind" "$result" "$dt")")
    first=0
done

echo
echo "=== integration summary ==="
printf '%s\n' "${summary[@]}"
exit $failed
