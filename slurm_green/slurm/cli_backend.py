"""The Slurm backend that speaks through Slurm's own commands (``squeue``, ``scontrol``).

A snapshot costs a fixed number of slurmctld RPCs whatever the queue length: 4.
Jobs come from one ``squeue`` printing only the fields used (``squeue_text``):
REQUEST_JOB_INFO, plus the REQUEST_PARTITION_INFO that squeue's text output always makes
(src/squeue/print.c loads partitions unconditionally). Nodes come from ``scontrol show
nodes --json`` (22.05: ``sinfo --json``): REQUEST_NODE_INFO + REQUEST_PARTITION_INFO, as
the tools load partitions to fill in each node's. ``squeue --json`` would save the one
partition RPC but renders every field of every job: 4-7 s instead of 0.07 s for 3,000
jobs on the test cluster, so it is only the fallback (``text_jobs=False`` forces it).
Partitions change rarely, so ``scontrol show partitions --oneliner`` (one more RPC) is
read only on the first snapshot and then once per ``partition_ttl_s``, and so are the
reservations (``scontrol show reservations --oneliner``). The reads are not
one atomic RPC: a job may change between them; the snapshot is as consistent as Slurm's
own tools are.

Actions are planned by ``commands.plan`` and run through the injected runner; every
failure becomes an ``ActionResult`` with a typed ``ActionError``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slurm_green.core.actions import Action, ActionError, ActionResult, SetDecision, SetGpus, SetNodes, ShareGpus
from slurm_green.core.clock import Clock, SystemClock
from slurm_green.core.cluster import ClusterSnapshot, Job, Node, Partition, Reservation
from slurm_green.core.decision_token import replace_token
from slurm_green.slurm import commands, schema, squeue_text
from slurm_green.slurm.errors import SlurmError, classify
from slurm_green.slurm.runner import CommandResult, CommandRunner, CommandTimeout, CommandUnavailable, LocalRunner

log = logging.getLogger(__name__)

# --states=all: jobs that ended within MinJobAge too (24.11 and later leave them out by
# default), so the controller sees how its jobs ended; the same one RPC.
SQUEUE = ("squeue", "--json", "--states=all")
# 23.02+ scontrol prints JSON; 22.05's scontrol has no --json, but its sinfo --json
# prints the same node records (openapi v0.0.38). Both cost NODE_INFO + PARTITION_INFO.
NODE_READERS = (("scontrol", "show", "nodes", "--json"), ("sinfo", "--json"))
SHOW_PARTITIONS = ("scontrol", "show", "partitions", "--oneliner")
# Run with squeue_text.ENV (SLURM_TIME_FORMAT=%s): start and end as epoch seconds.
SHOW_RESERVATIONS = ("scontrol", "show", "reservations", "--oneliner")

class CliBackend:
    """``ClusterBackend`` over Slurm's command-line tools.

    ``dry_run`` records the scontrol commands that ``apply`` would run (``recorded``)
    and reports them as successful; reads still go to Slurm. ``batch_jobs`` lets jobs
    receiving identical changes share one scontrol call. ``text_jobs=False`` always reads
    jobs as ``squeue --json`` (one RPC fewer, but far slower on a long queue; see
    ``squeue_text``). ``write_prefix`` goes before every command that changes a job
    (``("sudo", "-n")`` at a site without slurmdbd, where the service user cannot be made
    a Slurm operator; see docs/deploy.md); reads run as the service user.
    """

    def __init__(
        self,
        runner: CommandRunner | None = None,
        *,
        clock: Clock | None = None,
        timeout_s: float = 30.0,
        dry_run: bool = False,
        batch_jobs: bool = True,
        partition_ttl_s: float = 300.0,
        text_jobs: bool = True,
        write_prefix: Sequence[str] = (),
    ) -> None:
        self.runner = runner or LocalRunner()
        self.clock = clock or SystemClock()
        self.timeout_s = timeout_s
        self.dry_run = dry_run
        self.batch_jobs = batch_jobs
        self.partition_ttl_s = partition_ttl_s
        self.write_prefix = tuple(write_prefix)
        self.recorded: list[tuple[str, ...]] = []
        self._partitions: tuple[Partition, ...] = ()
        self._reservations: tuple[Reservation, ...] = ()
        self._partitions_at: float | None = None
        self._last: ClusterSnapshot | None = None
        self._node_reader = 0
        self._text_jobs = text_jobs  # turned off if this squeue lacks one of squeue_text's fields

    # -- reading -------------------------------------------------------------------

    @property
    def reads_jobs_as_text(self) -> bool:
        """False once this squeue refused a field of the text read (then jobs come as JSON)."""
        return self._text_jobs

    def _run(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> CommandResult:
        try:
            return self.runner.run(argv, timeout=self.timeout_s, env={**commands.SCONTROL_ENV, **(env or {})})
        except CommandTimeout as exc:
            return CommandResult(tuple(argv), -1, "", str(exc) + " (Socket timed out)")
        except CommandUnavailable as exc:
            return CommandResult(tuple(argv), -1, "", str(exc))

    def _read_jobs(self) -> tuple[Job, ...]:
        """All jobs: as ``squeue -O`` text when it reads soundly, else as ``squeue --json``."""
        if self._text_jobs:
            delimiter = squeue_text.new_delimiter()
            argv = squeue_text.argv(delimiter)
            result = self._run(argv, squeue_text.ENV)
            if not result.ok:
                message = (result.stderr or result.stdout).strip()
                raise SlurmError(classify(message), f"squeue failed: {message}")
            if squeue_text.UNSUPPORTED_FIELD in result.stderr:
                self._text_jobs = False
                log.info("squeue here lacks a field of the text read (%s); reading jobs as JSON",
                         result.stderr.strip())
            else:
                try:
                    return squeue_text.parse_jobs(result.stdout, delimiter)
                except squeue_text.TextFormatError as exc:
                    log.warning("reading this snapshot's jobs as JSON: %s", exc)
        return schema.parse_jobs(self._read_json(SQUEUE))

    def _read_json(self, argv: Sequence[str]) -> dict[str, Any]:
        result = self._run(argv)
        message = (result.stderr or result.stdout).strip()
        if not result.ok:
            raise SlurmError(classify(message), f"{' '.join(argv)} failed: {message}")
        try:
            document = json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmError(ActionError.OTHER, f"{' '.join(argv)} printed no JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise SlurmError(ActionError.OTHER, f"{' '.join(argv)} printed JSON that is not an object")
        problems = schema.errors(document)
        if problems and not (document.get("jobs") or document.get("nodes") or document.get("partitions")):
            raise SlurmError(classify(problems[0]), f"{' '.join(argv)}: {'; '.join(problems)}")
        return document

    def _read_nodes(self) -> dict[str, Any]:
        """Node records, from the first reader this Slurm understands (remembered)."""
        while True:
            argv = NODE_READERS[self._node_reader]
            try:
                return self._read_json(argv)
            except SlurmError as exc:
                unsupported = "unrecognized option" in str(exc) or "invalid option" in str(exc)
                if not unsupported or self._node_reader + 1 >= len(NODE_READERS):
                    raise
                log.info(
                    "%s is not supported here; reading nodes with %s",
                    " ".join(argv),
                    " ".join(NODE_READERS[self._node_reader + 1]),
                )
                self._node_reader += 1

    def _site_tables(self, now: float) -> tuple[tuple[Partition, ...], tuple[Reservation, ...]]:
        """Partitions and the reservations not yet ended, read again once ``partition_ttl_s`` has
        passed: both change rarely, and a reservation is made ahead of its hours (one that starts
        at once marks its nodes ``RESERVED`` in the node read, every snapshot)."""
        fresh = self._partitions_at is not None and now - self._partitions_at < self.partition_ttl_s
        if not fresh:
            self._partitions = schema.parse_partitions_text(self._show(SHOW_PARTITIONS))
            self._reservations = schema.parse_reservations_text(self._show(SHOW_RESERVATIONS, squeue_text.ENV))
            self._partitions_at = now
        return self._partitions, tuple(r for r in self._reservations if r.end > now)

    def _show(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        result = self._run(argv, env)
        if not result.ok:
            message = (result.stderr or result.stdout).strip()
            raise SlurmError(classify(message), f"{' '.join(argv)} failed: {message}")
        return result.stdout

    def snapshot(self) -> ClusterSnapshot:
        """Jobs, nodes and partitions; raises ``SlurmError`` if Slurm cannot be read."""
        taken_at = self.clock.now()
        jobs = self._read_jobs()
        nodes_document = self._read_nodes()
        partitions, reservations = self._site_tables(taken_at)
        snapshot = ClusterSnapshot(
            taken_at=taken_at,
            slurm_version=schema.slurm_version(nodes_document),
            jobs=jobs,
            nodes=schema.parse_nodes(nodes_document),
            partitions=partitions,
            reservations=reservations,
        )
        self._last = snapshot
        return snapshot

    def _job_info(self, job_id: int) -> Job | None:
        """The job as last seen, or read now (one RPC) when the last snapshot lacks it."""
        job = self._last.job(job_id) if self._last else None
        if job is not None:
            return job
        try:
            jobs = schema.parse_jobs(self._read_json(("scontrol", "show", "job", str(job_id), "--json")))
        except SlurmError:
            return None
        return next((job for job in jobs if job.job_id == job_id), None)

    # -- changing ------------------------------------------------------------------

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry out actions in order; one result per action. Never raises for Slurm's errors."""
        results: dict[int, ActionResult] = {}
        known: dict[int, Job | None] = {}
        runnable: list[tuple[int, Action]] = []
        shares = self._shares(actions, results)
        for index, action in enumerate(actions):
            if index in results:
                continue
            if isinstance(action, (SetDecision, SetGpus)):
                # Both rewrite a field from its current value (comment, GPU type).
                if action.job_id not in known:
                    known[action.job_id] = self._job_info(action.job_id)
                if known[action.job_id] is None and isinstance(action, SetDecision):
                    results[index] = ActionResult(action, ActionError.JOB_GONE, "job not found; comment unknown")
                    continue
            if isinstance(action, (SetGpus, ShareGpus)):
                # Both rewrite the job's GRES request keeping its other entries (commands.job_gres).
                why = commands.unsafe_gres(known.get(action.job_id) or self._job_cached(action.job_id))
                if why is not None:
                    results[index] = ActionResult(action, ActionError.INVALID, why)
                    continue
            runnable.append((index, action))
        now = self.clock.now()
        planned = commands.plan(
            commands.without_refused_jobs(runnable, results),
            lambda job_id: known.get(job_id) or self._job_cached(job_id), now, self.batch_jobs,
            lambda action: shares[action.job_id],
        )
        unreachable: str | None = None
        for command in planned:
            unreachable = self._execute(command, actions, results, unreachable)
        self._remember_comments(actions, results)
        return [results[index] for index in range(len(actions))]

    def _shares(self, actions: Sequence[Action], results: dict[int, ActionResult]) -> dict[int, str]:
        """The ``Gres`` of each ``ShareGpus`` (``commands.share_gres``); one Slurm cannot enact is
        answered INVALID here, so the job's start waits (``controller.enactment``)."""
        pins = {a.job_id: a.nodes for a in actions if isinstance(a, SetNodes) and a.nodes}
        shares: dict[int, str] = {}
        for index, action in enumerate(actions):
            if not isinstance(action, ShareGpus):
                continue
            partner = self._job_info(action.with_job)
            job = self._job_cached(action.job_id)
            names = pins.get(action.job_id) or (job.nodes if job else ()) or (partner.nodes if partner else ())
            try:
                shares[action.job_id] = commands.share_gres(partner, self._node(names[0] if names else None))
            except commands.ShareRefused as exc:
                results[index] = ActionResult(action, ActionError.INVALID, f"cannot share a GPU: {exc}")
        return shares

    def _node(self, name: str | None) -> Node | None:
        """The node as last seen; without a name, any node with shards (their count per GPU is the site's)."""
        nodes = self._last.nodes if self._last else ()
        return next((n for n in nodes if n.name == name or (name is None and n.shards_total)), None)

    def _job_cached(self, job_id: int) -> Job | None:
        return self._last.job(job_id) if self._last else None

    def _execute(
        self,
        command: commands.Command,
        actions: Sequence[Action],
        results: dict[int, ActionResult],
        unreachable: str | None,
    ) -> str | None:
        """Run one planned command (falling back to finer ones); returns the outage message if any."""
        if unreachable is not None:
            for index in command.actions:
                results[index] = ActionResult(actions[index], ActionError.UNREACHABLE, unreachable)
            return unreachable
        if self.dry_run:
            self.recorded.append(command.argv)
            for index in command.actions:
                results[index] = ActionResult(actions[index], None, "dry-run: " + " ".join(command.argv))
            return None
        result = self._run((*self.write_prefix, *command.argv))
        if result.ok:
            for index in command.actions:
                results[index] = ActionResult(actions[index], None, " ".join(command.argv))
            return None
        message = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        error = classify(message)
        log.info("%s failed (%s): %s", " ".join(command.argv), error.value, message)
        if error is ActionError.UNREACHABLE:
            for index in command.actions:
                results[index] = ActionResult(actions[index], error, message)
            return message
        if command.fallback:  # a call shared by several jobs: one call per job says whose it was
            for finer in command.fallback:
                unreachable = self._execute(finer, actions, results, unreachable)
            return unreachable
        for index in command.actions:
            results[index] = ActionResult(actions[index], error, message)
        return None

    def _remember_comments(self, actions: Sequence[Action], results: dict[int, ActionResult]) -> None:
        """Keep comments we wrote, so a second decision before the next snapshot keeps the user's words."""
        if self._last is None or self.dry_run:
            return
        written = {
            action.job_id: action.token
            for index, action in enumerate(actions)
            if isinstance(action, SetDecision) and results[index].ok
        }
        if not written:
            return
        jobs = tuple(
            replace(job, comment=replace_token(job.comment, written[job.job_id])) if job.job_id in written else job
            for job in self._last.jobs
        )
        self._last = replace(self._last, jobs=jobs, _job_index={})
