"""sbatch scripts for DL training jobs that opt in to slurm-green.

The script asks for a GPU count and states the range slurm-green may choose from;
the launcher then uses the count Slurm finally grants, so an elastic job runs
correctly whatever the controller decided.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from slurm_green.core.green_options import USER_PREFIX, parse_user_options
from slurm_green.templates import render

_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_TIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")
# The launcher is pasted as command words (``python -m torch.distributed.run`` is two
# options and a module), the output path into an ``#SBATCH`` line that sbatch splits at
# whitespace: both are held to characters neither the shell nor sbatch reads specially.
_LAUNCHER = re.compile(r"^[A-Za-z0-9_./=+-]+( [A-Za-z0-9_./=+-]+)*$")
_OUTPUT = re.compile(r"^[A-Za-z0-9_./%+-]{1,1024}$")


@dataclass(frozen=True)
class TrainingJob:
    script: str
    args: tuple[str, ...] = ()
    name: str = "train"
    gpus_per_node: int = 1
    nodes: int = 1
    gpus_min: int | None = None
    gpus_max: int | None = None
    flex: str | None = None
    time: str | None = None
    partition: str | None = None
    accept_cap: bool = True
    accept_share: bool = False
    elastic: bool = False
    launcher: str = "torchrun"
    output: str = "%x-%j.out"
    port: int = 29500

    def validate(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"job name {self.name!r}: use letters, digits and _.+- (at most 64)")
        if self.gpus_per_node < 1 or self.nodes < 1:
            raise ValueError("GPUs per node and nodes must be at least 1")
        if self.time is not None and not _TIME.match(self.time):
            raise ValueError(f"time {self.time!r}: use Slurm's [D-]HH:MM:SS, MM:SS or minutes")
        if self.partition is not None and not _NAME.match(self.partition):
            raise ValueError(f"partition {self.partition!r} is not a valid name")
        if not _LAUNCHER.match(self.launcher):
            raise ValueError(f"launcher {self.launcher!r}: use words of letters, digits and _./=+- separated by single spaces")
        if not _OUTPUT.match(self.output):
            raise ValueError(f"output {self.output!r}: use a path of letters, digits, Slurm's %-patterns and _./+-")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port!r}: use a TCP port, 1 to 65535")
        parse_user_options(green_options_text(self), max_delay_limit_s=math.inf)

    @property
    def template(self) -> str:
        return "sbatch/torchrun-single.sh.j2" if self.nodes == 1 else "sbatch/torchrun-multi.sh.j2"


def green_options_text(job: TrainingJob) -> str:
    parts = []
    if job.flex is not None:
        parts.append(f"flex={job.flex}")
    if job.gpus_min is not None or job.gpus_max is not None:
        low = job.gpus_min if job.gpus_min is not None else job.gpus_per_node * job.nodes
        high = job.gpus_max if job.gpus_max is not None else job.gpus_per_node * job.nodes
        parts.append(f"gpus={low}-{high}")
    parts.append(f"cap={'yes' if job.accept_cap else 'no'}")
    parts.append(f"share={'yes' if job.accept_share else 'no'}")
    if job.elastic:  # left out otherwise: scripts rendered before the option stay the same
        parts.append("elastic=requeue")
    return ",".join(parts)


def render_sbatch(job: TrainingJob) -> str:
    """The sbatch script text; raises ``ValueError`` naming a bad field."""
    job.validate()
    return render(
        job.template,
        name=job.name, nodes=job.nodes, gpus_per_node=job.gpus_per_node, time=job.time,
        partition=job.partition, green_comment=USER_PREFIX + green_options_text(job),
        output=job.output, launcher=job.launcher, script=job.script, args=list(job.args), port=job.port,
    )
