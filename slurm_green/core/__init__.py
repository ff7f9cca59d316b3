"""The shared vocabulary of slurm-green: every other layer speaks in these types.

Nothing here talks to Slurm, the network or the disk, so the types can be built
from a live cluster, a simulator or a literal in a test alike.
"""
