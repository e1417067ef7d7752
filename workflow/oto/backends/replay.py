"""The replay backend: a recorded Kernel Tuner cache answers build and measure (numbers: ``replayed``).

Config: ``backend: replay`` and ``replay: {cache: PATH}``. A kernel is looked up by the cache's
``tune_params_keys`` in its parameters (a cache recorded over Tensile's parameter names, e.g. exported
from oto's registry, replays a Tensile tuning run; list values such as ThreadTile match as lists).
A kernel absent from the cache is outside the recorded space (build: ``rejected``); a recorded
``CompilationFailedConfig`` is a ``compile_error``; any other recorded failure crashes at launch. Each
launch draws one of the kernel's recorded repetitions (seeded per job). A cache records one problem, so
every size gets the same recorded times: replay compares strategies, it does not model sizes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oto.backends.base import BuildResult, Capabilities, Costs, Kernel, MeasurePlan, Problem, Sample
from oto.search.tuning_cache import TuningCache, load_cache


class ReplayBackend:
    name = "replay"
    numbers = "replayed"
    rocblas_client = "none"  # a recorded cache holds no rocBLAS client's answers (verify, compare)
    PROFILE_FIELDS = ()  # answers from the recorded cache, whatever the profile says
    launch_timeout_us = float("inf")  # the recording's own; scoring's absolute bound still applies

    # Recorded repetitions answer the plan's launches in its order; a cache records no clocks.
    capabilities = Capabilities("plan", "none", None)

    def __init__(self, replay_config: Mapping[str, Any], seed: int, stream: str):
        path = (replay_config or {}).get("cache")
        if not path:
            raise ValueError(
                "config field 'replay.cache': required with backend: replay (a Kernel Tuner cache)"
            )
        self.cache: TuningCache = load_cache(Path(path))
        self.seed, self.stream = seed, stream
        digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
        self.rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], profile: Mapping[str, Any], stream: str) -> ReplayBackend:
        return cls(config["replay"], seed=int(config["seed"]), stream=stream)

    @classmethod
    def costs(cls, config: Mapping[str, Any]) -> Costs:
        return Costs(launch_overhead_us=5.0, gpu_time_scale=0.0, source="a table lookup per launch")

    def quarantined(self, library: str) -> dict[str, str]:
        return {}  # no GPU to take down

    def provenance(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "numbers": self.numbers,
            "cache": str(self.cache.path),
            "device": self.cache.device,
            "kernel": self.cache.kernel,
            "seed": self.seed,
            "stream": self.stream,
            "capabilities": self.capabilities.as_dict(),
        }

    def _lookup(self, params: Mapping[str, Any]):
        return self.cache.space.index(params)

    def build(self, problem: Problem, kernels: Sequence[Kernel], workdir: Path) -> list[BuildResult]:
        out = []
        for k in kernels:
            idx = self._lookup(k.params)
            if idx is None or idx not in self.cache.times:
                out.append(BuildResult(k.id, "rejected", f"not in the replay cache {self.cache.path.name}"))
            elif self.cache.failures.get(idx, "").startswith("CompilationFailed"):
                out.append(BuildResult(k.id, "compile_error", f"recorded {self.cache.failures[idx]}"))
            else:
                out.append(BuildResult(k.id, "ok"))
        return out

    def measure(self, problem: Problem, plan: MeasurePlan, workdir: Path) -> list[Sample]:
        samples = []
        for seq, la in enumerate(plan.launches):
            kernel = plan.kernels.get(la.kernel_id)
            if kernel is None:
                raise ValueError(f"launch names kernel {la.kernel_id!r} that the plan does not list")
            idx = self._lookup(kernel.params)
            t, status, reason = float("nan"), "ok", ""
            if idx is None or self.cache.times.get(idx) is None:
                status = "crash"
                reason = f"recorded {self.cache.failures.get(idx, 'absent from the cache')}"
            else:
                reps = self.cache.reps[idx]
                t = float(reps[int(self.rng.integers(len(reps)))]) * 1000.0  # cache times are ms
            samples.append(Sample(seq, la.kernel_id, la.role, la.size_index, la.rep, t, status, reason))
        return samples
