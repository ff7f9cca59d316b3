"""Benchmark the built-in carbon forecaster and the controller's carbon lookup.

For each shared 2023 region it evaluates 24 h-ahead forecasts on a rolling
origin (every hour, using only data up to the origin) and prints the MAPE of
the built-in SeasonalForecaster beside persistence (the value now, repeated)
and day-ago (the same hour yesterday). Horizons 1..24 h are pooled. Hours with
an actual below 1 gCO2eq/kWh are excluded from MAPE (it is undefined at 0); the
count is printed. The forecaster's defaults were tuned on January-June
(``--tune`` reruns that search on H1 only); the H2 column is the hold-out.

It then times the lookup a controller tick makes (``CarbonFeed.snapshot()``
plus ``value_at`` and ``mean_over``) and prints the median in microseconds.

Run: ``.venv/bin/python benchmarks/carbon_forecast.py [--tune] [--step 1]``
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import click
import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import track
from rich.table import Table

from slurm_green.carbon.datasets import carbon_files, shared_data_dir
from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.files import read_carbon_csv
from slurm_green.carbon.forecast import SeasonalForecaster
from slurm_green.carbon.synthetic import SyntheticSource

HORIZON = 24
WARMUP = 14 * 24  # hours of history before the first origin
MIN_ACTUAL = 1.0

console = Console(width=130)


def rolling_errors(values: np.ndarray, forecaster: SeasonalForecaster, origins: np.ndarray) -> dict[str, np.ndarray]:
    """Absolute percentage errors (origins x horizons) of each method; NaN where excluded."""
    steps = np.arange(1, HORIZON + 1)
    actual = values[origins[:, None] + steps]
    ours = np.stack([forecaster.predict(values[: o + 1], 24, HORIZON)[1:] for o in origins])
    persistence = np.repeat(values[origins][:, None], HORIZON, axis=1)
    day_ago = values[origins[:, None] + steps - 24]
    usable = actual >= MIN_ACTUAL
    return {
        name: np.where(usable, np.abs(pred - actual) / np.where(usable, actual, 1.0), np.nan)
        for name, pred in (("ours", ours), ("persistence", persistence), ("day_ago", day_ago))
    }


def origins_for(index: pd.DatetimeIndex, step: int, months: range | None = None) -> np.ndarray:
    """Origins after the warm-up with 24 h of future data, optionally only in some months."""
    origins = np.arange(WARMUP, len(index) - HORIZON, step)
    if months is not None:
        origins = origins[np.isin(index[origins].month, list(months))]
    return origins


def load_regions() -> dict[str, pd.Series]:
    files = carbon_files()
    if not files:
        raise click.ClickException(f"no carbon CSVs under {shared_data_dir() / 'carbon'} (set SLURM_GREEN_DATA)")
    return {region: read_carbon_csv(path) for region, path in files.items()}


def tune(regions: dict[str, pd.Series]) -> SeasonalForecaster:
    """Grid-search the forecaster on January-June only (mean of per-region MAPE)."""
    grid = {
        "days": [7, 14],
        "day_weight_ratio": [0.5, 0.7, 1.0],
        "weekly_weight": [0.0, 0.2, 0.4],
        "half_life_hours": [3.0, 6.0, 12.0, 24.0],
        "anomaly_floor": [0.0, 0.2, 0.4, 0.6],
    }
    series = {r: (s.to_numpy(), origins_for(s.index, 5, range(1, 7))) for r, s in regions.items()}
    best, best_score = SeasonalForecaster(), np.inf
    combos = list(itertools.product(*grid.values()))
    for combo in track(combos, description="tuning on H1", console=console):
        candidate = replace(SeasonalForecaster(), **dict(zip(grid, combo)))
        score = np.mean([np.nanmean(rolling_errors(v, candidate, o)["ours"]) for v, o in series.values()])
        if score < best_score:
            best, best_score = candidate, score
    console.print(f"best on H1: {best} (mean MAPE {100 * best_score:.2f}%)")
    return best


def forecast_table(regions: dict[str, pd.Series], forecaster: SeasonalForecaster, step: int) -> None:
    table = Table(title=f"24 h-ahead MAPE, rolling origin every {step} h over 2023 (horizons 1-24 h pooled)")
    for column in ("region", "ours", "persistence", "day-ago", "ours H2", "persist. H2", "day-ago H2", "excluded"):
        table.add_column(column, justify="right" if column != "region" else "left", no_wrap=True)
    wins = 0
    for region, series in track(list(regions.items()), description="evaluating", console=console):
        values = series.to_numpy()
        year = rolling_errors(values, forecaster, origins_for(series.index, step))
        held = rolling_errors(values, forecaster, origins_for(series.index, step, range(7, 13)))
        mape = {k: 100 * np.nanmean(v) for k, v in year.items()}
        mape_h2 = {k: 100 * np.nanmean(v) for k, v in held.items()}
        wins += mape["ours"] < min(mape["persistence"], mape["day_ago"])
        table.add_row(
            region,
            *(f"{mape[k]:.2f}%" for k in ("ours", "persistence", "day_ago")),
            *(f"{mape_h2[k]:.2f}%" for k in ("ours", "persistence", "day_ago")),
            str(int(np.isnan(year["ours"]).sum())),
        )
    console.print(table)
    console.print(f"ours beats both baselines on {wins} of {len(regions)} regions (full year)")


def tick_lookup_micros(samples: int = 20_000) -> float:
    """Median time of the lookup a controller tick makes, from a warm feed, in microseconds."""
    with tempfile.TemporaryDirectory() as tmp:
        feed = CarbonFeed(SyntheticSource(), cache_path=Path(tmp) / "carbon.json")
        feed.refresh()
        timings = []
        for _ in range(samples):
            t0 = time.perf_counter_ns()
            snap = feed.snapshot()
            now = time.time()
            snap.signal.value_at(now)
            snap.signal.mean_over(now, now + 3600.0)
            timings.append(time.perf_counter_ns() - t0)
    return statistics.median(timings) / 1000.0


@click.command()
@click.option("--tune", "do_tune", is_flag=True, help="Re-tune the forecaster on H1 2023 before evaluating.")
@click.option("--step", default=1, show_default=True, help="Hours between forecast origins.")
def main(do_tune: bool, step: int) -> None:
    """Forecast error per region and tick lookup latency."""
    regions = load_regions()
    forecaster = tune(regions) if do_tune else SeasonalForecaster()
    forecast_table(regions, forecaster, step)
    console.print(f"tick carbon lookup: median {tick_lookup_micros():.1f} µs (target < 1000 µs)")


if __name__ == "__main__":
    main()
