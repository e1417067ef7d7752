"""From raw samples to drift-normalised scores with confidence intervals, and per-size verdicts.

On an APU, thermal and DVFS state move every kernel's time by up to ±25% over minutes, so raw times cannot
rank kernels measured at different moments. Every batch interleaves the reference kernel (the shipped
solution, i.e. the spoof floor) with the candidates. The slow drift is estimated from *all* reference
samples — each divided by its own (kernel, size) median, smoothed by a running median over execution order —
and every sample is divided by the drift at its moment. A score is then reference time / kernel time for
the same size: 1 is the spoof floor, 1.3 is 30% faster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

SAMPLE_COLUMNS = [
    "seq",
    "kernel_id",
    "role",
    "size_index",
    "m",
    "n",
    "batch",
    "k",
    "rep",
    "time_us",
    "status",
    "reason",
    "source",
]
SCORE_COLUMNS = [
    "kernel_id",
    "size_index",
    "n",
    "score",
    "ci_low",
    "ci_high",
    "time_us",
    "gflops",
    "status",
    "reason",
]
DRIFT_WINDOW = 9


def flag_bad_timings(samples: pd.DataFrame, flops: np.ndarray, peak_gflops: float) -> pd.DataFrame:
    """Mark NaN, zero, negative and physically impossible timings as excluded, with a reason."""
    s = samples.copy()
    ok = s["status"] == "ok"
    t = s["time_us"].astype(float)
    bad_value = ok & ~(np.isfinite(t) & (t > 0))
    s.loc[bad_value, ["status", "reason"]] = ["bad_timing", "NaN, zero or negative time"]
    gflops = flops / (t.where(t > 0) * 1e3)
    absurd = ok & ~bad_value & (gflops > 1.05 * peak_gflops)
    s.loc[absurd, "status"] = "bad_timing"
    s.loc[absurd, "reason"] = [
        f"{g:.0f} GFLOPS exceeds the theoretical {peak_gflops:.0f}" for g in gflops[absurd]
    ]
    return s


def drift_series(samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(seq, drift factor) estimated from the ok reference samples; empty arrays if there are none."""
    ref = samples[(samples["role"] == "reference") & (samples["status"] == "ok")].sort_values("seq")
    if ref.empty:
        return np.array([]), np.array([])
    rel = ref["time_us"] / ref.groupby(["kernel_id", "size_index"])["time_us"].transform("median")
    smooth = rel.rolling(DRIFT_WINDOW, center=True, min_periods=1).median()
    return ref["seq"].to_numpy(float), smooth.to_numpy(float)


def normalise_times(samples: pd.DataFrame) -> pd.Series:
    """Each ok sample's time divided by the drift at its moment (NaN for failed samples).

    The baseline is the fastest (coolest) state seen in the batch: ratios do not depend on it, and GFLOPS
    computed from normalised times then refer to the clock closest to the one the ceilings assume."""
    seq, drift = drift_series(samples)
    factor = np.interp(samples["seq"].to_numpy(float), seq, drift) / drift.min() if len(seq) else 1.0
    t = samples["time_us"].astype(float).where(samples["status"] == "ok")
    return t / factor


def _bootstrap_median_ci(x: np.ndarray, rng: np.random.Generator, reps: int) -> tuple[float, float]:
    if len(x) == 1:
        return float(x[0]), float(x[0])
    idx = rng.integers(0, len(x), size=(reps, len(x)))
    meds = np.median(x[idx], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)


def score_samples(
    samples: pd.DataFrame, flops_by_size: Mapping[int, float], bootstrap: int = 400, seed: int = 0
) -> pd.DataFrame:
    """One row per (kernel, size): median score vs the size's reference, its bootstrap CI, and GFLOPS."""
    s = samples.copy()
    s["norm_us"] = normalise_times(s)
    ref_time = s[(s["role"] == "reference") & s["norm_us"].notna()].groupby("size_index")["norm_us"].median()
    rng = np.random.default_rng(seed)
    rows = []
    for (kid, size), g in s.groupby(["kernel_id", "size_index"], sort=True):
        good = g["norm_us"].dropna().to_numpy()
        if len(good) == 0:
            failed = g[g["status"] != "ok"]
            status = failed["status"].mode().iat[0] if not failed.empty else "no_samples"
            reason = failed["reason"].dropna().astype(str).iloc[0] if not failed.empty else ""
            rows.append((kid, size, 0, np.nan, np.nan, np.nan, np.nan, np.nan, status, reason))
            continue
        # Any failed launch (validation, crash, hang) disqualifies the kernel at this size.
        failed = g[(g["status"] != "ok") & (g["status"] != "bad_timing")]
        status = failed["status"].mode().iat[0] if not failed.empty else "ok"
        reason = failed["reason"].astype(str).iloc[0] if not failed.empty else ""
        ref = ref_time.get(size, np.nan)
        ratios = ref / good
        lo, hi = _bootstrap_median_ci(ratios, rng, bootstrap)
        med_t = float(np.median(good))
        gflops = flops_by_size[int(size)] / (med_t * 1e3)
        rows.append((kid, size, len(good), float(np.median(ratios)), lo, hi, med_t, gflops, status, reason))
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def verdict(score: float, ci_low: float, ci_high: float, tolerance: float) -> str:
    """Win / tie / loss against the spoof floor (score 1), with the configured tie tolerance."""
    if not np.isfinite(score):
        return "loss"
    if score >= 1 + tolerance and ci_low > 1:
        return "win"
    if score <= 1 - tolerance and ci_high < 1:
        return "loss"
    return "tie"


def best_per_size(scores: pd.DataFrame) -> dict[int, Mapping]:
    """The best valid kernel per size (highest score; failed kernels can never win)."""
    valid = scores[(scores["status"] == "ok") & scores["score"].notna()]
    best = valid.sort_values(["size_index", "score", "kernel_id"], ascending=[True, False, True])
    return {
        int(r.size_index): r._asdict() for r in best.drop_duplicates("size_index").itertuples(index=False)
    }


def geomean(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")
