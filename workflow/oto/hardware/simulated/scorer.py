"""Shipped kernels timed on the simulated GPU: the scorer :func:`oto.deck.override.choose_shipped` uses where
nothing was measured. Its times are the performance model's noise-free ones, so every choice it makes is
labelled ``simulated``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oto.gemm import Library
from oto.hardware.simulated.performance import MODEL_VERSION, SimGPU


class SimulatedScorer:
    """``times_us(library, solutions, sizes)``: one row per solution, None where the simulated build of the
    solution fails on this arch (it could not run there)."""

    numbers = "simulated"

    def __init__(self, profile: Mapping[str, Any], seed: int = 0):
        self.gpu = SimGPU(profile, seed)
        self.label = f"oto's simulated {profile.get('arch', 'GPU')} (model {MODEL_VERSION}, seed {seed})"

    def times_us(
        self, library: Library, solutions: Sequence[Mapping[str, Any]], sizes: Sequence[Sequence[int]]
    ) -> list[list[float | None]]:
        if not sizes:
            return [[] for _ in solutions]
        m, n, b, k = np.asarray(sizes, dtype=np.float64).reshape(-1, 4).T
        out: list[list[float | None]] = []
        for sol in solutions:
            params = sol["params"]
            if self.gpu.build_outcome(library.family, params, library.pattern)[0] != "ok":
                out.append([None] * len(m))
                continue
            t = self.gpu.true_time_us(library.family, params, m, n, b, k, library.pattern)
            out.append([float(x) for x in np.atleast_1d(t)])
        return out
