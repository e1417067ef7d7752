"""registry: every generation's per-job registry file → the run's consolidated experiment store
(:mod:`oto.registry.store`), which outlives runs (not a declared output), and its summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from oto.registry.store import consolidate, store_path
from oto.stages import Stage

STAGE = Stage(name="registry", scope="run", home="registry", reads=("select",))


def run(job_files: Sequence[Path], results: Path, out_summary: Path) -> dict:
    """``results``: the run's folder, results/<arch>, whose store is registry/registry.sqlite."""
    return consolidate([Path(f) for f in job_files], store_path(results), out_summary=out_summary)
