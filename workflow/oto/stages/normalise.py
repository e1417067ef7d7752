"""normalise: samples → drift-normalised scores per (kernel, size) with bootstrap confidence intervals."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from oto.ceilings import family_peak_gflops
from oto.datatypes import Library, gemm_flops
from oto.files import atomic_write_text, read_yaml
from oto.scoring import SAMPLE_COLUMNS, flag_bad_timings, score_samples

log = logging.getLogger(__name__)


def read_samples(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"kernel_id": str, "role": str, "status": str, "reason": str})
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df["reason"] = df["reason"].fillna("")
    return df


def score_file(
    samples: pd.DataFrame, library: Library, sizes: list[list[int]], profile: Mapping, config: Mapping
) -> pd.DataFrame:
    flops = {i: gemm_flops(library.family, *map(int, s[:4])) for i, s in enumerate(sizes)}
    peak = family_peak_gflops(profile, library.family)
    flagged = flag_bad_timings(samples, samples["size_index"].map(flops).to_numpy(float), peak)
    return score_samples(flagged, flops, int(config["benchmark"]["bootstrap"]), int(config["seed"]))


def run(samples_path: Path, candidates_path: Path, profile: Mapping, config: Mapping, out_scores: Path):
    cands = read_yaml(candidates_path)
    library = Library.parse(cands["library"])
    samples = read_samples(samples_path)
    scores = score_file(samples, library, cands.get("sizes", []), profile, config)
    atomic_write_text(out_scores, scores.to_csv(index=False))
    log.info(
        "%s gen%s: %d scores from %d samples (%d excluded)",
        library.name,
        cands["generation"],
        len(scores),
        len(samples),
        int((samples["status"] != "ok").sum()),
    )
    return scores
