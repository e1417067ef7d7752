"""From raw samples to drift-normalised scores with confidence intervals (verdicts: measurement.selection).

On an APU, thermal and DVFS state move every kernel's time by up to ±25% over minutes, so raw times cannot
rank kernels measured at different moments. Every batch interleaves the reference kernel (the shipped
solution, i.e. the spoof floor) with the candidates, and every sample is brought to one drift state:

* **The drift**, by the estimator the backend's declared capabilities allow (:func:`choose_drift`; the
  samples record them, scores.csv and the reports name the choice):

  - ``clock_per_launch`` — the samples carry the core clock an observer read at each launch (``clock_mhz``):
    the drift is log(nominal clock / read clock), exact per launch;
  - ``reference_timeline`` — no usable clock: the drift is estimated from *all* reference samples — each
    divided by its own (kernel, size) median, smoothed by a running median over the order the launches
    really ran in (the plan's, or the one the backend reports: Tensile's client runs every solution of a
    problem back to back, so each size's reference is timed within seconds of its candidates) — relative to
    the fastest state they saw;
  - ``reference_timeline+sweep_clock`` — the clock is read once per sweep (Tensile's client on an APU): a
    sweep's clock cannot follow the drift inside the sweep, so the references give its shape as above and
    the sweeps' clocks its scale and level (a memory-bound reference drifts less than the clock; the nominal
    clock is the peak state, as with per-launch clocks).

  Too few sane readings (missing, zero, above 1.5x nominal) fall back to the reference, with the reason.
* **Each kernel's sensitivity to it** (β, :func:`fit_drift`): memory-bound kernels follow the DRAM clock and
  drift less than ALU-bound ones. A β is fitted from a few noisy samples, so it is shrunk towards what the
  batch says kernels like it have: the bulk's β for a kernel, its kernel's for a size, by the spread the
  batch shows (empirical Bayes). A race times its survivors rounds away from the median state, and a β
  error times that distance would otherwise decide which of a thousand close kernels leads.
* **The state scores refer to: the batch's median drift.** A memory-bound kernel's ratio to an ALU-bound
  reference really does change with the state (by the sensitivity gap times the log drift), so a score is
  only defined at a state, and the median state is the one every kernel was measured around: no
  extrapolation, so a β estimated from a few samples costs little. It is also the state the APU sustains a
  long GEMM run in. Times and GFLOPS, by contrast, are reported at the peak state (the nominal clock the
  ceilings assume with clock telemetry, else the fastest state seen), extrapolated with β.

A score is reference time / kernel time at the same size and state: 1 is the spoof floor, 1.3 is 30% faster.

A score's 95% interval is the bootstrap percentile interval of the median ratio, never narrower than a
robust small-sample interval (median ± t·1.2533·σ/√n, σ the largest of stdev, 1.4826·MAD and IQR/1.349 of
the log ratios): with the 3–10 samples a racing probe takes, a bootstrap alone is overconfident and would
drop true contenders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from oto.gemm import Library, gemm_flops
from oto.hardware.ceilings import family_peak_gflops
from oto.numbers import finite  # noqa: F401  (part of this module's interface)

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
# Optional per-sample telemetry after the required columns: absent or NaN where a backend has no observer;
# ``telemetry_note`` says why a reading is missing or was rejected.
TELEMETRY_COLUMNS = ["clock_mhz", "temperature_c", "power_w", "telemetry_note"]
# What the backend could tell (oto.backends.base.Capabilities) and the sweep each launch ran in (-1: none).
ORDER_COLUMNS = ["sweep", "launch_order", "clock_telemetry"]
MEASUREMENT_COLUMNS = [*TELEMETRY_COLUMNS, *ORDER_COLUMNS]
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
    "drift",  # the drift estimator the scores come from (choose_drift)
]
DRIFT_WINDOW = 9
# Two-sided 95% Student t quantiles by degrees of freedom (1..30); 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)  # fmt: skip


# No launch of a tuning run takes an hour: a slower time is a unit mix-up or a broken timer, whatever the
# backend. The bound scoring applies is the backend's own launch timeout where the config sets one
# (:func:`launch_timeout_us`); this one caps it.
MAX_LAUNCH_US = 3600e6
# Where each kind of numbers' backend takes its launch timeout from in the config, and the factor to µs: the
# simulated GPU reports a slower launch as a hang (sim.timeout_us), Tensile's client is killed after
# tensile.timeout_s (one invocation: no launch of it takes longer). A recording (replayed) has no timeout.
LAUNCH_TIMEOUT_SETTINGS = {"simulated": ("sim", "timeout_us", 1.0), "measured": ("tensile", "timeout_s", 1e6)}
# A reference whose timings at a size are more than this share implausible fails its batch: every score at
# that size is a ratio to it.
MAX_BAD_REFERENCE_SHARE = 0.5


def launch_timeout_us(config: Mapping, numbers: Iterable[str]) -> float:
    """The longest a launch can take under ``config`` for samples of these kinds of numbers (the strictest
    when they are mixed), at most :data:`MAX_LAUNCH_US`. The benchmark stage flags a launch past its
    backend's timeout as it measures; scoring checks again whatever samples it is handed (a samples file
    edited after the run, a bundle from another machine), in the run and in the merge alike."""
    from oto.config import config_block

    bound = MAX_LAUNCH_US
    for kind in set(numbers):
        if kind not in LAUNCH_TIMEOUT_SETTINGS:
            continue
        block, key, to_us = LAUNCH_TIMEOUT_SETTINGS[kind]
        value = (config.get(block) or {}).get(key)
        value = config_block(config, block)[key] if value is None else value
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            bound = min(bound, float(value) * to_us)
    return bound


class ImplausibleReference(ValueError):
    """The spoof-floor reference of a batch has implausible timings: no score against it can be trusted."""


def flag_bad_timings(
    samples: pd.DataFrame, flops: np.ndarray, peak_gflops: float, max_time_us: float = MAX_LAUNCH_US
) -> pd.DataFrame:
    """Mark timings physics rules out as ``bad_timing`` (excluded from scoring), with the reason: NaN,
    zero or negative; faster than the theoretical peak allows (5% margin); slower than ``max_time_us``."""
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
    slow = ok & ~bad_value & (t > max_time_us)
    s.loc[slow, "status"] = "bad_timing"
    bound = "any launch can take" if max_time_us >= MAX_LAUNCH_US else "the backend's launch timeout"
    s.loc[slow, "reason"] = [f"{x:.3g} us is longer than {bound} ({max_time_us:.3g} us)" for x in t[slow]]
    return s


def check_reference(flagged: pd.DataFrame, library: str, sizes: Sequence) -> None:
    """Raise :class:`ImplausibleReference` when, at some size, most timings of the reference are flagged
    ``bad_timing``: a batch scored against it would rank kernels by a broken number (every reference at
    1e30 us once reported a 9e27x speed-up and shipped a worse kernel)."""
    ref = flagged[flagged["role"] == "reference"]
    timed = ref[ref["status"].isin(["ok", "bad_timing"])]
    bad = (timed["status"] == "bad_timing").to_numpy()
    if not bad.any():  # racing rescores every round: most batches have nothing to look at
        return
    # Counted per (size, reference) in one groupby, in the order a loop over the groups would meet them.
    keys = ["size_index", "kernel_id"]
    counts = timed[keys].assign(bad=bad).groupby(keys, sort=True)["bad"].agg(["sum", "size"])
    failing = counts[counts["sum"] > MAX_BAD_REFERENCE_SHARE * counts["size"]]
    if failing.empty:
        return
    size, kid = failing.index[0]
    n_bad, n_timed = int(failing["sum"].iloc[0]), int(failing["size"].iloc[0])
    first = timed[bad & (timed["size_index"] == size).to_numpy() & (timed["kernel_id"] == kid).to_numpy()]
    where = list(sizes[int(size)][:4]) if int(size) < len(sizes) else size
    raise ImplausibleReference(
        f"{library}: the reference (shipped kernel {kid}) at size {int(size)} {where} has "
        f"{n_bad} implausible timing(s) of {n_timed} ({first['reason'].iloc[0]}); "
        "this batch is not scored against it"
    )


def drift_series(samples: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(seq, drift factor) estimated from the ok reference samples; empty arrays if there are none."""
    ref = samples[(samples["role"] == "reference") & (samples["status"] == "ok")].sort_values("seq")
    if ref.empty:
        return np.array([]), np.array([])
    rel = ref["time_us"] / ref.groupby(["kernel_id", "size_index"])["time_us"].transform("median")
    smooth = rel.rolling(DRIFT_WINDOW, center=True, min_periods=1).median()
    return ref["seq"].to_numpy(float), smooth.to_numpy(float)


def drift_at(samples: pd.DataFrame) -> np.ndarray:
    """The reference drift at each sample's moment, relative to the fastest state seen (≥ 1; 1 if no
    reference sample is ok)."""
    seq, drift = drift_series(samples)
    if not len(seq):
        return np.ones(len(samples))
    return np.interp(samples["seq"].to_numpy(float), seq, drift) / drift.min()


MIN_CLOCK_SHARE = 0.5  # clock telemetry is used when at least this share of ok samples has a sane reading


def clock_drift(samples: pd.DataFrame, nominal_mhz: float | None) -> np.ndarray | None:
    """log(nominal / read clock) per sample from the ``clock_mhz`` telemetry, or None when there is too
    little of it. Readings that are missing, non-positive or above 1.5x nominal (a unit mix-up, a broken
    observer) are ignored and filled in from their neighbours in execution order."""
    if not nominal_mhz or "clock_mhz" not in samples.columns:
        return None
    clock = pd.to_numeric(samples["clock_mhz"], errors="coerce").to_numpy(float)
    sane = np.isfinite(clock) & (clock > 0) & (clock <= 1.5 * nominal_mhz)
    ok = (samples["status"] == "ok").to_numpy()
    if not ok.any() or (sane & ok).sum() < MIN_CLOCK_SHARE * ok.sum():
        return None
    seq = samples["seq"].to_numpy(float)
    order = np.argsort(seq[sane], kind="stable")
    x = np.log(nominal_mhz / clock[sane])[order]
    return np.interp(seq, seq[sane][order], x)


CLOCK_PER_LAUNCH = "clock_per_launch"
REFERENCE_TIMELINE = "reference_timeline"
SWEEP_CLOCK = "reference_timeline+sweep_clock"
DRIFT_ESTIMATORS = (CLOCK_PER_LAUNCH, REFERENCE_TIMELINE, SWEEP_CLOCK)


def measurement_facts(samples: pd.DataFrame) -> tuple[str, str]:
    """(launch order, clock telemetry) the samples were taken with: the columns the benchmark stage writes
    from the backend's capabilities; files without them ran in plan order, with per-launch telemetry if any
    launch carries a clock reading."""
    order = samples["launch_order"].dropna() if "launch_order" in samples.columns else pd.Series(dtype=str)
    telemetry = (
        samples["clock_telemetry"].dropna() if "clock_telemetry" in samples.columns else pd.Series(dtype=str)
    )
    if "clock_mhz" in samples.columns:
        has_clock = bool(np.isfinite(pd.to_numeric(samples["clock_mhz"], errors="coerce")).any())
    else:
        has_clock = False
    return (
        str(order.iloc[0]) if len(order) else "plan",
        str(telemetry.iloc[0]) if len(telemetry) else ("per_launch" if has_clock else "none"),
    )


@dataclass(frozen=True)
class DriftChoice:
    estimator: str  # one of DRIFT_ESTIMATORS
    reason: str


def _sane_clock(samples: pd.DataFrame, nominal_mhz: float) -> np.ndarray:
    clock = pd.to_numeric(samples["clock_mhz"], errors="coerce").to_numpy(float)
    return np.isfinite(clock) & (clock > 0) & (clock <= 1.5 * nominal_mhz)


def choose_drift(samples: pd.DataFrame, nominal_mhz: float | None) -> DriftChoice:
    """The drift estimator the samples' capabilities allow (see the module doc), and why."""
    order, telemetry = measurement_facts(samples)
    where = "the launch order the backend reported" if order == "reported" else "the plan's launch order"
    fallback = DriftChoice(REFERENCE_TIMELINE, f"no clock telemetry; reference samples over {where}")
    if telemetry == "none":
        return fallback
    if not nominal_mhz or "clock_mhz" not in samples.columns:
        why = f"{telemetry} clock telemetry, but no nominal clock to read it by"
        return DriftChoice(REFERENCE_TIMELINE, why)
    ok = (samples["status"] == "ok").to_numpy()
    share = float((_sane_clock(samples, nominal_mhz) & ok).sum() / max(ok.sum(), 1))
    if not ok.any() or share < MIN_CLOCK_SHARE:
        return DriftChoice(
            REFERENCE_TIMELINE,
            f"{telemetry} clock telemetry: sane readings (0 < clock <= 1.5x nominal) on {share:.0%} of ok "
            f"launches, below {MIN_CLOCK_SHARE:.0%}; reference samples over {where}",
        )
    if telemetry == "per_sweep":
        return DriftChoice(
            SWEEP_CLOCK,
            f"one clock per sweep on {share:.0%} of ok launches: references over {where} give the drift "
            "inside sweeps, the sweeps' clocks its scale and level",
        )
    return DriftChoice(CLOCK_PER_LAUNCH, f"per-launch clock readings on {share:.0%} of ok launches")


def measurement_summary(samples: pd.DataFrame, nominal_mhz: float | None) -> dict:
    """How a batch was measured, for final.yaml and the reports: the backend's launch order and telemetry,
    the drift estimator and why, the sweeps, the share of ok launches with a sane clock, and the telemetry
    notes (why a reading is missing or was rejected) with their counts."""
    order, telemetry = measurement_facts(samples)
    choice = choose_drift(samples, nominal_mhz)
    ok = (samples["status"] == "ok").to_numpy() if len(samples) else np.zeros(0, bool)
    sane = _sane_clock(samples, nominal_mhz) if nominal_mhz and "clock_mhz" in samples.columns else ok & False
    notes = samples.get("telemetry_note", pd.Series([], dtype=str)).fillna("")
    sweep = pd.to_numeric(samples.get("sweep", pd.Series([], dtype=float)), errors="coerce")
    return {
        "launch_order": order,
        "clock_telemetry": telemetry,
        "drift": choice.estimator,
        "drift_reason": choice.reason,
        "sweeps": int(sweep[sweep >= 0].nunique()),
        "clock_share": round(float((sane & ok).sum() / max(ok.sum(), 1)), 4),
        "telemetry_notes": {str(k): int(v) for k, v in notes[notes != ""].value_counts().head(5).items()},
    }


SWEEP_SLOPE_PRIOR = 0.05**2  # weight of the prior slope 1 against the sweeps' spread of reference drift


def sweep_clock_drift(samples: pd.DataFrame, nominal_mhz: float) -> np.ndarray | None:
    """The reference timeline's log drift put on the clock's scale by the sweeps' clocks (None: no sane
    reading). The references drift only as much as they are ALU-bound (a memory-bound reference follows the
    DRAM clock), so the clock's log drift per sweep is regressed on the references' mean log drift in that
    sweep: slope (shrunk towards 1 where the sweeps barely differ) and level, x = slope * x_ref + level."""
    x_ref = np.log(drift_at(samples))
    sane = _sane_clock(samples, nominal_mhz) & (samples["status"] == "ok").to_numpy()
    if not sane.any():
        return None
    clock = pd.to_numeric(samples["clock_mhz"], errors="coerce").to_numpy(float)
    sweep = pd.to_numeric(samples.get("sweep", pd.Series(-1, index=samples.index)), errors="coerce")
    sweep = sweep.to_numpy()
    per = pd.DataFrame({"sweep": sweep[sane], "c": np.log(nominal_mhz / clock[sane]), "r": x_ref[sane]})
    per = per.groupby("sweep")[["c", "r"]].mean()
    r, c = per["r"].to_numpy(), per["c"].to_numpy()
    rc = r - r.mean()
    slope = (float(rc @ (c - c.mean())) + SWEEP_SLOPE_PRIOR) / (float(rc @ rc) + SWEEP_SLOPE_PRIOR)
    level = float(c.mean() - slope * r.mean())
    return slope * x_ref + level


def drift_estimate(samples: pd.DataFrame, choice: DriftChoice, nominal_mhz: float | None) -> np.ndarray:
    """Log drift per sample by the chosen estimator (0: the peak state)."""
    x = None
    if choice.estimator == CLOCK_PER_LAUNCH:
        x = clock_drift(samples, nominal_mhz)
    elif choice.estimator == SWEEP_CLOCK and nominal_mhz:
        x = sweep_clock_drift(samples, nominal_mhz)
    return np.log(drift_at(samples)) if x is None else x


@dataclass(frozen=True)
class DriftFit:
    """The drift model of one batch: ``x`` the log drift at each sample (0 at the nominal clock with clock
    telemetry, else at the fastest state the references saw), ``beta`` each sample's (kernel, size) drift
    sensitivity, ``anchor`` the batch's median log drift: the state scores refer to, and the estimator that
    gave ``x``."""

    x: np.ndarray
    beta: np.ndarray
    anchor: float
    choice: DriftChoice = DriftChoice(REFERENCE_TIMELINE, "")

    def bring(self, times: pd.Series, to: float) -> pd.Series:
        """Per-sample ``times`` brought to the log drift ``to`` (``anchor``: scores; 0: the peak state)."""
        return times / np.exp(self.beta * (self.x - to))


def _ok_times(samples: pd.DataFrame) -> pd.Series:
    """Each sample's time, NaN unless its launch was ok."""
    return samples["time_us"].astype(float).where(samples["status"] == "ok")


def fit_drift(samples: pd.DataFrame, sensitivity: bool = True, nominal_mhz: float | None = None) -> DriftFit:
    """The batch's drift and every (kernel, size)'s sensitivity to it.

    A memory-bound kernel follows the fixed DRAM clock and drifts less than an ALU-bound one, so each
    (kernel, size) gets its own β (log t = log T + β·x), fitted by least squares shrunk towards 1 after
    dropping outliers: where the drift barely moved over its samples, β stays ≈ 1 and nothing is lost."""
    choice = choose_drift(samples, nominal_mhz)
    x = drift_estimate(samples, choice, nominal_mhz)
    t = _ok_times(samples)
    y = np.log(t.where(t > 0)).to_numpy()
    ok = np.isfinite(y)
    anchor = float(np.median(x[ok])) if ok.any() else 0.0
    if not sensitivity or not ok.any():
        return DriftFit(x, np.ones(len(samples)), anchor, choice)
    # Vectorised over (kernel, size) groups: racing rescores every round.
    kernel_code, kernels = pd.factorize(samples["kernel_id"].astype(str))
    group_code, groups = pd.factorize(
        pd.MultiIndex.from_arrays([kernel_code, samples["size_index"].to_numpy()])
    )
    g, xs, ys = group_code[ok], x[ok], y[ok]
    n_groups = len(groups)
    # Outliers (2-4x) would swing a least-squares fit: keep residuals within 5 robust sigmas of the group's.
    r = pd.Series(ys - xs)
    dev = (r - r.groupby(g).transform("median")).abs()
    mad = dev.groupby(g).transform("median").to_numpy()
    keep = dev.to_numpy() <= 5 * np.maximum(1.4826 * mad, 0.01)
    g, xs, ys = g[keep], xs[keep], ys[keep]
    count = np.bincount(g, minlength=n_groups)
    fit = count >= 3
    with np.errstate(invalid="ignore", divide="ignore"):
        xc = xs - (np.bincount(g, xs, n_groups) / count)[g]
        yc = ys - (np.bincount(g, ys, n_groups) / count)[g]
    sxy = np.where(fit, np.bincount(g, xc * yc, n_groups), 0.0)
    sxx = np.where(fit, np.bincount(g, xc * xc, n_groups), 0.0)
    # Two levels: the kernel's β over all its sizes (many samples) shrunk towards the batch's, then each
    # size's own β shrunk towards the kernel's (its ALU share, hence its drift, changes with the shape). How
    # far each level may stray is estimated from the batch itself (_spread): a race's survivors are timed
    # rounds away from the batch's median state, so a β no truer than its few samples would move their
    # scores by its error times that distance, and the race would pick the luckiest fit of a thousand.
    group_kernel = np.asarray([k for k, _ in groups], dtype=int)
    k_sxy = np.bincount(group_kernel, sxy, len(kernels))
    k_sxx = np.bincount(group_kernel, sxx, len(kernels))
    with np.errstate(invalid="ignore", divide="ignore"):
        b_fit = np.where(fit & (sxx > 0), sxy / sxx, 0.0)
        resid = (yc - b_fit[g] * xc) ** 2
    dof = np.where(fit, count - 2, 0)
    noise = float(np.bincount(g, np.where(fit[g], resid, 0.0), n_groups).sum() / max(dof.sum(), 1))
    noise = noise if dof.sum() >= 10 and noise > 0 else JITTER**2
    b_kernel = _kernel_sensitivity(k_sxy, k_sxx, noise)
    prior = b_kernel[group_kernel]
    tau = _spread(np.where(fit, b_fit - prior, 0.0), np.where(fit, sxx, 0.0) / noise, SIZE_SENSITIVITY_SPREAD)
    b_group = np.where(fit, (sxy + noise / tau**2 * prior) / (sxx + noise / tau**2), prior)
    return DriftFit(x, b_group[group_code], anchor, choice)


def _kernel_sensitivity(sxy: np.ndarray, sxx: np.ndarray, noise: float) -> np.ndarray:
    """Each kernel's β from its centred sums over its sizes. The batch's bulk, the kernels whose own fit is
    within two standard errors (its own and the bulk's spread) of the bulk's pooled β, is shrunk towards it
    by that spread (:func:`_spread`); the rest (a memory-bound kernel among ALU-bound ones, say) and batches
    of fewer than three fits keep their own fit, shrunk a little towards 1 (:data:`SENSITIVITY_PRIOR`)."""
    own = (sxy + SENSITIVITY_PRIOR) / (sxx + SENSITIVITY_PRIOR)
    fitted = sxx > 0
    if fitted.sum() < 3:
        return own
    with np.errstate(invalid="ignore", divide="ignore"):
        b, var = np.where(fitted, sxy / sxx, 1.0), np.where(fitted, noise / sxx, np.inf)
    bulk = fitted
    for _ in range(2):  # the bulk's β and spread, then again without the kernels outside it
        mean = float(sxy[bulk].sum() / sxx[bulk].sum())
        tau = _spread(b[bulk] - mean, 1 / var[bulk], SENSITIVITY_SPREAD)
        bulk = fitted & (np.abs(b - mean) <= 2 * np.sqrt(var + tau**2))
        if bulk.sum() < 3:
            return own
    return np.where(bulk, (sxy + noise / tau**2 * mean) / (sxx + noise / tau**2), own)


def _spread(deviation: np.ndarray, weight: np.ndarray, most: float) -> float:
    """How far the true sensitivities stray from their prior (the standard deviation τ), estimated from the
    fitted ones' ``deviation`` and ``weight`` (1 / their sampling variance; 0: not fitted) by DerSimonian and
    Laird's moments: what the deviations scatter beyond their own noise. Between :data:`LEAST_SPREAD` and
    ``most``, which it stays at for fewer than three fits (a batch of a reference and two kernels)."""
    w = weight[weight > 0]
    if len(w) < 3:
        return most
    d = deviation[weight > 0]
    q = float(np.sum(w * d**2))
    c = float(w.sum() - np.sum(w**2) / w.sum())
    tau2 = (q - (len(w) - 1)) / c if c > 0 else most**2
    return float(np.sqrt(np.clip(tau2, LEAST_SPREAD**2, most**2)))


def normalise_times(
    samples: pd.DataFrame,
    sensitivity: bool = True,
    nominal_mhz: float | None = None,
    at: str = "median",
) -> pd.Series:
    """Each ok sample's time brought to one drift state (NaN for failed samples): ``at="median"`` the
    batch's median state, where scores are taken; ``at="peak"`` the nominal clock with clock telemetry,
    else the fastest state seen, where GFLOPS are taken (see the module doc)."""
    d = fit_drift(samples, sensitivity, nominal_mhz)
    return d.bring(_ok_times(samples), d.anchor if at == "median" else 0.0)


JITTER = 0.03  # launch-to-launch noise (log) assumed where a batch has too few fits to tell its own
SENSITIVITY_SPREAD = 0.5  # the most a kernel's β may stray from its batch's bulk
SENSITIVITY_PRIOR = JITTER**2 / SENSITIVITY_SPREAD**2  # ... of one outside the bulk from 1
SIZE_SENSITIVITY_SPREAD = 0.15  # the most one size's β may stray from its kernel's
LEAST_SPREAD = 0.02  # the least: a β fitted from hundreds of samples still counts for itself


def _med(x: np.ndarray) -> float:
    """Median of a small 1-D array (np.median's overhead dominates at the 3-40 samples of a group)."""
    xs = np.sort(x)
    n = len(xs)
    return float(xs[(n - 1) // 2] + xs[n // 2]) / 2


def median_last(a: np.ndarray) -> np.ndarray:
    """``np.median(a, axis=-1)`` of a NaN-free float array, the same numbers, partitioning ``a`` in place:
    np.median copies the array first and then scans its result for NaNs, which cost as much as the
    partition itself at the bootstrap's (groups, resamples, samples) arrays."""
    n = a.shape[-1]
    half = n // 2
    if n % 2:
        a.partition(half, axis=-1)
        return a[..., half].copy()
    a.partition([half - 1, half], axis=-1)
    return (a[..., half - 1] + a[..., half]) / 2  # np.median's mean of the two middle values


def t95(dof: int) -> float:
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.96


def robust_sigma(x: np.ndarray) -> np.ndarray:
    """The largest of three spread estimates along the last axis: stdev, 1.4826·MAD, IQR/1.349 (0 for
    fewer than 2 values)."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] < 2:
        return np.zeros(x.shape[:-1])
    q1, q3 = np.percentile(x, [25, 75], axis=-1)
    mad = np.median(np.abs(x - np.median(x, axis=-1, keepdims=True)), axis=-1)
    return np.maximum.reduce([np.std(x, axis=-1, ddof=1), 1.4826 * mad, (q3 - q1) / 1.349])


def median_cis(
    groups: Sequence[np.ndarray], rng: np.random.Generator, reps: int
) -> list[tuple[float, float]]:
    """95% interval of each group's median ratio: bootstrap percentiles, widened to the robust t-interval.

    A single sample has no spread to learn from: its interval is unbounded, so it can neither win nor be
    eliminated on one launch. Groups of equal size share one resampling matrix (vectorised; the intervals
    stay independent estimates of each group)."""
    out: list[tuple[float, float]] = [(0.0, float("inf"))] * len(groups)
    by_n: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by_n.setdefault(len(g), []).append(i)
    for n, members in by_n.items():
        if n < 2:
            continue
        x = np.stack([groups[i] for i in members])  # (G, n)
        idx = rng.integers(0, n, size=(reps, n))
        lo, hi = np.percentile(median_last(x[:, idx]), [2.5, 97.5], axis=1)
        logs = np.log(x)
        half = t95(n - 1) * 1.2533 * robust_sigma(logs) / np.sqrt(n)
        center = np.median(logs, axis=1)
        lo, hi = np.minimum(lo, np.exp(center - half)), np.maximum(hi, np.exp(center + half))
        for j, i in enumerate(members):
            out[i] = (float(lo[j]), float(hi[j]))
    return out


def median_ci(ratios: np.ndarray, rng: np.random.Generator, reps: int) -> tuple[float, float]:
    """:func:`median_cis` of one group."""
    return median_cis([np.asarray(ratios, dtype=float)], rng, reps)[0]


def score_samples(
    samples: pd.DataFrame,
    flops_by_size: Mapping[int, float],
    bootstrap: int = 400,
    seed: int = 0,
    sizes: set[int] | None = None,
    nominal_mhz: float | None = None,
) -> pd.DataFrame:
    """One row per (kernel, size): median score vs the size's reference, its bootstrap CI, and GFLOPS.

    ``sizes`` limits the rows to those sizes (racing rescoring the open ones); the drift model always uses
    every sample. ``nominal_mhz``: the arch's clock, to use the samples' clock telemetry (see module doc)."""
    s = samples.copy()
    d = fit_drift(s, nominal_mhz=nominal_mhz)
    t = _ok_times(s)
    s["norm_us"] = d.bring(t, d.anchor)
    peak_us = d.bring(t, 0.0).to_numpy(float)
    ref_rows = s[(s["role"] == "reference") & s["norm_us"].notna()]
    ref_time = ref_rows.groupby("size_index")["norm_us"].median().to_dict()  # a dict: read once per group
    rng = np.random.default_rng(seed)
    drift = d.choice.estimator
    norm = s["norm_us"].to_numpy(float)
    status_a = s["status"].astype(str).to_numpy()
    reason_a = s["reason"].fillna("").astype(str).to_numpy()
    rows: list = []
    pending: list[tuple[int, np.ndarray]] = []  # (row, ratios) whose interval is computed in one batch
    # Plain numpy per group: pandas indexing per group costs ~ms, and finalize scores thousands of groups.
    for (kid, size), idx in s.groupby(["kernel_id", "size_index"], sort=True).indices.items():
        if sizes is not None and size not in sizes:
            continue
        st, good = status_a[idx], norm[idx][np.isfinite(norm[idx])]
        bad = st == "bad_timing"
        n_bad = int(bad.sum())
        bad_reason = f"{n_bad} timing(s) excluded: {reason_a[idx][bad][0]}" if n_bad else ""
        # Any failed launch (validation, crash, hang) disqualifies the kernel at this size.
        failed = (st != "ok") if len(good) == 0 else ((st != "ok") & ~bad)
        if failed.any():
            classes, counts = np.unique(st[failed], return_counts=True)
            status, reason = str(classes[np.argmax(counts)]), str(reason_a[idx][failed][0])
        else:
            status, reason = ("ok", bad_reason) if len(good) else ("no_samples", "")
        if len(good) == 0:
            rows.append((kid, size, 0, np.nan, np.nan, np.nan, np.nan, np.nan, status, reason, n_bad, drift))
            continue
        ref = ref_time.get(size, np.nan)
        peak = peak_us[idx]
        med_t = _med(peak[np.isfinite(peak)])  # time and GFLOPS at the peak state, scores at the median one
        gflops = flops_by_size[int(size)] / (med_t * 1e3)
        if np.isfinite(ref):
            pending.append((len(rows), ref / good))
        score = _med(ref / good)
        row = [kid, size, len(good), score, np.nan, np.nan, med_t, gflops, status, reason, n_bad, drift]
        rows.append(row)
    for (r, _), ci in zip(pending, median_cis([p[1] for p in pending], rng, bootstrap), strict=True):
        rows[r][4:6] = ci
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def score_library(
    samples: pd.DataFrame,
    library: Library,
    sizes: list[list[int]],
    profile: Mapping,
    config: Mapping,
    only: set[int] | None = None,
    bootstrap: int | None = None,
) -> pd.DataFrame:
    """Flag bad timings (faster than the family's peak on this profile, slower than the backend's launch
    timeout), then score (``only``: just those size indices; ``bootstrap`` overrides the configured resample
    count; see :func:`score_samples`)."""
    flops = {i: gemm_flops(library.family, *map(int, s[:4])) for i, s in enumerate(sizes)}
    peak = family_peak_gflops(profile, library.family)
    kinds = samples["source"].dropna().astype(str).unique() if "source" in samples else ()
    timeout = launch_timeout_us(config, kinds)
    flagged = flag_bad_timings(samples, samples["size_index"].map(flops).to_numpy(float), peak, timeout)
    check_reference(flagged, library.name, sizes)
    reps = int(bootstrap or config["benchmark"]["bootstrap"])
    return score_samples(
        flagged, flops, reps, int(config["seed"]), only, nominal_mhz=float(profile["clock_mhz"])
    )


def score_state_times(
    samples: pd.DataFrame, library: Library, sizes: list[list[int]], profile: Mapping, config: Mapping
) -> dict[tuple[str, int], float]:
    """Per (kernel, size), its median launch time (µs) in the batch's median thermal state: the state its
    score is taken in (:func:`score_samples`), bad timings flagged as :func:`score_library` flags them.

    GFLOPS are taken at the peak state instead, extrapolated there with each (kernel, size)'s fitted drift
    sensitivity, which a few samples shrunk towards the kernel's own cannot pin down where the size is
    memory-bound (the simulated chip's launch times there came out 7-30% off per size). Times that weigh
    sizes against each other (a workload's: oto.measurement.finals.workload_time) need no extrapolation:
    every kernel of the batch is brought to one state."""
    flops = {i: gemm_flops(library.family, *map(int, s[:4])) for i, s in enumerate(sizes)}
    peak = family_peak_gflops(profile, library.family)
    kinds = samples["source"].dropna().astype(str).unique() if "source" in samples else ()
    timeout = launch_timeout_us(config, kinds)
    flagged = flag_bad_timings(samples, samples["size_index"].map(flops).to_numpy(float), peak, timeout)
    d = fit_drift(flagged, nominal_mhz=float(profile["clock_mhz"]))
    frame = pd.DataFrame(
        {
            "kernel_id": flagged["kernel_id"].astype(str).to_numpy(),
            "size_index": flagged["size_index"].astype(int).to_numpy(),
            "time_us": d.bring(_ok_times(flagged), d.anchor).to_numpy(float),
        }
    ).dropna()
    medians = frame.groupby(["kernel_id", "size_index"])["time_us"].median()
    return {(str(k), int(i)): float(v) for (k, i), v in medians.items()}
