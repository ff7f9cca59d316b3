"""The controller's configuration: a TOML file validated with errors that name the key.

Default path ``/etc/slurm-green/config.toml``; every key has a sensible default, so
an empty file (or none at the default path) is a valid configuration; a ``--config``
naming a file that does not exist is an error, not the defaults.
"""

from __future__ import annotations

import signal
import tomllib
from pathlib import Path
from typing import Literal

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from slurm_green.carbon.spec import parse_source_spec, split_specs
from slurm_green.core.gpu_freq import Enactment
from slurm_green.policy.placement.scorer import PLUGINS
from slurm_green.policy.placement.site import check_weights
from slurm_green.policy.registry import POLICY_NAMES, PolicyKnobs

DEFAULT_PATH = Path("/etc/slurm-green/config.toml")


class _Section(BaseModel):
    # inf and nan are refused where they are read (TOML has both): no setting means them, and
    # each would otherwise crash the controller later, far from the key (a horizon of inf hours).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ControllerSettings(_Section):
    interval_s: float = Field(300.0, gt=0, description="seconds between ticks")
    state_db: Path = Path("/var/lib/slurm-green/state.db")
    decision_key_file: Path = Path("/etc/slurm-green/decision.key")
    dry_run: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    metrics_port: int | None = Field(None, ge=1, le=65535, description="Prometheus exporter port; none = off")
    retention_days: float | None = Field(90.0, gt=0, description="days the store keeps ended jobs; none = for ever")
    telemetry_dir: Path | None = Field(None, description="where Epilogs leave metered GPU energy; none = off")
    model_corrections: Path | None = Field(None, description="file keeping the models' telemetry corrections")
    model_params: Path | None = Field(
        None, description="the site's fitted model parameters (slurm-green models fit); default: the packaged ones")


class SlurmSettings(_Section):
    backend: Literal["auto", "cli", "pyslurm"] = Field(
        "cli", description="cli (tested against Slurm 22.05/24.11/26.05) | pyslurm | auto (pyslurm when it matches)")
    write_prefix: list[str] = Field(
        default_factory=list,
        description='what runs the controller\'s scontrol updates, e.g. ["sudo", "-n"] where no slurmdbd '
                    'can grant operator rights (docs/deploy.md)')
    command_timeout_s: float = Field(15.0, gt=0)
    read_jobs: Literal["text", "json"] = Field(
        "text", description="squeue text (4 RPCs, fast) or squeue --json (3 RPCs, ~10x slower on long queues)")


SYNTHETIC_REFUSED = (
    "'synthetic' is made-up data and never drives a controller: remove it from [carbon] sources "
    "(no source = carbon-agnostic), or set [carbon] allow_synthetic = true for a demo"
)


class CarbonSettings(_Section):
    """Where carbon intensity comes from. No source is the default: the controller is then
    carbon-agnostic (and says so), never carbon-aware on numbers nobody measured."""

    allow_synthetic: bool = Field(False, description="let the made-up 'synthetic' source drive a controller (demos)")
    sources: list[str] = Field(default_factory=list, description="source specs, first healthy wins; none = agnostic")
    cache_dir: Path = Path("/var/cache/slurm-green")
    horizon_h: float = Field(48.0, gt=0)
    refresh_s: float = Field(600.0, gt=0, description="seconds between forecast fetches (60 at most while failing)")
    max_age_s: float = Field(3 * 3600.0, gt=0, description="how long the last forecast serves while sources fail")

    @field_validator("sources")
    @classmethod
    def _specs_are_usable(cls, sources: list[str], info: ValidationInfo) -> list[str]:
        """Each spec parses (no file is read, no credential needed: those fail at run time, as sources);
        'synthetic' only where allowed, because nothing else would stop made-up numbers deferring real jobs."""
        built = [parse_source_spec(spec) for spec in split_specs(sources)]
        if any(source.synthetic for source in built) and not info.data.get("allow_synthetic"):
            raise ValueError(SYNTHETIC_REFUSED)
        return sources


_KNOBS = PolicyKnobs()


class PolicySettings(_Section):
    """Which policy decides, and its knobs (``policy/registry.py`` builds it)."""

    name: str = Field(_KNOBS.name, description=f"one of: {', '.join(POLICY_NAMES)}")
    cap_fraction: float | None = Field(_KNOBS.cap_fraction, gt=0.0, le=1.0,
                                       description="window: GPU power cap, fraction of board max")
    default_runtime_h: float = Field(_KNOBS.default_runtime_h, gt=0,
                                     description="runtime assumed for a job without a time limit")
    budget_fraction: float = Field(
        _KNOBS.budget_fraction, gt=0.0, description="greenflow/powerflow: carbon (energy) a plan may spend, as a "
                                                    "fraction of the same jobs run carbon-agnostically; 1 = never "
                                                    "worse than that plan")
    place_nodes: bool = Field(_KNOBS.place_nodes,
                              description="greenflow/powerflow: pin jobs started now to nodes (ReqNodeList)")
    # The guards that keep GreenFlow/PowerFlow from slowing the cluster for the jobs that arrive
    # next (docs/policies.md); a large value lifts one.
    gpu_time_slack: float = Field(_KNOBS.gpu_time_slack, ge=0.0, description="greenflow/powerflow: a job may hold "
                                                                             "at most (1 + this) x the GPU-hours of "
                                                                             "its request")
    runtime_slack: float = Field(_KNOBS.runtime_slack, ge=0.0, description="greenflow/powerflow: a job may run at "
                                                                           "most (1 + this) x as long as its request "
                                                                           "at full power")
    growth_horizon_h: float = Field(_KNOBS.growth_horizon_h, ge=0.0, description="greenflow/powerflow: a job gets "
                                                                                 "more GPUs than it asked for only if "
                                                                                 "it then runs at most this long")
    budget_slack: float = Field(_KNOBS.budget_slack, ge=0.0, description="greenflow/powerflow: a budget is held no "
                                                                         "tighter than the least carbon (energy) a "
                                                                         "plan reaches plus this x the carbon-"
                                                                         "agnostic plan's; 0: exactly as set")
    eta: float = Field(_KNOBS.eta, ge=0.0, le=1.0, description="zeus: weight of energy against time (1: energy only)")
    placement: dict[str, float] = Field(default_factory=lambda: dict(_KNOBS.placement),
                                        description="greenflow/powerflow: weights of the placement plugins that "
                                                    "choose a one-node job's node, e.g. {pwr = 0.5, fgd = 0.5} "
                                                    f"(of {', '.join(PLUGINS)}); empty: the fullest node with "
                                                    "a fitting block")

    colocate: bool = Field(_KNOBS.colocate, description="greenflow/powerflow: a job the plan does not start now "
                                                        "may share a one-GPU job's GPU where that costs less than "
                                                        "its plan (both jobs need share=yes; EaCO's bound 1.25)")

    @field_validator("placement")
    @classmethod
    def _known_plugins(cls, weights: dict[str, float]) -> dict[str, float]:
        return check_weights(weights)

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in POLICY_NAMES:
            raise ValueError(f"unknown policy; choose from {', '.join(POLICY_NAMES)}")
        return name


class GpuSettings(_Section):
    enact: Enactment = "power_cap"


class BudgetSettings(_Section):
    """A budget per period for greenflow (``carbon_kg``) or powerflow (``energy_kwh``), paced
    tick by tick with what already ran (``controller/budget.py``). No limit: no period budget."""

    period: Literal["day", "week"] = Field("day", description="day | week, from midnight (Monday) in `timezone`")
    carbon_kg: float | None = Field(None, gt=0, description="greenflow: kg CO2eq managed jobs' GPUs may emit a period")
    energy_kwh: float | None = Field(None, gt=0, description="powerflow: kWh managed jobs' GPUs may use a period")
    timezone: str = Field("UTC", description="IANA zone whose midnight starts a period, e.g. Europe/Berlin")
    min_scale: float = Field(0.5, gt=0.0, le=1.0, description="tightest multiple of [policy] budget_fraction")
    max_scale: float = Field(2.0, ge=1.0, description="loosest multiple of [policy] budget_fraction")

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone (e.g. UTC, Europe/Berlin)") from None
        return zone

    @property
    def limit(self) -> float | None:
        return self.carbon_kg if self.carbon_kg is not None else self.energy_kwh


class ElasticSettings(_Section):
    """Resizing running jobs that opted in (``green:elastic=requeue``) by checkpoint and requeue
    (``controller/resize.py``). Off by default: a requeue stops a running job."""

    requeue: bool = Field(False, description="let the controller checkpoint, requeue and resize elastic jobs")
    progress_dir: Path | None = Field(None, description="where jobs' progress reports are read; "
                                                        "default: <controller.telemetry_dir>/progress")
    signal: str = Field("USR2", description="the signal asking for a checkpoint (the training helper's: USR2)")
    signal_batch: bool = Field(False, description="signal the batch script's shell (a script that execs its "
                                                  "trainer) instead of the job's srun steps")
    checkpoint_timeout_s: float = Field(600.0, gt=0, description="how long to wait for the checkpoint before "
                                                                 "giving up (the job then runs on unchanged)")
    max_attempts: int = Field(3, ge=1, description="resizes per job, at most")
    min_interval_h: float = Field(1.0, ge=0, description="hours between two resizes of one job, at least")
    restart_cost_s: float = Field(300.0, ge=0, description="what a checkpoint-requeue-restart costs a job, in "
                                                           "seconds of its run: a resize must gain more")
    shrink: bool = Field(False, description="also shrink a running elastic job so that the blocked job at "
                                            "the head of the queue starts (when its wait saved is at least twice "
                                            "the shrunk job's loss)")
    learn_scaling: bool = Field(True, description="rate a job that was resized by how its own progress reports "
                                                  "say it scaled between its sizes, where that is worse than its "
                                                  "model (never better: the reports are its user's)")
    settle_s: float = Field(300.0, ge=0, description="a report counts towards a job's rate only this long after "
                                                     "the job (re)started: its first steps are not its pace")
    shrink_when_dear: bool = Field(False, description="also shrink a running elastic job when the budget's price "
                                                      "(greenflow, powerflow below a budget of 1) makes its remaining "
                                                      "carbon (energy) worth more than the time it loses, while the "
                                                      "policy holds pending jobs back")

    @field_validator("signal")
    @classmethod
    def _a_signal(cls, name: str) -> str:
        name = name.upper().removeprefix("SIG")
        if name not in signal.Signals.__members__ and f"SIG{name}" not in signal.Signals.__members__:
            raise ValueError("not a signal name (e.g. USR2)")
        if name in ("KILL", "TERM", "INT", "STOP", "HUP"):
            raise ValueError("a signal that stops the job cannot ask it for a checkpoint")
        return name


class Config(_Section):
    controller: ControllerSettings = ControllerSettings()
    slurm: SlurmSettings = SlurmSettings()
    carbon: CarbonSettings = CarbonSettings()
    policy: PolicySettings = PolicySettings()
    gpu: GpuSettings = GpuSettings()
    budget: BudgetSettings = BudgetSettings()
    elastic: ElasticSettings = ElasticSettings()

    @model_validator(mode="after")
    def _budget_fits_the_policy(self) -> Config:
        """A period budget is GreenFlow's (carbon) or PowerFlow's (energy): anything else would be
        a budget nobody keeps, so it is refused rather than ignored."""
        budget = self.budget
        if budget.carbon_kg is not None and budget.energy_kwh is not None:
            raise ValueError("budget: set carbon_kg (greenflow, icefrog) or energy_kwh (powerflow), not both")
        wants = {"greenflow": "carbon_kg", "icefrog": "carbon_kg", "powerflow": "energy_kwh"}.get(self.policy.name)
        given = "carbon_kg" if budget.carbon_kg is not None else "energy_kwh" if budget.energy_kwh is not None else None
        if given is not None and given != wants:
            needs = f"policy.name = {'greenflow or icefrog' if given == 'carbon_kg' else 'powerflow'}"
            raise ValueError(f"budget.{given} is kept only by {needs} (policy.name is {self.policy.name!r})")
        return self

    @model_validator(mode="after")
    def _icefrog_resizes(self) -> Config:
        """``icefrog`` decides running jobs' sizes: without requeue nothing would enact them."""
        if self.policy.name == "icefrog" and not self.elastic.requeue:
            raise ValueError("policy.name = 'icefrog' resizes running elastic jobs: set [elastic] requeue = true "
                             "(with progress_dir or controller.telemetry_dir)")
        return self

    @model_validator(mode="after")
    def _colocate_is_priced(self) -> Config:
        """``colocate`` prices sharing in GreenFlow's cost: refused where no such cost exists
        (``eaco`` shares by its bound alone) rather than left doing nothing."""
        if self.policy.colocate and self.policy.name not in ("greenflow", "powerflow", "icefrog"):
            raise ValueError("policy.colocate prices co-location in GreenFlow's cost: it needs policy.name = "
                             "'greenflow', 'powerflow' or 'icefrog' ('eaco' co-locates by itself)")
        return self

    @model_validator(mode="after")
    def _shrink_when_dear_is_priced(self) -> Config:
        """Shrinking for carbon trades by a budget's price: only greenflow and powerflow set one,
        and only requeue enacts it. Refused rather than left doing nothing."""
        if self.elastic.shrink_when_dear and not (self.elastic.requeue
                                                   and self.policy.name in ("greenflow", "powerflow")):
            raise ValueError("elastic.shrink_when_dear trades by a budget's price: it needs policy.name = "
                             "'greenflow' or 'powerflow' and [elastic] requeue = true")
        return self

    @model_validator(mode="after")
    def _prefix_needs_the_cli(self) -> Config:
        """pyslurm changes jobs through libslurm in the controller's own process, so no
        ``sudo`` can come between: refused when the file is read, not at the first tick."""
        if self.slurm.write_prefix and self.slurm.backend == "pyslurm":
            raise ValueError("slurm.write_prefix runs scontrol through a command, which slurm.backend = 'pyslurm' "
                             "cannot: use backend = 'cli' (or 'auto', which then takes the CLI)")
        return self

    @model_validator(mode="after")
    def _elastic_reads_progress(self) -> Config:
        """A resize waits for the job's checkpoint, which only its progress report names."""
        if self.elastic.requeue and self.elastic.progress_dir is None and self.controller.telemetry_dir is None:
            raise ValueError("elastic.requeue needs elastic.progress_dir or controller.telemetry_dir "
                             "(the jobs' progress reports say when their checkpoint is written)")
        return self

    @property
    def progress_dir(self) -> Path | None:
        """Where the jobs' progress reports are: ``[elastic] progress_dir``, else the telemetry's."""
        if self.elastic.progress_dir is not None:
            return self.elastic.progress_dir
        return self.controller.telemetry_dir / "progress" if self.controller.telemetry_dir else None


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names each bad key."""


def _describe(error: ValidationError, path: Path) -> str:
    lines = [f"{path}: invalid configuration"]
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(item["loc"][:-1]))
            lines.append(f"  {key}: unknown key (allowed here: {allowed})")
        elif not key:  # a rule across sections names its keys itself
            lines.append(f"  {item['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"  {key}: {item['msg']} (got {item.get('input')!r})")
    return "\n".join(lines)


def _allowed_keys(section: tuple[object, ...]) -> list[str]:
    """The keys the model at ``section`` (a path of field names) accepts."""
    model: type[BaseModel] = Config
    for name in section:
        annotation = model.model_fields[str(name)].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return list(model.model_fields)


def load_config(path: Path | str | None = None) -> Config:
    """Read and validate ``path``; a missing default file means all defaults."""
    path = Path(path) if path is not None else DEFAULT_PATH
    if not path.exists():
        if path == DEFAULT_PATH:
            return Config()
        raise ConfigError(f"{path}: no such configuration file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))  # TOML is UTF-8, whatever the locale
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (TOML files are): byte {exc.start} cannot be read") from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path)) from exc
