"""The simulated backend: builds and times kernels on the simulated GPU's performance model
(:mod:`oto.hardware.simulated.performance`) plus its noise model (:mod:`oto.hardware.simulated.noise`).

Every number it returns is ``simulated``. The model and its calibration are in docs/simulator.md.

Launch order (``sim.launch_order``): ``plan`` runs the plan's launches as listed and reads the clock at every
launch; ``sweeps`` runs them as Tensile's client does (:mod:`oto.backends.sweeps`: one sweep per
repetition, problem after problem, every kernel of a problem back to back, orders permuted per sweep) and its
observer reports one clock per sweep, which is what the tensile backend delivers on a real APU.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oto.backends.base import (
    BuildResult,
    Capabilities,
    Costs,
    Kernel,
    Launch,
    MeasurePlan,
    Problem,
    Sample,
    Size,
)
from oto.backends.sweeps import plan_sweeps, roles_of, sweep_launches, sweep_of_launch
from oto.config import config_defaults
from oto.hardware.simulated.noise import NOISE_KEYS, NoiseModel
from oto.hardware.simulated.performance import (
    CHIP_VERSION_FIELDS,
    MODEL_VERSION,
    Arch,
    SimGPU,
    chip_version,
    with_chip,
)

LAUNCH_ORDERS = {"plan": "plan", "sweeps": "reported"}  # sim.launch_order -> Capabilities.launch_order


class SimBackend:
    name = "sim"
    numbers = "simulated"
    rocblas_client = "model"  # the simulated GPU answers rocblas-bench from its model (verify, compare)
    PROFILE_FIELDS = (*Arch.PROFILE_FIELDS, "calibration")  # the simulated GPU is the profile's
    # What its provenance reads (the chip constants and their calibration: performance.chip_version), so
    # records simulated on two calibrations of a chip never count as the same experiment. Every stage that
    # resolves the backend for its provenance declares them (oto.run.profile_views).
    PROVENANCE_FIELDS = ("arch", *CHIP_VERSION_FIELDS)

    def __init__(self, profile: Mapping[str, Any], sim_config: Mapping[str, Any], seed: int, stream: str):
        defaults = config_defaults("sim")  # the config schema states every default
        unknown = sorted(set(sim_config) - set(defaults))
        if unknown:
            raise ValueError(
                f"config field 'sim': unknown key(s) {', '.join(unknown)} (known: {', '.join(defaults)})"
            )
        self.launch_order = str(sim_config.get("launch_order", defaults["launch_order"]))
        if self.launch_order not in LAUNCH_ORDERS:
            raise ValueError(
                f"config field 'sim.launch_order': {self.launch_order!r} is not one of "
                f"{', '.join(LAUNCH_ORDERS)}"
            )
        # a hidden device (sim.chip): the chip constants the simulated GPU really has, unknown to the run
        self.hidden_chip = dict(sim_config.get("chip") or {})
        self.settings = {
            k: float(sim_config.get(k, v)) for k, v in defaults.items() if k not in ("launch_order", "chip")
        }
        st = self.settings
        if not 0 <= st["validation_fail_rate"] <= 1 or st["cooldown_us"] < 0 or st["pace"] < 0:
            raise ValueError(
                "config field 'sim': validation_fail_rate must be in [0, 1], cooldown_us and pace >= 0"
            )
        self.seed, self.stream = int(seed), str(stream)
        self.profile = profile
        self._gpu: SimGPU | None = None
        self._truth: dict[tuple, tuple] = {}  # _kernel_truth's answers
        self.noise = NoiseModel(self.seed, self.stream, **{k: self.settings[k] for k in NOISE_KEYS})
        self.launch_timeout_us = st["timeout_us"]  # a slower launch is reported as a hang

        sweeps = self.launch_order == "sweeps"
        telemetry = ("per_sweep" if sweeps else "per_launch") if self.settings["clock_telemetry"] else "none"
        self.capabilities = Capabilities(LAUNCH_ORDERS[self.launch_order], telemetry, 1 if sweeps else None)

    @property
    def gpu(self) -> SimGPU:
        """The simulated GPU, made on first use: mutate and emit ask only for the provenance, and their
        profile views do not carry the figures the GPU is made of."""
        if self._gpu is None:
            profile = with_chip(self.profile, self.hidden_chip) if self.hidden_chip else self.profile
            self._gpu = SimGPU(profile, seed=self.seed)
        return self._gpu

    @classmethod
    def from_config(cls, config: Mapping[str, Any], profile: Mapping[str, Any], stream: str) -> SimBackend:
        return cls(profile, config["sim"], seed=int(config["seed"]), stream=stream)

    @classmethod
    def costs(cls, config: Mapping[str, Any]) -> Costs:
        # The model computes a launch in ~30 us of CPU (the demo's 32 benchmark jobs, 2-core dev machine);
        # sim.pace sleeps that many wall seconds per simulated second of kernel time.
        pace = float((config.get("sim") or {}).get("pace", config_defaults("sim")["pace"]))
        return Costs(launch_overhead_us=30.0, gpu_time_scale=pace, source="simulator (CPU) and sim.pace")

    def quarantined(self, library: str) -> dict[str, str]:
        return {}  # no GPU to take down

    def provenance(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "numbers": self.numbers,
            "model_version": MODEL_VERSION,
            "arch": str(self.profile["arch"]),
            "chip_version": chip_version(self.profile, self.hidden_chip),
            "seed": self.seed,
            "stream": self.stream,
            "noise": dict(self.settings),
            "launch_order": self.launch_order,
            "capabilities": self.capabilities.as_dict(),
        }

    def build(self, problem: Problem, kernels: Sequence[Kernel], workdir: Path) -> list[BuildResult]:
        fam, pattern = problem.library.family, problem.library.pattern
        out = []
        for k in kernels:
            status, reason, res = self.gpu.build_outcome(fam, k.params, pattern)
            out.append(BuildResult(k.id, status, reason, res))
        return out

    def ground_truth(
        self,
        problem: Problem,
        kernel_params: Mapping[str, Any],
        sizes: Sequence,
        clock_mhz: float | None = None,
    ) -> np.ndarray:
        """Noise-free launch times (µs) of one kernel at ``sizes`` (Size objects or [m, n, batch, k]): at the
        nominal clock, or in the drift state where the core clock runs at ``clock_mhz`` (memory-bound
        kernels slow down less than the clock in that state).

        For tests and benchmarks that grade the workflow against the truth; stages never call it."""
        m, n, b, k = _size_arrays(sizes)
        fam, pattern = problem.library.family, problem.library.pattern
        if clock_mhz is None:
            return self.gpu.true_time_us(fam, kernel_params, m, n, b, k, pattern)
        bd = self.gpu.breakdown(fam, kernel_params, m, n, b, k, pattern)
        ratio = clock_mhz / self.gpu.arch.clock_mhz
        return bd["time_us"] * self.noise.factor_at_clock(ratio, bd["alu_fraction"])

    def measure(self, problem: Problem, plan: MeasurePlan, workdir: Path) -> list[Sample]:
        run = self.simulate(problem, plan)
        times, status, reason = run.times.tolist(), run.status.tolist(), run.reason.tolist()
        clock, sweep = run.clock_mhz.tolist(), run.sweep.tolist()
        return [
            Sample(
                seq,
                la.kernel_id,
                la.role,
                la.size_index,
                la.rep,
                times[seq],
                status[seq],
                reason[seq],
                clock[seq],
                sweep[seq],
            )  # fmt: skip
            for seq, la in enumerate(run.launches)
        ]

    def _kernel_truth(self, fam, pattern: str, params, m, n, b, k, sizes_key: tuple):
        """A kernel's verdict (None: it runs and validates) and noise-free times and ALU fractions at the
        plan's sizes. The model is deterministic (only the noise draws random numbers), so a race's rounds,
        which time the same kernels at the same sizes, compute them once per job."""
        key = (repr(list(params.items())), sizes_key)  # repr keeps 1, 1.0 and True apart
        known = self._truth.get(key)
        if known is None:
            status, reason, _ = self.gpu.build_outcome(fam, params, pattern)
            verdict = None
            if status != "ok":  # the plan should only hold built kernels; launching one anyway crashes
                verdict = ("crash", f"kernel did not build ({status}: {reason})")
            elif self.gpu.fails_validation(fam, params, self.settings["validation_fail_rate"]):
                verdict = ("validation_failed", "results differ from the reference GEMM")
            bd = self.gpu.breakdown(fam, params, m, n, b, k, pattern)
            if len(self._truth) >= 4096:
                self._truth.clear()
            known = self._truth[key] = (verdict, bd["time_us"], bd["alu_fraction"])
        return known

    def simulate(self, problem: Problem, plan: MeasurePlan) -> SimRun:
        """:meth:`measure` as arrays over the launches in the order they ran: what the simulated rocBLAS
        client reads, which times a big deck's calls by the million and needs no Sample per launch."""
        fam, pattern = problem.library.family, problem.library.pattern
        launches = list(plan.launches)
        if not launches:
            empty = np.array([], dtype=object)
            return SimRun([], np.array([]), empty, empty, np.array([]), np.array([], dtype=int))
        sweep_id = np.full(len(launches), -1)
        if self.launch_order == "sweeps":  # the order Tensile's client would run the plan in
            sweeps = plan_sweeps(launches, self.stream)
            launches = sweep_launches(sweeps, roles_of(launches))
            sweep_id = np.asarray(sweep_of_launch(sweeps))
        m, n, b, k = _size_arrays(plan.sizes)
        too_large = self.gpu.problem_bytes(fam, m, n, b, k) > self.gpu.arch.usable_bytes
        usable_gib = self.gpu.arch.usable_bytes / 2**30
        kernel_ids = sorted({la.kernel_id for la in launches})
        row = {kid: i for i, kid in enumerate(kernel_ids)}
        true = np.empty((len(kernel_ids), len(m)))
        alu = np.empty_like(true)
        verdict: dict[str, tuple[str, str]] = {}
        sizes_key = (fam.name if hasattr(fam, "name") else str(fam), pattern, m.tobytes(), n.tobytes())
        sizes_key += (b.tobytes(), k.tobytes())
        for kid in kernel_ids:
            if kid not in plan.kernels:
                raise ValueError(f"launch names kernel {kid!r} that the plan does not list")
            params = plan.kernels[kid].params
            truth = self._kernel_truth(fam, pattern, params, m, n, b, k, sizes_key)
            kernel_verdict, time_us, alu_fraction = truth
            if kernel_verdict is not None:
                verdict[kid] = kernel_verdict
            true[row[kid]], alu[row[kid]] = time_us, alu_fraction

        ki = np.array([row[la.kernel_id] for la in launches])
        si = np.array([la.size_index for la in launches])
        crashed = np.array([verdict.get(la.kernel_id, ("",))[0] == "crash" for la in launches])
        runs = ~too_large[si] & ~crashed
        times, timed_out, start = self.noise.run(
            true[ki, si], alu[ki, si], runs, self.settings["cooldown_us"]
        )
        clock = (
            self.noise.clock_reading(start, self.gpu.arch.clock_mhz)
            if self.settings["clock_telemetry"]
            else np.full(len(launches), np.nan)
        )
        if self.capabilities.clock_telemetry == "per_sweep":  # one reading per sweep: its median
            for sw in np.unique(sweep_id):
                at = sweep_id == sw
                clock[at] = np.nanmedian(clock[at]) if np.isfinite(clock[at]).any() else np.nan

        # Each launch's outcome, the first that applies: too large, hung, the kernel's own verdict, ok.
        status = np.full(len(launches), "ok", dtype=object)
        reason = np.full(len(launches), "", dtype=object)
        for kid, (what, why) in verdict.items():
            at = ki == row[kid]
            status[at], reason[at] = what, why
        status[timed_out] = "timeout"
        reason[timed_out] = f"no completion within {self.settings['timeout_us']:.0f} us"
        for s in np.flatnonzero(too_large):
            at = si == s
            if at.any():
                need = float(self.gpu.problem_bytes(fam, m[s], n[s], b[s], k[s]))
                status[at] = "too_large"
                reason[at] = (
                    f"A+B+C+D need {need / 2**30:.2f} GiB > usable device memory {usable_gib:.2f} GiB"
                )
        out = np.where(status == "ok", np.asarray(times, dtype=np.float64), np.nan)
        if self.settings["pace"] > 0:  # completed kernel time only: a paced hang would sleep for hours
            time.sleep(self.settings["pace"] * float(np.nansum(times)) / 1e6)
        return SimRun(
            launches, out, status, reason, np.asarray(clock, dtype=np.float64), sweep_id.astype(int)
        )


@dataclass(frozen=True)
class SimRun:
    """One plan on the simulated GPU, per launch in the order it ran: time (µs; NaN unless ok), status,
    reason, clock reading (NaN without telemetry) and sweep (-1: none)."""

    launches: list[Launch]
    times: np.ndarray
    status: np.ndarray
    reason: np.ndarray
    clock_mhz: np.ndarray
    sweep: np.ndarray


def _size_arrays(sizes: Sequence) -> tuple[np.ndarray, ...]:
    rows = [s.as_list() if isinstance(s, Size) else list(s) for s in sizes]
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    return arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
