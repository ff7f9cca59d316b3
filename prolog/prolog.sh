#!/bin/bash
# slurm-green Prolog (slurm.conf: Prolog=/opt/slurm-green/prolog/prolog.sh, PrologFlags=Alloc).
# Caps the job's GPUs as the controller's signed decision says; see docs/enactment.md.
# Always exits 0: a failing Prolog would drain the node.
. "$(dirname "$0")/hook-common.sh" 2>/dev/null && sg_run_hook prolog
exit 0
