"""Which nodes a pending job may run on: the one rule the planner and the policies share.

Slurm refuses to pin a job to a node outside its partition(s), or to one of another GPU
type than it asked for (``--gres=gpu:h100:2``). The planner drops such a pin
(``planner.within_partition``); the policies that place jobs (GreenFlow, PowerFlow, EaCO)
place each job on these nodes alone, so that nothing they decide is dropped. Both read the
rule here, so the two never disagree:

- the partitions listed in ``Job.partition`` (comma-separated), or the default partition
  for a job that names none;
- a partition whose node list the snapshot does not give, or names a node the snapshot
  does not have (``Nodes=ALL`` as printed), holds every node; so does a job whose
  partitions the snapshot does not list;
- a requested GPU type restricts the nodes to those of that type where types are known
  (some node reports one): an untyped node never has it, as Slurm matches ``gpu:h100`` to
  no such node. Where no node reports a type the type is not checked (a backend that does
  not read types, the simulator's one-type cluster, whose jobs name that type).

How many nodes a job may be given is read here too (``NodeRules.max_nodes``, the partitions'
``MaxNodes``; ``most_nodes`` adds the task count its user gave), and how many GPUs per node
(``most_gpus_per_node``: the CPUs and memory it asks per GPU must fit one node): Slurm takes an
update past either and leaves the job pending (``PartitionNodeLimit``, ``Resources``,
``BadConstraints``), so the policies size within them and the planner drops or trims a size
past them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from slurm_green.core.cluster import ClusterSnapshot, Job, Node, Partition
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.green_options import parse_marker


@dataclass
class NodeRules:
    """The rule for one snapshot's nodes and partitions, answered once per (partitions, type).
    Of ``nodes`` it reads only names, GPU types and counts of GPUs, CPUs and memory
    (``node_rules`` may hand on one built from an earlier tuple that had the same)."""

    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    _answers: dict[tuple[str, str | None], frozenset[str] | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        names = {node.name for node in self.nodes}
        self.names = frozenset(names)
        self._gpus_of = {node.name: node.gpus_total for node in self.nodes}
        self._sizes_of = {node.name: (node.gpus_total, node.cpus_total, node.memory_total_mib) for node in self.nodes}
        self._per_node: dict[tuple[frozenset[str], int, int], int] = {}
        self._of_type: dict[str | None, frozenset[str]] = {}
        self._widest: dict[frozenset[str], int] = {}
        self._by_name = {partition.name: partition for partition in self.partitions}
        self._defaults = [partition for partition in self.partitions if partition.default]
        # A node list naming nodes the snapshot does not have (``Nodes=ALL`` as printed) is not known.
        self._known = {p.name: bool(p.nodes) and set(p.nodes) <= names for p in self.partitions}
        #: Whether some node reports a GPU type (else a requested type is not checked).
        self.typed = any(node.gpu_type for node in self.nodes)

    def allowed(self, job: Job) -> frozenset[str] | None:
        """The names of the nodes ``job`` may run on; None: every node (no restriction)."""
        kind = job.gpu_type if self.typed else None
        key = (job.partition, kind or None)
        if key not in self._answers:
            self._answers[key] = self._allowed(job.partition, kind or None)
        return self._answers[key]

    def max_nodes(self, job: Job) -> int | None:
        """The most nodes ``job`` may be given: the largest ``MaxNodes`` of the partitions it
        may run in (Slurm starts it in any of them); None: no limit known (one of them has
        none, or the snapshot does not list them)."""
        limits = [p.max_nodes for p in self._listed(job.partition)]
        return None if not limits or None in limits else max(limit for limit in limits if limit is not None)

    def most_nodes(self, job: Job) -> int | None:
        """The most nodes ``job`` may be given: ``max_nodes``, and no more than the tasks its user
        gave (``-n``, the marker's ``tasks``: a job of 1 task given 2 nodes waits for ever), never
        below the nodes it asked for; None: no limit known."""
        options = parse_marker(job.admin_comment)
        limits = [limit for limit in (self.max_nodes(job), options.tasks if options is not None else None)
                  if limit is not None]
        return max(min(limits), job.num_nodes) if limits else None

    def most_gpus_per_node(self, job: Job, names: frozenset[str]) -> int:
        """The most GPUs per node ``job`` may be given on some node among ``names``: its GPUs,
        and where the job asks CPUs or memory per GPU (``--cpus-per-gpu``, ``--mem-per-gpu``) as
        many as that node's CPUs and memory hold (all of them counted, free or not; a total not
        known is not checked). 0: none of ``names`` has a GPU."""
        if not (job.cpus_per_gpu or job.memory_per_gpu_mib):
            return self.widest(names)
        key = (names, job.cpus_per_gpu, job.memory_per_gpu_mib)
        if key not in self._per_node:
            most = 0
            for name in names:
                gpus, cpus, memory = self._sizes_of.get(name, (0, 0, 0))
                if job.cpus_per_gpu and cpus > 0:
                    gpus = min(gpus, cpus // job.cpus_per_gpu)
                if job.memory_per_gpu_mib and memory > 0:
                    gpus = min(gpus, memory // job.memory_per_gpu_mib)
                most = max(most, gpus)
            self._per_node[key] = most
        return self._per_node[key]

    def of_type(self, kind: str | None) -> frozenset[str]:
        """The names of the nodes whose GPU type is ``kind``."""
        if kind not in self._of_type:
            self._of_type[kind] = frozenset(node.name for node in self.nodes if node.gpu_type == kind)
        return self._of_type[kind]

    def widest(self, names: frozenset[str]) -> int:
        """The most GPUs any node among ``names`` has (0: none, or names the snapshot lacks).
        Answered once per set: the planner asks it for every pending job, twice a tick."""
        if names not in self._widest:
            self._widest[names] = max((self._gpus_of.get(name, 0) for name in names), default=0)
        return self._widest[names]

    def gpus_per_node(self, names: frozenset[str]) -> int | None:
        """The most common GPU count per node among ``names`` (the larger of two as common);
        None if none of them has a GPU."""
        counts = Counter(self._gpus_of[name] for name in names if self._gpus_of.get(name, 0) > 0)
        return max(counts, key=lambda gpus: (counts[gpus], gpus)) if counts else None

    def _listed(self, partition: str) -> list[Partition]:
        """The snapshot's partitions among the job's comma-separated ``partition`` (the default
        ones where it names none)."""
        return ([self._by_name[name] for name in partition.split(",") if name in self._by_name] if partition
                else self._defaults)

    def _allowed(self, partition: str, kind: str | None) -> frozenset[str] | None:
        listed = self._listed(partition)
        every = not listed or not all(self._known[p.name] for p in listed)
        names = None if every else {n for p in listed for n in p.nodes}
        if kind:  # Slurm's gpu:TYPE: only nodes of that type
            return frozenset(node.name for node in self.nodes
                             if node.gpu_type == kind and (names is None or node.name in names))
        return None if names is None else frozenset(names)


def _signature(nodes: tuple[Node, ...]) -> tuple[tuple[str, str | None, int, int, int], ...]:
    """What the rule reads of the nodes: their names, GPU types and counts of GPUs, CPUs and memory."""
    return tuple([(node.name, node.gpu_type, node.gpus_total, node.cpus_total, node.memory_total_mib)
                  for node in nodes])


@dataclass
class _RulesMemo:
    """The last snapshot's rule, in a controller's memo. The simulator hands over a new node
    tuple whenever a node's allocation changes, and a new partition tuple with every snapshot,
    while names, types, sizes and partitions stay the same: the rule is kept while they do."""

    nodes: tuple[Node, ...] | None = None
    signature: tuple[tuple[str, str | None, int, int, int], ...] = ()
    rules: NodeRules | None = None


def node_rules(snapshot: ClusterSnapshot, memo: DecisionMemo | None = None) -> NodeRules:
    """The rule for ``snapshot`` (kept in ``memo`` while its nodes' names, types and counts of
    GPUs, CPUs and memory and its partitions are the same)."""
    if memo is None:
        return NodeRules(snapshot.nodes, snapshot.partitions)
    held = memo.get(_RulesMemo)
    if held.nodes is not snapshot.nodes:
        signature = _signature(snapshot.nodes)
        if signature != held.signature:
            held.rules = None
        held.nodes, held.signature = snapshot.nodes, signature
    if held.rules is None or held.rules.partitions != snapshot.partitions:
        held.rules = NodeRules(snapshot.nodes, snapshot.partitions)
    return held.rules
