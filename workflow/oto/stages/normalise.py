"""normalise: samples → drift-normalised scores per (kernel, size) with bootstrap confidence intervals.

scores.csv also says how racing ended at each size (``race``: separated | tie | budget | fixed | no_valid)
and which kernels were still contenders (``contender``); the decision is recomputed from the samples with
the same function the benchmark's race used, so it matches the race's last round."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from oto.backends.base import SAMPLE_CLASSES
from oto.ceilings import family_peak_gflops
from oto.datatypes import Library, gemm_flops
from oto.files import atomic_write_text, read_yaml
from oto.racing import BUDGET, FIXED, annotate_scores
from oto.scoring import SAMPLE_COLUMNS, TELEMETRY_COLUMNS, flag_bad_timings, score_samples

log = logging.getLogger(__name__)


def read_samples(path: Path) -> pd.DataFrame:
    """samples.csv, checked. An unparsable time becomes NaN (flagged and excluded later, with a reason);
    an unknown status or a non-integer seq/size_index is an error naming the file, field and row."""
    df = pd.read_csv(path, dtype={"kernel_id": str, "role": str, "status": str, "reason": str})
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    df["reason"] = df["reason"].fillna("")
    known = {*SAMPLE_CLASSES, "bad_timing"}
    unknown = df.index[~df["status"].isin(known)]
    if len(unknown):
        i, names = unknown[0], ", ".join(sorted(known))
        raise ValueError(f"{path}: field 'status' row {i + 2}: {df.at[i, 'status']!r} is not one of {names}")
    for col in ("seq", "size_index"):
        v = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[v.isna() | (v != v.round())]
        if len(bad):
            raise ValueError(
                f"{path}: field '{col}' row {bad[0] + 2}: {df.at[bad[0], col]!r} is not an integer"
            )
        df[col] = v.astype(int)
    df["time_us"] = pd.to_numeric(df["time_us"], errors="coerce")
    # Telemetry is optional (older files, backends without an observer); an unreadable value is no reading.
    for col in TELEMETRY_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df.columns else np.nan
    return df


def score_file(
    samples: pd.DataFrame,
    library: Library,
    sizes: list[list[int]],
    profile: Mapping,
    config: Mapping,
    only: set[int] | None = None,
    bootstrap: int | None = None,
) -> pd.DataFrame:
    """Flag bad timings, then score (``only``: just those size indices; ``bootstrap`` overrides the
    configured resample count; see :func:`score_samples`)."""
    flops = {i: gemm_flops(library.family, *map(int, s[:4])) for i, s in enumerate(sizes)}
    peak = family_peak_gflops(profile, library.family)
    flagged = flag_bad_timings(samples, samples["size_index"].map(flops).to_numpy(float), peak)
    reps = int(bootstrap or config["benchmark"]["bootstrap"])
    return score_samples(
        flagged, flops, reps, int(config["seed"]), only, nominal_mhz=float(profile["clock_mhz"])
    )


def run(samples_path: Path, candidates_path: Path, profile: Mapping, config: Mapping, out_scores: Path):
    cands = read_yaml(candidates_path)
    library = Library.parse(cands["library"])
    samples = read_samples(samples_path)
    scores = score_file(samples, library, cands.get("sizes", []), profile, config)
    racing = (config["benchmark"].get("racing") or {}).get("enabled", True)
    scores = annotate_scores(scores, float(config["benchmark"]["tie_tolerance"]), BUDGET if racing else FIXED)
    atomic_write_text(out_scores, scores.to_csv(index=False))
    stops = scores.drop_duplicates("size_index")["race"].value_counts().to_dict() if len(scores) else {}
    log.info(
        "%s gen%s: %d scores from %d samples (%d failed, %d bad timings excluded); sizes stopped: %s",
        library.name,
        cands["generation"],
        len(scores),
        len(samples),
        int((samples["status"] != "ok").sum()),
        int(scores["excluded"].sum()) if len(scores) else 0,
        stops,
    )
    return scores
