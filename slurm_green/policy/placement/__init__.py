"""Where a job's GPUs go.

Two layers:

- ``network``: the placement GreenFlow/PowerFlow enact (``FreeGpus``: network
  packing across switches, buddy blocks inside a node) and the simulator's
  ``fragmentation`` metric; its names are re-exported here unchanged;
- ``framework`` and its plugins: placement as one scoring framework in the style of the
  Kubernetes scheduler framework. Filters drop the nodes a request cannot use; each
  Score plugin (``packing``, ``best_fit``, ``buddy``, ``fgd``, ``pwr``, ``random_score``)
  rates every feasible (node, GPU) option; a site's weights combine the normalised
  scores (``scorer.Scorer``). Partial-GPU requests are jobs asking for ``gres/shard``;
- ``site``: a site's weights (``[policy] placement``) choosing the node of GreenFlow's and
  PowerFlow's one-node jobs through the framework, on ``network``'s scratch copy.
  docs/placement.md says what each plugin follows and what it measured.
"""

from slurm_green.policy.placement.network import SWITCH_FEATURE, FreeGpus, fragmentation, gpus_free, node_rows

__all__ = ["SWITCH_FEATURE", "FreeGpus", "fragmentation", "gpus_free", "node_rows"]
