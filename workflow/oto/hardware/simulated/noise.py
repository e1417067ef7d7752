"""The simulated GPU's noise model: thermal/DVFS drift, jitter, outliers, hangs and clock readings of a run.

Its settings are the ``sim`` block of the run config (defaults in the config schema); the performance model
(:mod:`oto.hardware.simulated.performance`) gives the noise-free times it perturbs.
"""

from __future__ import annotations

import hashlib
import math
from typing import NamedTuple

import numpy as np

from oto.config import config_defaults

# The `sim` config keys this model takes (the rest of the block configures the backend).
NOISE_KEYS = (
    "drift",
    "drift_period_s",
    "jitter",
    "outlier_rate",
    "outlier_scale",
    "hang_rate",
    "timeout_us",
    "clock_noise",
)


def _stream_key(stream: str) -> int:
    return int.from_bytes(hashlib.sha256(stream.encode()).digest()[:8], "little")


# Slow drift: three sinusoids with seeded phases; relative periods and weights (weights sum to 1, so the
# normalised drift never leaves [-1, 1]).
_DRIFT_PERIODS = (1.0, 1 / 3.1, 1 / 9.7)
_DRIFT_WEIGHTS = (0.55, 0.3, 0.15)


class Timing(NamedTuple):
    time_us: np.ndarray  # NaN on timeout or when the launch never started
    timed_out: np.ndarray
    start_us: np.ndarray  # virtual time each launch started (NaN when it never started)


class NoiseModel:
    """Launch-to-launch variation of an APU, driven by a virtual clock (microseconds since the job began).

    * drift: thermal/DVFS clock changes, a smooth bounded factor in [1 - drift, 1 + drift]; memory-bound
      kernels follow the fixed DRAM clock and drift less (sensitivity 0.3 + 0.7 * ALU fraction).
    * jitter: log-normal, sigma ``jitter``.
    * outliers: with probability ``outlier_rate`` a launch is 1 + outlier_scale * U(0.5, 1.5) times slower
      (a CPU burst stealing DRAM bandwidth, a page-table walk, a context switch).
    * hangs: with probability ``hang_rate`` a launch never completes and is reported after ``timeout_us``.
    * clock telemetry: the core clock a launch started at, as an observer reads it on real hardware
      (gpu_metrics ``average_gfxclk_frequency``; Kernel Tuner's AMDSMIObserver): the nominal clock divided
      by the drift of a purely ALU-bound kernel, with log-normal reading noise ``clock_noise``. It tells the
      state of the ALU clock, not how much a given kernel slows down with it: that stays for scoring to fit.

    Every draw comes from ``numpy.random.default_rng(SeedSequence([seed, hash(stream)]))``, so (seed, stream)
    reproduces the exact sequence; the clock and the generator advance with each call to :meth:`run`.
    """

    def __init__(self, seed: int, stream: str, **settings: float):
        unknown = sorted(set(settings) - set(NOISE_KEYS))
        if unknown:
            raise TypeError(f"unknown noise setting(s) {', '.join(unknown)} (known: {', '.join(NOISE_KEYS)})")
        # Defaults: the config schema's `sim` block, the one place they are stated.
        merged = {k: float(v) for k, v in config_defaults("sim").items() if k in NOISE_KEYS}
        merged.update({k: float(v) for k, v in settings.items()})
        drift, drift_period_s, jitter = merged["drift"], merged["drift_period_s"], merged["jitter"]
        outlier_rate, outlier_scale, hang_rate = (
            merged["outlier_rate"],
            merged["outlier_scale"],
            merged["hang_rate"],
        )
        timeout_us, clock_noise = merged["timeout_us"], merged["clock_noise"]
        if not 0 <= drift < 1:
            raise ValueError(f"drift must be in [0, 1), got {drift}")
        for name, v in (("outlier_rate", outlier_rate), ("hang_rate", hang_rate)):
            if not 0 <= v <= 1:
                raise ValueError(f"{name} must be a probability, got {v}")
        if jitter < 0 or outlier_scale < 0 or clock_noise < 0 or drift_period_s <= 0 or timeout_us <= 0:
            raise ValueError(
                "jitter, outlier_scale, clock_noise must be >= 0; drift_period_s, timeout_us must be > 0"
            )
        self.settings = {
            "drift": drift, "drift_period_s": drift_period_s, "jitter": jitter, "outlier_rate": outlier_rate,
            "outlier_scale": outlier_scale, "hang_rate": hang_rate, "timeout_us": timeout_us,
            "clock_noise": clock_noise,
        }  # fmt: skip
        self.seed, self.stream = int(seed), stream
        self._rng = np.random.default_rng(np.random.SeedSequence([self.seed, _stream_key(stream)]))
        self._clock_rng = np.random.default_rng(np.random.SeedSequence([self.seed, _stream_key(stream), 1]))
        phases = self._rng.uniform(0, 2 * math.pi, len(_DRIFT_PERIODS))
        self._waves = tuple(
            (w, 2 * math.pi / (rel * drift_period_s * 1e6), float(ph))
            for w, rel, ph in zip(_DRIFT_WEIGHTS, _DRIFT_PERIODS, phases, strict=True)
        )
        self.clock_us = 0.0

    def _sensitivity(self, alu_fraction) -> np.ndarray:
        """How strongly a kernel follows the drift: fully the ALU share, 30% of the rest (DRAM clock)."""
        return self.settings["drift"] * (0.3 + 0.7 * np.asarray(alu_fraction, dtype=np.float64))

    def _factor_in_state(self, state, alu_fraction) -> np.ndarray:
        """The drift multiplier in ``state`` (in [-1, 1]). Throttling only: the fastest state is the boost
        clock the ceilings assume (factor 1), the mean is 1/(1-sens) and the swing is ±sens around it, so
        no state beats the theoretical ceiling. :meth:`run` inlines it per launch, for speed."""
        sens = self._sensitivity(alu_fraction)
        return (1 + sens * state) / (1 - sens)

    def drift_factor(self, t_us, alu_fraction=1.0) -> np.ndarray:
        """Ground truth: the drift multiplier at virtual time ``t_us`` (for tests and benchmarks only)."""
        t = np.asarray(t_us, dtype=np.float64)
        return self._factor_in_state(sum(w * np.sin(om * t + ph) for w, om, ph in self._waves), alu_fraction)

    def factor_at_clock(self, clock_ratio, alu_fraction=1.0) -> np.ndarray:
        """Ground truth: the drift multiplier of a kernel with ``alu_fraction`` in the state where the core
        clock runs at ``clock_ratio`` x nominal (for tests and benchmarks only)."""
        drift = self.settings["drift"]
        if drift == 0:
            return np.ones_like(np.asarray(alu_fraction, dtype=np.float64))
        state = ((1 - drift) / np.asarray(clock_ratio, dtype=np.float64) - 1) / drift
        return self._factor_in_state(state, alu_fraction)

    def clock_reading(self, start_us: np.ndarray, nominal_mhz: float) -> np.ndarray:
        """What a clock observer reports at each launch start (MHz, rounded): the nominal clock slowed by the
        ALU drift, with reading noise (its own generator: reading the clock never changes the timings)."""
        start = np.asarray(start_us, dtype=np.float64)
        noise = np.exp(self._clock_rng.normal(0.0, self.settings["clock_noise"], len(start)))
        return np.round(nominal_mhz / self.drift_factor(start) * noise)

    def run(
        self, true_us: np.ndarray, alu_fraction: np.ndarray, runs: np.ndarray, cooldown_us: float
    ) -> Timing:
        """Time a sequence of launches in order. ``runs`` is False for launches that never start (e.g. the
        allocation failed): they take no time. Time is NaN on timeout."""
        s = self.settings
        n = len(true_us)
        jit = np.exp(self._rng.normal(0.0, s["jitter"], n))
        outlier = np.where(
            self._rng.random(n) < s["outlier_rate"],
            1 + s["outlier_scale"] * self._rng.uniform(0.5, 1.5, n),
            1.0,
        )
        hang = self._rng.random(n) < s["hang_rate"]
        base = (np.asarray(true_us, dtype=np.float64) * jit * outlier).tolist()
        sens = self._sensitivity(alu_fraction).tolist()
        hang_l, runs_l = hang.tolist(), np.asarray(runs, dtype=bool).tolist()
        waves, timeout, sin = self._waves, s["timeout_us"], math.sin
        times, timed_out, starts = [math.nan] * n, [False] * n, [math.nan] * n
        t = self.clock_us
        for i in range(n):  # sequential: each launch's duration moves the clock the next one sees
            if not runs_l[i]:
                continue
            starts[i] = t
            d = (1 + sens[i] * sum(w * sin(om * t + ph) for w, om, ph in waves)) / (1 - sens[i])
            x = base[i] * d
            if hang_l[i] or x > timeout:
                timed_out[i] = True
                t += timeout + cooldown_us
            else:
                times[i] = x
                t += x + cooldown_us
        self.clock_us = t
        return Timing(np.array(times), np.array(timed_out), np.array(starts))
