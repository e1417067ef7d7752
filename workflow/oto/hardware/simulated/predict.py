"""What the simulated GPU expects of one kernel at one size: GFLOPS, % of the peak and the bound that limits
it, so a measured figure can be put next to the model in one line (``oto predict``; the observation table of
``bench/sim_fidelity.py`` uses the same function)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oto.gemm import Library
from oto.hardware.simulated.performance import SimGPU

LAUNCH_BOUND = 0.5  # a launch that takes this share of the time or more is launch-bound


@dataclass(frozen=True)
class Prediction:
    label: str  # what the kernel is: spoof, best shipped, given...
    params: Mapping[str, Any]
    time_us: float
    gflops: float
    pct_peak: float
    bound: str  # launch, VALU, LDS, DRAM bandwidth, DRAM latency, LDS latency

    def line(self) -> str:
        return (
            f"{self.label:14s} {self.gflops:10.1f} GFLOPS  {self.pct_peak:5.1f}% of peak  bound: {self.bound}"
        )


def limiting_bound(bd: Mapping[str, np.ndarray]) -> str:
    """The term that limits a launch (from :meth:`SimGPU.breakdown` of one size): the launch overhead when it
    is half the time or more, else the largest per-iteration term among VALU, LDS and DRAM traffic, unless
    an exposed DRAM latency or LDS stall is larger still."""
    time, launch = float(np.ravel(bd["time_us"])[0]), float(np.ravel(bd["launch_us"])[0])
    if launch >= LAUNCH_BOUND * time:
        return "launch"
    terms = {
        "VALU": float(np.ravel(bd["valu_cycles"])[0]),
        "LDS": float(np.ravel(bd["lds_cycles"])[0]),
        "DRAM bandwidth": float(np.ravel(bd["mem_cycles"])[0]),
        "DRAM latency": float(np.ravel(bd["exposed_latency"])[0]),
        "LDS latency": float(np.ravel(bd["lds_stall_cycles"])[0]),
    }
    return max(terms, key=terms.__getitem__)


def predict(
    gpu: SimGPU, library: Library | str, params: Mapping[str, Any], size: Sequence[float], label: str = ""
) -> Prediction:
    """The model's expectation of ``params`` at ``size`` (M, N, batch, K) on ``gpu`` (oto's flop count)."""
    lib = library if isinstance(library, Library) else Library.parse(library)
    m, n, b, k = (float(x) for x in size)
    bd = gpu.breakdown(lib.family, params, m, n, b, k, lib.pattern)
    t = float(np.ravel(bd["time_us"])[0])
    gflops = lib.family.flops_per_mac * m * n * b * k / t / 1e3
    pct = 100 * gflops / gpu.peak_gflops(lib.family)
    return Prediction(label, dict(params), t, gflops, pct, limiting_bound(bd))


def best_of(
    gpu: SimGPU,
    library: Library | str,
    kernels: Sequence[Mapping[str, Any]],
    size: Sequence[float],
    label: str,
) -> Prediction:
    """The fastest of ``kernels`` at ``size`` under the model."""
    return min((predict(gpu, library, p, size, label) for p in kernels), key=lambda p: p.time_us)


def nearest_row(sizes: np.ndarray, size: Sequence[float]) -> int:
    """The row of ``sizes`` (M, N, batch, K) nearest ``size`` in log distance: whose solution a library picks
    there (the spoof floor of an arbitrary size, as bench/spoof_headroom.py takes it)."""
    return int(
        np.argmin(np.sum(np.log(np.asarray(sizes, dtype=float) / np.asarray(size, dtype=float)) ** 2, 1))
    )
