"""What earlier runs know for one mutate or emit job (:func:`oto.registry.transfer.knowledge`), under the
measurement protocol of the backend this run resolves to: its provenance says what kind of numbers the
job's kernels will get (simulated, replayed, measured), and only records of that kind count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from oto.backends import job_stream, resolve
from oto.registry.transfer import Knowledge, knowledge


def job_knowledge(
    results: Path,
    library: str,
    generation: int,
    sizes: Sequence,
    profile: Mapping,
    config: Mapping,
    measured_only: bool = False,
) -> Knowledge | None:
    """The registry's knowledge of ``library`` at the tuning ``sizes`` for the job of ``generation`` in
    ``results`` (``results/<arch>``); None without a store. The job's own run chain is left out, so a job
    Snakemake runs again sees what it saw the first time. ``measured_only``: emit's read (``measured``
    alone)."""
    provenance = resolve(config, profile, job_stream(library, f"gen{generation}")).provenance()
    return knowledge(results, profile["arch"], library, config, sizes, provenance, True, measured_only)


def emit_knowledge(
    results: Path, library: str, generation: int, sizes: Sequence, profile: Mapping, config: Mapping
) -> tuple[frozenset[str], dict[str, str]]:
    """What emit reads: the kernels measured under this job's protocol at every tuning size
    (``measured_only``: nothing else is scored), and {kernel id: why} of the library's kernels quarantined on
    this GPU (no floor for a tuning size: they took the GPU down)."""
    backend = resolve(config, profile, job_stream(library, f"gen{generation}"))
    know = knowledge(results, profile["arch"], library, config, sizes, backend.provenance(), True, True)
    return (frozenset(know.measured) if know is not None else frozenset()), backend.quarantined(library)
