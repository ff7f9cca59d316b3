"""``python -m slurm_green.cli``: the same as the ``slurm-green`` script (the systemd unit uses it)."""

from slurm_green.cli import main

main(prog_name="slurm-green")
