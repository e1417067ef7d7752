"""Real repetition noise for grading the measurement pipeline: launches drawn from recorded GPU timings.

A Kernel Tuner cache (``.json`` / ``.json.gz``; format in ../shared/reference/replay/README.md) holds, for
every configuration of a search space, the 32 repetitions it was timed with on a real GPU. Treating those 32
times as the configuration's noise distribution, :class:`ReplayNoise` answers launch plans the way a backend
does: each launch draws one recorded repetition (seeded), optionally multiplied by a slow drift factor, and
the "truth" of a configuration is its recorded mean. Racing, scoring and ranking can then be graded on real
noise shapes (skew, bimodality, warm-up effects) rather than on the simulator's log-normal jitter.

For tests and benchmarks; the workflow's numbers never come from here.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oto.backends.base import Launch
from oto.measurement.scoring import SAMPLE_COLUMNS

MIN_REPETITIONS = 8  # configurations with fewer recorded times are skipped: no noise distribution to draw


def load_times(path: str | Path) -> dict[str, np.ndarray]:
    """{configuration key: recorded repetition times in µs} of every configuration that ran.

    Failed configurations (a string instead of a number in ``time``) and records without enough finite,
    positive ``times`` are left out."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("cache"), Mapping):
        raise ValueError(f"{path}: field 'cache' missing or not a mapping (not a Kernel Tuner cache file)")
    out: dict[str, np.ndarray] = {}
    for key, rec in doc["cache"].items():
        if not isinstance(rec, Mapping) or not isinstance(rec.get("time"), int | float):
            continue
        times = rec.get("times")
        if not isinstance(times, list):
            continue
        t = np.asarray([x for x in times if isinstance(x, int | float)], dtype=float) * 1e3  # ms → µs
        t = t[np.isfinite(t) & (t > 0)]
        if len(t) >= MIN_REPETITIONS:
            out[str(key)] = t
    if not out:
        raise ValueError(f"{path}: field 'cache' has no configuration with {MIN_REPETITIONS}+ recorded times")
    return out


class ReplayNoise:
    """Answers launch plans with recorded repetitions. ``kernels[size][kernel_id]`` names the configuration
    a kernel is at each size; ``drift(launch_index)`` (optional) multiplies every time, e.g. the simulator's
    thermal drift, to test normalisation on real noise plus APU drift."""

    numbers = "replayed"

    def __init__(
        self,
        times: Mapping[str, np.ndarray],
        kernels: Mapping[int, Mapping[str, str]],
        seed: int,
        drift: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        self.times, self.kernels, self.drift = times, kernels, drift
        self.rng = np.random.default_rng(seed)
        self.launched = 0  # the clock: launches so far, across plans

    def truth_us(self, size_index: int, kernel_id: str) -> float:
        """The configuration's recorded mean time: what a perfect measurement would report."""
        return float(np.mean(self.times[self.kernels[size_index][kernel_id]]))

    def measure(self, launches: Sequence[Launch]) -> pd.DataFrame:
        n = len(launches)
        t = np.empty(n)
        for i, la in enumerate(launches):
            rec = self.times[self.kernels[la.size_index][la.kernel_id]]
            t[i] = rec[self.rng.integers(len(rec))]
        if self.drift is not None:
            t *= self.drift(np.arange(self.launched, self.launched + n))
        self.launched += n
        rows = [
            (i, la.kernel_id, la.role, la.size_index, 0, 0, 1, 0, la.rep, t[i], "ok", "", self.numbers)
            for i, la in enumerate(launches)
        ]
        return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
