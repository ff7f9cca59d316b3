"""What a source fetch returns: the forecast plus who answered and who failed before it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Answer:
    """A validated forecast series and its provenance."""

    series: pd.Series
    source: str  #: name of the source that answered (e.g. ``electricitymaps:DE``)
    synthetic: bool  #: true if the numbers are made up (the ``synthetic`` source)
    failures: dict[str, str] = field(default_factory=dict)  #: sources tried first -> why they failed
