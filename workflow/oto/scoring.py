"""From raw samples to drift-normalised scores with confidence intervals, and per-size verdicts.

On an APU, thermal and DVFS state move every kernel's time by up to ±25% over minutes, so raw times cannot
rank kernels measured at different moments. Every batch interleaves the reference kernel (the shipped
solution, i.e. the spoof floor) with the candidates. The slow drift is estimated from *all* reference
samples — each divided by its own (kernel, size) median, smoothed by a running median over execution order —
and every sample is divided by the drift at its moment. A score is then reference time / kernel time for
the same size: 1 is the spoof floor, 1.3 is 30% faster.

A score's 95% interval is the bootstrap percentile interval of the median ratio, never narrower than a
robust small-sample interval (median ± t·1.2533·σ/√n, σ the largest of stdev, 1.4826·MAD and IQR/1.349 of
the log ratios): with the 3–10 samples a racing probe takes, a bootstrap alone is overconfident and would
drop true contenders.
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
    "excluded",
]
DRIFT_WINDOW = 9
# Two-sided 95% Student t quantiles by degrees of freedom (1..30); 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)  # fmt: skip


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


def t95(dof: int) -> float:
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.96


def robust_sigma(x: np.ndarray) -> float:
    """The largest of three spread estimates: stdev, 1.4826·MAD, IQR/1.349 (0 for fewer than 2 values)."""
    if len(x) < 2:
        return 0.0
    q1, q3 = np.percentile(x, [25, 75])
    mad = np.median(np.abs(x - np.median(x)))
    return float(max(np.std(x, ddof=1), 1.4826 * mad, (q3 - q1) / 1.349))


def median_ci(ratios: np.ndarray, rng: np.random.Generator, reps: int) -> tuple[float, float]:
    """95% interval of the median ratio: bootstrap percentiles, widened to the robust t-interval.

    A single sample has no spread to learn from: its interval is unbounded, so it can neither win nor be
    eliminated on one launch."""
    if len(ratios) == 1:
        return 0.0, float("inf")
    idx = rng.integers(0, len(ratios), size=(reps, len(ratios)))
    lo, hi = np.percentile(np.median(ratios[idx], axis=1), [2.5, 97.5])
    logs = np.log(ratios)
    half = t95(len(ratios) - 1) * 1.2533 * robust_sigma(logs) / np.sqrt(len(ratios))
    center = float(np.median(logs))
    return float(min(lo, np.exp(center - half))), float(max(hi, np.exp(center + half)))


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
        bad = g[g["status"] == "bad_timing"]
        bad_reason = f"{len(bad)} timing(s) excluded: {bad['reason'].astype(str).iloc[0]}" if len(bad) else ""
        if len(good) == 0:
            failed = g[g["status"] != "ok"]
            status = failed["status"].mode().iat[0] if not failed.empty else "no_samples"
            reason = failed["reason"].dropna().astype(str).iloc[0] if not failed.empty else ""
            rows.append((kid, size, 0, np.nan, np.nan, np.nan, np.nan, np.nan, status, reason, len(bad)))
            continue
        # Any failed launch (validation, crash, hang) disqualifies the kernel at this size.
        failed = g[(g["status"] != "ok") & (g["status"] != "bad_timing")]
        status = failed["status"].mode().iat[0] if not failed.empty else "ok"
        reason = failed["reason"].astype(str).iloc[0] if not failed.empty else bad_reason
        ref = ref_time.get(size, np.nan)
        ratios = ref / good
        lo, hi = median_ci(ratios, rng, bootstrap) if np.isfinite(ref) else (np.nan, np.nan)
        med_t = float(np.median(good))
        gflops = flops_by_size[int(size)] / (med_t * 1e3)
        score = float(np.median(ratios))
        rows.append((kid, size, len(good), score, lo, hi, med_t, gflops, status, reason, len(bad)))
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
