"""benchmark: race every built candidate at every tuning size, interleaved with the spoof-floor reference
(:mod:`oto.measurement.benchmarking`); samples.csv gets a ``round`` column (0 = probe)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from oto.backends import job_stream, resolve
from oto.backends.base import Kernel, Size
from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, read_yaml, read_yaml_mirrored
from oto.hardware import ceilings, memory
from oto.measurement.benchmarking import race_library, sweep_workload
from oto.stages import BACKEND_FIELDS, Stage

# The backend's figures, the memory guard's and scoring's (the family's peak, nominal clock included).
PROFILE = ("arch", BACKEND_FIELDS, *memory.PROFILE_FIELDS, *ceilings.PEAK_FIELDS)
STAGE = Stage(
    "benchmark", "generation", "{library}/gen{gen}", ("compile", "deck", "emit"), gpu=True, profile=PROFILE
)
log = logging.getLogger(__name__)


def run(
    candidates_path: Path,
    build_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    results: Path,
    out_samples: Path,
) -> pd.DataFrame:
    cands, build = read_yaml_mirrored(candidates_path), read_yaml(build_path)
    deck, job = read_library_yaml(deck_path), f"gen{cands['generation']}"
    built = {b["id"] for b in build.get("kernels", []) if b["status"] == "ok"}
    kernels = {k["id"]: Kernel(k["id"], k["params"]) for k in cands.get("kernels", []) if k["id"] in built}
    candidates = [k["id"] for k in cands.get("kernels", []) if "candidate" in k["roles"] and k["id"] in built]
    reference = {int(i): kid for i, kid in (cands.get("reference") or {}).items() if kid in built}
    sizes = [Size(*map(int, s[:4])) for s in cands.get("sizes", [])]
    per_size = {i: candidates for i in range(len(sizes))} if candidates or reference else {}
    backend = resolve(config, profile, job_stream(deck.name, job))
    result = race_library(
        backend, deck, profile, config, kernels, sizes, per_size, reference, workdir, job, results,
        sweep_workload(cands, deck),  # a sweep's race goes on where the workload's time is
    )  # fmt: skip
    atomic_write_text(out_samples, result.samples_csv())
    stops = dict(sorted(Counter(d.stop for d in result.decisions.values()).items()))
    log.info(
        "%s %s: %d launches (%s) in %d round(s), %d kernels x %d sizes; sizes stopped: %s", deck.name, job,
        len(result.samples), backend.numbers, result.rounds, len(kernels), len(sizes), stops,
    )  # fmt: skip
    for line in result.log:
        log.info("%s %s: %s", deck.name, job, line)
    return result.samples
