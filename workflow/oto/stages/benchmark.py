"""benchmark: race every built candidate at every tuning size, interleaved with the spoof-floor reference
(:mod:`oto.measurement.benchmarking`); samples.csv gets a ``round`` column (0 = probe)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from oto.backends import job_stream, resolve
from oto.backends.base import Kernel, Problem, Size
from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, read_yaml
from oto.gemm import Library
from oto.measurement.benchmarking import RACE_BOOTSTRAP, run_race
from oto.measurement.scoring import score_library

log = logging.getLogger(__name__)


def run(
    candidates_path: Path,
    build_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    out_samples: Path,
) -> pd.DataFrame:
    cands = read_yaml(candidates_path)
    build = read_yaml(build_path)
    deck = read_library_yaml(deck_path)
    library = Library.parse(deck.name)
    stage = f"gen{cands['generation']}"
    backend = resolve(config, profile, job_stream(deck.name, stage))
    built = {b["id"] for b in build.get("kernels", []) if b["status"] == "ok"}
    kernels = {k["id"]: Kernel(k["id"], k["params"]) for k in cands.get("kernels", []) if k["id"] in built}
    candidates = [k["id"] for k in cands.get("kernels", []) if "candidate" in k["roles"] and k["id"] in built]
    reference = {int(i): kid for i, kid in (cands.get("reference") or {}).items() if kid in built}
    sizes = [Size(*map(int, s[:4])) for s in cands.get("sizes", [])]
    size_lists = [s.as_list() for s in sizes]

    result = run_race(
        backend,
        Problem.of(deck, profile),
        kernels,
        sizes,
        {i: candidates for i in range(len(sizes))} if candidates or reference else {},
        reference,
        lambda df, only: score_library(df, library, size_lists, profile, config, only, RACE_BOOTSTRAP),
        config,
        workdir,
        f"{config['seed']}:{deck.name}:{stage}",
        archive=Path(out_samples).parents[2] / "measurements" / deck.name / stage,
    )
    df = result.samples
    atomic_write_text(out_samples, df.to_csv(index=False))
    stops = Counter(d.stop for d in result.decisions.values())
    log.info(
        "%s %s: %d launches (%s) in %d round(s), %d kernels x %d sizes; sizes stopped: %s",
        deck.name,
        stage,
        len(df),
        backend.numbers,
        result.rounds,
        len(kernels),
        len(sizes),
        dict(sorted(stops.items())),
    )
    for line in result.log:
        log.info("%s %s: %s", deck.name, stage, line)
    return df
