"""slurm-green: carbon- and energy-aware scheduling for Slurm GPU clusters.

The package is layered so that policy stays separate from mechanism:

- ``core``: the shared vocabulary (cluster snapshot, actions, plans, clock, decision context, and the
  protocols of models and carbon forecasts that policies program against).
- ``slurm``: the real backend (reads and changes a Slurm cluster).
- ``sim``: the trace-driven backend (same interface, simulated time).
- ``carbon``: grid carbon-intensity sources, caching and forecasting.
- ``models``: throughput and energy models fitted from measured profiles.
- ``policy``: pure functions from a ``DecisionContext`` (snapshot, forecast, models, now, the
  controller's memo) to a plan.
- ``controller``: the periodic loop that ties a backend, a carbon source and a policy together.
- ``gpu``: GPU power-cap control on compute nodes (NVML or emulated).
"""

__version__ = "0.1.0"
