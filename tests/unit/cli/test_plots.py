"""The frontier figure a user reads: file names in titles, FIFO on top, labelled sweeps, plain log ticks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.cli import plots
from slurm_green.policy.lower_bound import LowerBound
from slurm_green.sim.bench import BenchResult, Point

FIXTURE = Path(__file__).resolve().parents[1] / "slurm" / "fixtures" / "24.11" / "sacct.txt"


def result() -> BenchResult:
    """FIFO sits exactly on a GreenFlow point, where it used to be hidden; JCTs span 30-60 h."""
    frontier = {
        "fifo": [Point("default", 40 * 3600, 100.0, 50.0, 9, 9)],
        "greenflow": [Point(f"budget={b:g}", jct * 3600, 100.0, kg, 9, 9)
                      for b, jct, kg in ((1.0, 40, 50.0), (0.8, 48, 42.0), (0.6, 60, 35.0))],
        "zeus": [Point("eta=0.5", 32 * 3600, 90.0, 47.0, 9, 9)],
    }
    return BenchResult(runs={}, frontier=frontier, lower_bound=LowerBound(30.0, np.array([30.0])))


def test_fifo_is_drawn_on_top_with_its_own_marker():
    [ax] = plots.frontier_figure(result(), "t").axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    fifo = lines["fifo (carbon-agnostic)"]
    assert fifo.get_marker() == "*" and fifo.get_markersize() > lines["greenflow"].get_markersize()
    assert fifo.get_zorder() > max(line.get_zorder() for name, line in lines.items() if name != fifo.get_label())


def test_every_swept_point_is_labelled_with_its_setting():
    [ax] = plots.frontier_figure(result(), "t").axes
    assert sorted(text.get_text() for text in ax.texts) == ["budget=0.6", "budget=0.8", "budget=1"]


def test_the_log_axis_reads_plain_numbers():
    fig = plots.frontier_figure(result(), "t")
    fig.canvas.draw()
    [ax] = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels(minor=True) + ax.get_yticklabels() if t.get_text()]
    assert labels and all(label.replace(".", "").isdigit() for label in labels), labels
    assert "40" in labels


@pytest.mark.skipif(not FIXTURE.exists(), reason="no 24.11 sacct capture")
def test_whatif_titles_its_plot_with_the_file_name(tmp_path, monkeypatch):
    saved = []
    real_save = plots.save
    monkeypatch.setattr(plots, "save", lambda fig, path: (saved.append(fig), real_save(fig, path)))
    png = tmp_path / "frontier.png"
    result_ = CliRunner().invoke(main, ["whatif", "--sacct", str(FIXTURE), "--carbon", "synthetic", "--plot", str(png)])
    assert result_.exit_code == 0, result_.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    [fig] = saved
    assert fig.axes[0].get_title() == "what if: sacct.txt, carbon synthetic"
