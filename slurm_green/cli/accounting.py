"""``slurm-green report``: per-job, per-user and per-account energy and carbon over a period.

The figures come from the controller's store, opened read-only (``report.job_rows``):
energy metered by the Epilog where it was, else modelled while the job ran; carbon
as run; the estimated saving against starting each job when first seen. The account
is Slurm's: the store does not keep it, so it is read from ``sacct`` for the jobs
shown (one call per 500 jobs); without slurmdbd, accounts show as ``unknown`` and
``--account`` says why it cannot filter. docs/operations.md shows how this sits next
to ``sacct``.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from slurm_green.cli.errors import CliError
from slurm_green.cli.plot_extra import needs_plots
from slurm_green.cli.timefmt import iso, local_time_option, parse_time, stamp
from slurm_green.controller.config import DEFAULT_PATH, load_config
from slurm_green.controller.report import energy_kwh, in_period, job_report, summary, totals
from slurm_green.controller.store import Row
from slurm_green.core.text import terminal_safe
from slurm_green.slurm.commands import SCONTROL_ENV
from slurm_green.slurm.runner import CommandRunner, CommandTimeout, CommandUnavailable, LocalRunner

#: Job ids per sacct call: well under any command-line limit.
SACCT_CHUNK = 500
CSV_COLUMNS = ("job_id", "user", "account", "name", "state", "submit_time", "actual_start", "end_time",
               "decided_start", "gpu_type", "cap_fraction", "energy_kwh", "energy_method", "run_carbon_kg",
               "expected_carbon_kg", "carbon_if_now_kg", "reason")
#: The CSV columns of free text (the job's name is the user's, the reason the policy's words, ...).
CSV_TEXT_COLUMNS = frozenset({"user", "account", "name", "state", "gpu_type", "energy_method", "reason"})
#: What makes a spreadsheet read a cell as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def accounts(job_ids: list[int], runner: CommandRunner | None = None, timeout_s: float = 30.0) -> tuple[dict[int, str], str | None]:
    """Each job's Slurm account from sacct, and why none could be read (no slurmdbd, no sacct)."""
    runner = runner or LocalRunner()
    found: dict[int, str] = {}
    for first in range(0, len(job_ids), SACCT_CHUNK):
        chunk = ",".join(map(str, job_ids[first:first + SACCT_CHUNK]))
        argv = ("sacct", "-X", "-n", "-P", "-a", "--format=JobIDRaw,Account", "-j", chunk)
        try:
            result = runner.run(argv, timeout=timeout_s, env=SCONTROL_ENV)
        except (CommandUnavailable, CommandTimeout) as exc:  # no sacct here: the report stands without accounts
            return found, f"sacct: {exc}"
        if not result.ok:
            return found, f"sacct: {(result.stderr or result.stdout).strip()}"
        for line in result.stdout.splitlines():
            job, _, account = line.partition("|")
            if job.strip().isdigit():
                found[int(job)] = account.strip()
    return found, None


def _rows(config_path: Path, user: str | None, account: str | None, since: float | None, until: float | None,
          now: float) -> tuple[list[Row], list[str]]:
    rows, _ = job_report(load_config(config_path))
    rows = [r for r in rows if (user is None or r["user"] == user) and in_period(r, since, until, now)]
    found, problem = accounts([int(r["job_id"]) for r in rows]) if rows else ({}, None)
    if problem and account is not None:
        raise CliError(f"--account needs Slurm's accounting (sacct), which failed: {problem}")
    for row in rows:
        row["account"] = found.get(int(row["job_id"]))
        row["energy_kwh"], row["energy_method"] = energy_kwh(row)
    rows = [r for r in rows if account is None or r["account"] == account]
    return rows, [f"accounts unknown ({problem})"] if problem else []


def _text_cell(value: object) -> object:
    """A text cell a spreadsheet shows as text: a job name such as ``=HYPERLINK(...)`` (any user
    chooses it) would be a live formula when the admin opens the export, so text starting as a
    formula gets a leading ``'`` (OWASP's CSV injection advice). Only text columns pass here:
    a negative number in a numeric column must stay a number."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def _csv(rows: list[Row], local: bool) -> None:
    times = {"submit_time", "actual_start", "end_time", "decided_start"}
    # RFC 4180's CRLF: the writer quotes a field holding any character of its line terminator,
    # so a bare carriage return in a job name (with "\n" it went unquoted) makes no row of its own.
    writer = csv.DictWriter(sys.stdout, CSV_COLUMNS, extrasaction="ignore", lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        cells = {k: iso(row[k], local) if k in times else row.get(k) for k in CSV_COLUMNS}
        writer.writerow({k: _text_cell(v) if k in CSV_TEXT_COLUMNS else v for k, v in cells.items()})


def _plot(by_user: list[Row], path: Path, title: str) -> None:
    """Per user: carbon as run and the estimated saving, side by side."""
    import numpy as np
    from matplotlib.figure import Figure

    names = [str(g["user"]) for g in by_user]
    x = np.arange(len(names))
    fig = Figure(figsize=(max(5, len(names) * 0.8 + 2), 4))
    ax = fig.subplots()
    ax.bar(x - 0.2, [g["run_carbon_kg"] for g in by_user], 0.4, label="kg CO2 as run")
    ax.bar(x + 0.2, [g["saved_kg"] for g in by_user], 0.4, label="kg CO2 saved (estimate)")
    ax.set_xticks(x, names)
    ax.set_ylabel("kg CO2")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def _table(rows: list[Row], groups: dict[str, list[Row]], local: bool,
           title: str) -> None:
    """The per-job and per-group tables. Users (as the store recorded them), accounts (from sacct) and the
    title (which holds --user/--account as given) go in as literal, ``terminal_safe`` ``Text``: never rich
    markup (a ``[...]`` would vanish or fail the command), never a control character reaching the terminal."""
    console = Console()
    table = Table(title=Text(terminal_safe(title)))
    for column in ("job", "user", "account", "submit", "decided start", "actual start", "GPU", "cap", "kWh",
                   "kgCO2 (run)",
                   "kgCO2 (decided)", "kgCO2 (at once)"):
        table.add_column(column)
    for row in rows:
        kwh = "-" if row["energy_kwh"] is None else f"{row['energy_kwh']:.4f} {row['energy_method']}"
        table.add_row(str(row["job_id"]), Text(terminal_safe(str(row["user"] or "-"))),
                      Text(terminal_safe(str(row["account"] or "unknown"))),
                      stamp(row["submit_time"], local), stamp(row["decided_start"], local),
                      stamp(row["actual_start"], local), Text(terminal_safe(str(row.get("gpu_type") or "-"))),
                      "-" if row["cap_fraction"] is None else f"{row['cap_fraction']:.0%}", kwh,
                      _amount(row["run_carbon_kg"]), _amount(row["expected_carbon_kg"]),
                      _amount(row["carbon_if_now_kg"]))
    console.print(table)
    for key, summed in groups.items():
        group = Table(title=f"per {key}")
        for column in (key, "jobs", "kWh", "metered jobs", "kgCO2 (run)", "kgCO2 saved (estimate)"):
            group.add_column(column)
        for g in summed:
            group.add_row(Text(terminal_safe(str(g[key]))), str(g["jobs"]), f"{g['energy_kwh']:.4f}",
                          str(g["metered_jobs"]), f"{g['run_carbon_kg']:.4f}", f"{g['saved_kg']:.4f}")
        console.print(group)


def _amount(value: float | None) -> str:
    return "-" if value is None else f"{float(value):.4f}"


@click.command("report")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True,
              help="Controller configuration (TOML).")
@click.option("--user", help="Only this user's jobs.")
@click.option("--account", help="Only this Slurm account's jobs (read from sacct).")
@click.option("--since", help="Jobs in the system from this time: ISO (2026-11-01) or a duration ago (7d).")
@click.option("--until", help="... up to this time (ISO, or a duration ago); default now.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (times as POSIX seconds).")
@click.option("--csv", "as_csv", is_flag=True, help="One CSV row per job on stdout (times as ISO 8601).")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True, path_type=Path), callback=needs_plots,
              help="Write a PNG of carbon as run and saved, per user.")
@local_time_option
def report(config_path: Path, user: str | None, account: str | None, since: str | None, until: str | None,
           as_json: bool, as_csv: bool, plot: Path | None, local_time: bool) -> None:
    """Per managed job, user and account: energy (metered where measured), carbon, and the estimated saving."""
    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other")
    if plot is not None and not plot.parent.is_dir():
        raise click.BadParameter(f"{plot.parent} is not a directory", param_hint="--plot")
    now = time.time()
    start = parse_time(since, now, local=local_time, sign=-1, option="--since") if since else None
    end = parse_time(until, now, local=local_time, sign=-1, option="--until") if until else None
    if start is not None and end is not None and end <= start:
        raise click.BadParameter(f"{stamp(end, local_time)} is not after --since {stamp(start, local_time)}",
                                 param_hint="--until")
    rows, notes = _rows(config_path, user, account, start, end, now)
    groups = {"user": summary(rows, "user"), "account": summary(rows, "account")}
    title = (f"slurm-green: managed jobs {stamp(start, local_time) if start else 'from the first'} to "
             f"{stamp(end, local_time) if end else 'now'}" + (f", user {user}" if user else "")
             + (f", account {account}" if account else ""))
    if plot is not None:
        _plot(groups["user"], plot, title)
    if as_json:
        click.echo(json.dumps({"since": start, "until": end, "jobs": rows, "by_user": groups["user"],
                               "by_account": groups["account"], "totals": totals(rows), "notes": notes}, indent=2))
        return
    if as_csv:
        _csv(rows, local_time)
        for note in notes:
            click.echo(f"warning: {note}", err=True)
        return
    _table(rows, groups, local_time, title)
    summed = totals(rows)
    click.echo(f"estimated carbon saved: {summed['saved_kg']:.4f} kg ({summed['saved_fraction']:.1%}) over "
               f"{summed['jobs']} jobs")
    for note in notes:
        click.echo(f"note: {terminal_safe(note)}")
    if plot is not None:
        click.echo(f"plot written to {plot}")
