#!/bin/bash
# slurm-green Epilog (slurm.conf: Epilog=/opt/slurm-green/prolog/epilog.sh).
# Gives the job's GPUs back the limits they had before; see docs/enactment.md.
# Always exits 0: a failing Epilog would drain the node.
. "$(dirname "$0")/hook-common.sh" 2>/dev/null && sg_run_hook epilog
exit 0
