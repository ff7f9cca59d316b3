"""The trace-driven simulator: a ``ClusterBackend`` that plays Slurm, job_submit.lua and the Prolog."""
