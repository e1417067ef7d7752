"""dashboard: the final dashboard page, its charts and data.json, from every result file of the run
(:mod:`oto.reporting.dashboard`); the live page becomes a copy of it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from oto.reporting.dashboard import publish_live, write_dashboard
from oto.stages import Stage

STAGE = Stage(
    name="dashboard",
    scope="run",
    home="dashboard",
    reads=("ceilings", "compare", "coverage", "finalize", "report", "verify"),
)


def run(results: Path, config: Mapping, out_dir: Path) -> dict:
    """``results``: the run's folder, results/<arch>; ``out_dir``: the page's folder."""
    doc = write_dashboard(results, config, out_dir)
    publish_live(results, out_dir)  # the live page says the run finished too
    return doc
