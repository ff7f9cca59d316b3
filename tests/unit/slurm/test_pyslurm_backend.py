"""The pyslurm backend against a fake module shaped after pyslurm 25.11's API.

No pyslurm on PyPI matches Debian's Slurm (22.05, 24.11, 26.05), so this is the only
test it gets here; see the module docstring.
"""

from __future__ import annotations

from types import SimpleNamespace

from slurm_green.core.actions import (ActionError, Hold, Release, SetDecision, SetGpuFreq, SetGpus, SetNice, SetStartTime,
                                      SetTimeLimit, ShareGpus)
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import JobState, NodeState, Reservation
from slurm_green.slurm.pyslurm_backend import PyslurmBackend, gres_text

NOW = 1_800_000_000.0
TOKEN = "sg1.e30." + "a" * 64


class RPCError(Exception):
    pass


class FakePyslurm:
    """Records modify/hold/release calls; refuses changes to job 9 like slurmctld would."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        pending = SimpleNamespace(
            id=5,
            name="train",
            user_name="alice",
            account="research",
            partition="gpu",
            state="PENDING",
            state_reason="BeginTime",
            submit_time=1_799_990_000,
            eligible_time=1_800_003_600,
            start_time=1_800_003_600,
            end_time=None,
            time_limit=60,
            num_nodes=1,
            allocated_nodes=None,
            priority=1000,
            nice=0,
            comment="green:flex=6h mine",
            admin_comment="sg:managed=1",
            reservation="booked",
            cpus_per_gpu=8,
            memory_per_gpu=64000,
            gres_per_node={"gpu:a100": 2},
            cpus=2,
            memory=8000,
        )
        running = SimpleNamespace(
            id=6,
            state="RUNNING",
            num_nodes=2,
            allocated_nodes="node[1-2]",
            priority=1000,
            gres_per_node={"gpu": 4},
            time_limit=None,
            submit_time=1_799_990_000,
        )
        self.Jobs = SimpleNamespace(load=lambda: {5: pending, 6: running})
        node = SimpleNamespace(
            name="node1",
            state="MIXED+DRAIN",
            reason="maint",
            configured_gres={"gpu:a100": 4, "shard:a100": 16},
            allocated_gres={"gpu:a100": {"count": 2, "indexes": "0-1"}, "shard:a100": 0},
            available_features=["a100"],
            partitions=["gpu"],
            total_cpus=64,
            allocated_cpus=11,
            real_memory=512000,
            allocated_memory=44000,
            memory_reserved_for_system=2000,
        )
        self.Nodes = SimpleNamespace(load=lambda: [node])
        part = SimpleNamespace(name="gpu", nodes="node[1-2]", state="UP", is_default=True, max_time=None,
                               default_time=90, max_nodes=2)
        self.Partitions = SimpleNamespace(load=lambda: {"gpu": part})
        booked = SimpleNamespace(name="booked", start_time=1_800_000_000, end_time=1_800_007_200, nodes="node[1-2]")
        ended = SimpleNamespace(name="ended", start_time=1_799_000_000, end_time=1_799_007_200, nodes="node1")
        self.Reservations = SimpleNamespace(load=lambda: {"booked": booked, "ended": ended})
        self.RPCError = RPCError
        fake = self

        class Job:
            def __init__(self, job_id):
                self.job_id = job_id

            def _check(self):
                if self.job_id == 9:
                    raise RPCError("Invalid job id specified")

            def modify(self, changes):
                self._check()
                fake.calls.append(("modify", self.job_id, changes.kwargs))

            def hold(self):
                self._check()
                fake.calls.append(("hold", self.job_id))

            def release(self):
                self._check()
                fake.calls.append(("release", self.job_id))

        self.Job = Job
        self.JobSubmitDescription = lambda **kwargs: SimpleNamespace(kwargs=kwargs)

    @staticmethod
    def version() -> str:
        return "25.11.1"


def test_snapshot_goes_through_the_same_normalisation():
    snapshot = PyslurmBackend(FakePyslurm(), clock=ManualClock(NOW)).snapshot()
    pending, running = snapshot.job(5), snapshot.job(6)
    assert pending.state is JobState.PENDING and (pending.gpus_per_node, pending.gpu_type) == (2, "a100")
    assert pending.time_limit_s == 3600 and pending.start_time == 1_800_003_600
    assert (pending.cpus, pending.memory_mib, running.memory_mib) == (2, 8000, 0)
    assert running.nodes == ("node1", "node2") and running.gpus_per_node == 4 and running.time_limit_s is None
    (node,) = snapshot.nodes
    assert node.state is NodeState.MIXED and node.flags == {"DRAIN"}
    assert (node.gpus_total, node.gpus_allocated, node.gpu_indices_allocated, node.shards_total) == (4, 2, (0, 1), 16)
    assert (node.cpus_free, node.memory_free_mib) == (53, 466000)
    assert snapshot.partitions[0].default and snapshot.slurm_version == "25.11.1"
    assert (snapshot.partitions[0].max_time_s, snapshot.partitions[0].default_time_s) == (None, 5400.0)
    assert snapshot.partitions[0].max_nodes == 2
    assert (pending.reservation, running.reservation) == ("booked", "")
    assert (pending.cpus_per_gpu, pending.memory_per_gpu_mib, running.cpus_per_gpu) == (8, 64000, 0)
    assert snapshot.reservations == (Reservation("booked", 1_800_000_000, 1_800_007_200, ("node1", "node2")),)


def test_actions_call_modify_hold_release_and_type_errors():
    fake = FakePyslurm()
    backend = PyslurmBackend(fake, clock=ManualClock(NOW))
    backend.snapshot()
    results = backend.apply(
        [
            SetStartTime(5, NOW + 60),
            SetGpus(5, 4, num_nodes=1),
            SetDecision(5, TOKEN),
            SetNice(5, 3),
            SetTimeLimit(5, 5401.0),
            Hold(5),
            Release(5),
            SetNice(9, 1),
            SetGpuFreq(6, "gpu:medium"),
            SetNice(6, 1),
        ]
    )
    assert [r.error for r in results] == [None] * 7 + [ActionError.JOB_GONE, ActionError.INVALID,
                                                       ActionError.BLOCKED]
    assert "not supported by the pyslurm backend" in results[-2].message
    # one job's fields in one call: a decision takes whole or not at all (commands), and a field
    # refused before sending leaves its job's others unsent
    assert fake.calls == [
        ("modify", 5, {"begin_time": str(int(NOW + 60)), "gres_per_node": "gpu:a100:4", "nodes": 1,
                       "comment": f"green:flex=6h mine {TOKEN}", "nice": 3,
                       "time_limit": "91"}),  # whole minutes, rounded up
        ("hold", 5),
        ("release", 5),
    ]


def test_a_refused_modify_fails_every_field_of_the_job_and_an_unreachable_slurm_the_rest():
    fake = FakePyslurm()
    backend = PyslurmBackend(fake, clock=ManualClock(NOW))
    backend.snapshot()
    results = backend.apply([SetNice(9, 1), SetTimeLimit(9, 600.0), SetNice(5, 2)])
    assert [r.error for r in results] == [ActionError.JOB_GONE, ActionError.JOB_GONE, None]
    assert fake.calls == [("modify", 5, {"nice": 2})]

    def unreachable(self, changes):
        raise RPCError("Unable to contact slurm controller (connect failure)")

    fake.Job.modify = unreachable  # type: ignore[method-assign]
    results = backend.apply([SetNice(5, 1), Hold(5)])
    assert [r.error for r in results] == [ActionError.UNREACHABLE] * 2
    assert fake.calls == [("modify", 5, {"nice": 2})]  # the hold was not tried


def test_a_gpu_change_keeps_the_jobs_other_gres():
    fake = FakePyslurm()
    pending = fake.Jobs.load()[5]
    pending.gres_per_node = {"gpu:a100": 2, "nvme": 1}
    backend = PyslurmBackend(fake, clock=ManualClock(NOW))
    backend.snapshot()
    assert backend.apply([SetGpus(5, 4)])[0].ok
    assert fake.calls == [("modify", 5, {"gres_per_node": "gpu:a100:4,nvme:1"})]
    pending.gres_per_node = "gpu:a100:2,nvme:1;x"
    backend.snapshot()
    [refused] = backend.apply([SetGpus(5, 4)])
    assert refused.error is ActionError.INVALID and len(fake.calls) == 1


def test_dry_run_records_scontrol_commands_only():
    fake = FakePyslurm()
    backend = PyslurmBackend(fake, clock=ManualClock(NOW), dry_run=True)
    backend.snapshot()
    assert all(r.ok for r in backend.apply([Hold(5), SetNice(5, 2)]))
    assert fake.calls == []
    assert backend.recorded == [("scontrol", "hold", "5"), ("scontrol", "update", "JobId=5", "Nice=2")]


def test_gres_text_round_trip():
    assert (
        gres_text({"gpu:a100": {"count": 2, "indexes": "0-1"}, "shard:a100": 0}) == "gpu:a100:2(IDX:0-1),shard:a100:0"
    )
    assert gres_text(None) == "" and gres_text("gres/gpu:1") == "gres/gpu:1"


def test_a_share_beside_a_job_on_whole_gpus_is_refused_and_beside_a_pending_one_is_shards():
    fake = FakePyslurm()
    backend = PyslurmBackend(fake, clock=ManualClock(NOW))
    backend.snapshot()
    [refused] = backend.apply([ShareGpus(5, 6)])  # job 6 runs on 4 whole GPUs
    assert refused.error is ActionError.INVALID and "whole GPUs" in refused.message and fake.calls == []
    dry = PyslurmBackend(FakePyslurm(), clock=ManualClock(NOW), dry_run=True)
    dry.snapshot()
    assert [r.error for r in dry.apply([ShareGpus(5, 6), Hold(5)])] == [ActionError.INVALID, None]
    assert dry.recorded == [("scontrol", "hold", "5")]
