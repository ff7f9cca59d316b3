"""The training-side helper: code that runs *inside* a user's training job.

Framework-agnostic core (no PyTorch): progress reports the controller can read
(``progress``), checkpoint-on-signal (``signals``), the layer-freezing decision on plain
numbers (``freeze``), the data order at any world size (``plan``) and whole-file
checkpoint writes (``checkpoint``). The PyTorch adapter that wires these into a training
loop, ``pytorch.GreenTrainer``, is the one module that imports PyTorch (the ``train``
extra; docs/training.md). The controller never imports this package: what it
reads from a job goes through ``slurm_green.core.progress``, validated as untrusted input.
"""
