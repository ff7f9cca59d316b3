"""Build a working controller from a validated configuration (the daemon's wiring).

Kept apart from ``tick`` so that tests and the simulator can assemble their own
parts, while ``slurm-green run``/``plan`` get exactly what the config says.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import pandas as pd

from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.source import CarbonSource, NoCarbonSource
from slurm_green.carbon.spec import parse_sources
from slurm_green.controller.budget import PeriodBudget
from slurm_green.controller.config import Config
from slurm_green.controller.progress import ProgressReader
from slurm_green.controller.resize import Resizer, ResizeSettings
from slurm_green.controller.store import StateStore
from slurm_green.controller.telemetry import EnergyInbox, MeteredEnergy
from slurm_green.controller.tick import Controller
from slurm_green.core import decision_token
from slurm_green.core.clock import Clock, SystemClock
from slurm_green.core.plan import Policy
from slurm_green.models import default_registry
from slurm_green.policy.registry import make_policy
from slurm_green.policy.running import resizes_running, resizing, with_restart_cost
from slurm_green.slurm.factory import make_backend

log = logging.getLogger(__name__)
#: Seconds between fetches while the sources fail (sooner if refresh_s is shorter).
RETRY_S = 60.0


@dataclass
class Assembly:
    controller: Controller
    feed: CarbonFeed
    clock: Clock


def build_feed(config: Config, clock: Clock, *, read_only: bool = False) -> CarbonFeed:
    """The feed over the configured sources. Nothing here reads a file or asks a provider, so a
    source that is broken at start fails at the first refresh (the chain moves on), never here.
    ``read_only``: the carbon cache is read, never created or written."""
    carbon = config.carbon
    return CarbonFeed(carbon_source(config), cache_path=carbon.cache_dir / "carbon.json",
                      horizon=pd.Timedelta(hours=carbon.horizon_h), refresh_interval=carbon.refresh_s,
                      retry_interval=min(RETRY_S, carbon.refresh_s), max_age=carbon.max_age_s, clock=clock.now,
                      read_only=read_only)


def carbon_source(config: Config) -> CarbonSource:
    """The configured chain, saying loudly when there is none or when it may answer made-up numbers."""
    if not config.carbon.sources:
        log.warning("no carbon source configured ([carbon] sources): the controller is carbon-agnostic, "
                    "no job is deferred for carbon")
        return NoCarbonSource()
    source = parse_sources(config.carbon.sources, CarbonSecrets.load())
    members = source.sources if isinstance(source, FallbackChain) else [source]
    if any(member.synthetic for member in members):
        log.warning("carbon source 'synthetic' (made-up numbers) may drive this controller: "
                    "[carbon] allow_synthetic = true is for demos only")
    return source


def build_policy(config: Config) -> Policy:
    """``[policy]``'s policy; with ``[elastic] requeue``, it also grows running elastic jobs
    (with ``shrink``, shrinks one for the blocked head of the queue; with ``shrink_when_dear``,
    one whose carbon the budget's price makes dear). ``icefrog`` does
    both itself (the configuration requires ``requeue`` for it) and pays ``[elastic]``'s
    restart cost."""
    policy = make_policy(config.policy)
    elastic = config.elastic
    if not elastic.requeue:
        return policy
    if resizes_running(policy):
        return with_restart_cost(policy, elastic.restart_cost_s)
    return resizing(policy, restart_cost_s=elastic.restart_cost_s, energy_slack=config.policy.gpu_time_slack,
                    shrink=elastic.shrink, when_dear=elastic.shrink_when_dear)


def build_resizer(config: Config, store: StateStore | None) -> Resizer | None:
    """The resizes of running elastic jobs (``[elastic] requeue``); they need the store."""
    elastic, directory = config.elastic, config.progress_dir
    if not elastic.requeue or store is None or directory is None:
        return None
    return Resizer(store, ProgressReader(directory), ResizeSettings(
        signal=elastic.signal, signal_batch=elastic.signal_batch, checkpoint_timeout_s=elastic.checkpoint_timeout_s,
        max_attempts=elastic.max_attempts, min_interval_s=elastic.min_interval_h * 3600,
        learn_scaling=elastic.learn_scaling, settle_s=elastic.settle_s))


def build_budget(config: Config) -> PeriodBudget | None:
    """``[budget]`` as the controller paces it; None when it sets no limit."""
    settings = config.budget
    if settings.limit is None:
        return None
    return PeriodBudget(resource="carbon" if settings.carbon_kg is not None else "energy", limit=settings.limit,
                        period=settings.period, zone=ZoneInfo(settings.timezone), min_scale=settings.min_scale,
                        max_scale=settings.max_scale)


def signer(config: Config) -> tuple[decision_token.Signer, decision_token.Verifier] | tuple[None, None]:
    """Sign and verify functions over the site key; without a key no cap decisions are sent."""
    path = config.controller.decision_key_file
    try:
        key = decision_token.load_key(path)
    except (OSError, ValueError) as exc:
        log.warning("no decision key (%s): power-cap decisions will not be sent to the nodes", exc)
        return None, None
    return functools.partial(decision_token.sign, key), functools.partial(decision_token.verify, key)


def assemble(config: Config, *, dry_run: bool | None = None, with_store: bool = True, clock: Clock | None = None) -> Assembly:
    clock = clock or SystemClock()
    dry = config.controller.dry_run if dry_run is None else dry_run
    sign, verify = signer(config)
    store = StateStore(config.controller.state_db) if with_store else None
    telemetry_dir = config.controller.telemetry_dir
    controller = Controller(
        backend=make_backend(prefer=config.slurm.backend, dry_run=dry, clock=clock,
                             timeout_s=config.slurm.command_timeout_s,
                             text_jobs=config.slurm.read_jobs == "text",
                             write_prefix=tuple(config.slurm.write_prefix)),
        policy=build_policy(config),
        carbon=None,
        models=default_registry(params_path=config.controller.model_params,
                                corrections_path=config.controller.model_corrections),
        store=store,
        sign=sign,
        verify=verify,
        dry_run=dry,
        gpu_enact=config.gpu.enact,
        telemetry=(MeteredEnergy(EnergyInbox(telemetry_dir), store, learn=config.gpu.enact == "power_cap")
                   if telemetry_dir and store else None),
        retention_s=config.controller.retention_days * 86400 if config.controller.retention_days else None,
        budget=build_budget(config) if store is not None else None,
        resizer=build_resizer(config, store),
    )
    feed = build_feed(config, clock, read_only=not with_store)  # no store (plan): no carbon cache written either
    controller.carbon = feed
    return Assembly(controller, feed, clock)
