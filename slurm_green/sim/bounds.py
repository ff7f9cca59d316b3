"""The carbon bounds' view of a simulated workload: the jobs as the simulator runs them.

The bounds must see what the simulator does: each job's work, the layout it is
submitted with, the GPU range its simulated user allows, and the type whose models it
runs with (its requested type on a mixed cluster, else the registry's own type, which is
what the simulator uses whatever the nodes are labelled).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from slurm_green.core.models import ModelRegistry
from slurm_green.policy.bound_configs import BoundJobs, ClusterShape
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.workload import Workload


def bound_inputs(workload: Workload, spec: ClusterSpec, models: ModelRegistry,
                 options: TraceOptions) -> tuple[BoundJobs, ClusterShape]:
    sim = Simulator(workload, spec, models, None, b"bound-inputs-key", options)  # reuses its work sizes
    layout = np.array([sim.submitted_layout(i) for i in range(len(workload))], dtype=np.int64).reshape(-1, 2)
    submitted = layout[:, 0] * layout[:, 1]
    if options.managed:
        low, high = np.array([sim.gpu_range(int(g)) for g in submitted], dtype=np.int64).reshape(-1, 2).T
    else:
        low = high = submitted
    types = tuple(sim.requested_type) if spec.typed else (None,) * len(workload)
    if spec.typed and None in types:
        raise ValueError("bounds are computed for jobs that ask for a GPU type: set untyped_share=0")
    nodes: dict[str | None, int] = {**Counter(spec.gpu_types)} if spec.typed else {None: spec.nodes}
    jobs = BoundJobs(workload.submit, sim.work, tuple(t or None for t in workload.job_type), types,
                     layout[:, 0], layout[:, 1], low, high, options.accept_cap and options.managed)
    return jobs, ClusterShape(spec.gpus_per_node, nodes)
