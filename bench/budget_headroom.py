"""Headroom captured per GPU-hour (issue #31): the share of the reachable workload-weighted speed-up a
budgeted run has captured after 1, 2, 4 and 8 simulated GPU-hours.

Reachable, per size the workload calls: the spoof floor's time (the reference kernel the size races) down to
the simulator's best over a legal grid of oto's knobs (``bench/spoof_headroom.py``'s grid, every candidate
legal and built) or the floor, whichever is faster; all noise-free simulated times (``true_time_us``) of the
GPU the run benchmarked. Captured after generation g: what finalize would ship if the run stopped there, the
fastest of the floor and the kernels of each library's gen-g selection (its per-size winners) at each size,
as a share of the reachable: Σ calls × (floor − captured time) / Σ calls × (floor − best time), over every
library. GPU-hours: the simulated ``time_us`` the generations' samples.csv recorded, summed over every library
up to generation g (with a budget every library's generation g waits for every generation g-1, so the run
passes through these states in order); builds and the simulator's modelled launch overhead outside
``time_us`` do not count (the model records none), nor finalize's race, reported beside. After T hours: the
last generation whose cumulative time fits in T. The final row is the run's finalize winners.

    python bench/budget_headroom.py --workload bench/data/workload_surrogate_tunableop_untuned0.csv \
        [--hours 8] [--cap 16] [--results DIR] [--workdir DIR] [--json OUT]

Without ``--results`` it runs the demo config with the workload deck, ``budget.hours`` and
``max_generations`` ``--cap`` in a fresh copy of HEAD (bench/budget_bench.py's ``run``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "bench"))

from budget_bench import run, workload_config  # noqa: E402
from oto.deck.model import read_library_yaml  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.hardware.simulated.performance import SimGPU  # noqa: E402
from oto.measurement.budget import generation_gpu_seconds  # noqa: E402
from oto.tensile import legality  # noqa: E402
from spoof_headroom import grid  # noqa: E402

HOURS = (1, 2, 4, 8)


def run_gpu(results: Path) -> SimGPU:
    """The simulated GPU a run's results were measured on: the profile it ran (``arch_profile.json``) and the
    seed its backend ran with (every final.yaml's provenance). The seed picks the virtual chip's
    per-configuration ruggedness, so ``SimGPU(profile)`` (seed 0) is another chip than a run of the default
    seed 1: until this function the noise-free figures of this bench and budget_bench were seed 0's."""
    from oto.hardware.simulated.performance import chip_version

    profile = json.loads((results / "arch_profile.json").read_text())["profile"]
    provenances = [
        yaml.safe_load(p.read_text())["provenance"] for p in sorted(results.glob("Cijk_*/final.yaml"))
    ]
    if not provenances:
        raise SystemExit(f"{results}: no Cijk_*/final.yaml, so no provenance to know the simulated GPU by")
    seeds = {int(p["seed"]) for p in provenances}
    backends = {str(p.get("backend")) for p in provenances}
    chips = {str(p.get("chip_version")) for p in provenances}
    if backends != {"sim"} or len(seeds) != 1:
        raise SystemExit(
            f"{results}: backends {sorted(backends)}, seeds {sorted(seeds)}: not one simulated GPU"
        )
    if chips != {chip_version(profile)}:  # a hidden device (sim.chip) or another profile: not this one
        raise SystemExit(
            f"{results}: chip_version {sorted(chips)} is not arch_profile.json's ({chip_version(profile)})"
        )
    return SimGPU(profile, seed=seeds.pop())


class LibraryHeadroom:
    """One library's workload sizes: calls, floor and best reachable times (µs), and a kernel's time there
    (noise-free, on the simulated GPU the run benchmarked)."""

    def __init__(self, lib_dir: Path, gpu: SimGPU, limits: legality.Limits, spaces: dict | None):
        self.dir = lib_dir
        self.deck = read_library_yaml(lib_dir / "deck.yaml")
        self.lib = Library.parse(self.deck.name)
        calls = self.deck.calls or [0] * len(self.deck.sizes)
        self.index = [i for i, c in enumerate(calls) if c > 0]
        self.calls = np.array([calls[i] for i in self.index], dtype=float)
        self.gpu = gpu
        sizes = np.array([self.deck.sizes[i][:4] for i in self.index], dtype=float).reshape(-1, 4)
        self.mnbk = tuple(sizes.T)
        refs = self.deck.references(self.index, limits) if self.index else {}
        self.floor = np.array([self.time(refs[i]["params"])[j] for j, i in enumerate(self.index)])
        self.best = self.floor  # without ``spaces``: the floor and the run's kernels only (no grid)
        if spaces is not None:
            key = (self.lib.family.code.removesuffix("_GB"), self.lib.pattern)
            if key not in spaces:
                spaces[key] = grid(self.lib, gpu, limits)
            self.best = self.captured(spaces[key])

    def time(self, params: dict) -> np.ndarray:
        if not self.index:
            return np.zeros(0)
        return np.broadcast_to(
            self.gpu.true_time_us(self.lib.family, params, *self.mnbk, self.lib.pattern), self.calls.shape
        )

    def captured(self, kernels) -> np.ndarray:
        t = self.floor.copy()
        for p in kernels:
            t = np.minimum(t, self.time(p))
        return t

    def at_generation(self, g: int) -> np.ndarray:
        sel = yaml.safe_load((self.dir / f"gen{g}" / "selection.yaml").read_text())
        return self.captured((sel.get("kernels") or {}).values())

    def final(self) -> np.ndarray:
        final = yaml.safe_load((self.dir / "final.yaml").read_text())
        kernels = final.get("kernels") or {}
        winner = {int(r["size_index"]): r.get("winner") for r in final["per_size"]}
        t = self.floor.copy()
        for j, i in enumerate(self.index):
            if winner.get(i) in kernels:
                t[j] = self.time(kernels[winner[i]])[j]
        return t


def share(libs: list[LibraryHeadroom], times: list[np.ndarray]) -> float:
    gained = sum(float(np.sum(h.calls * (h.floor - t))) for h, t in zip(libs, times, strict=True))
    reachable = sum(
        float(np.sum(h.calls * (h.floor - np.minimum(h.best, t)))) for h, t in zip(libs, times, strict=True)
    )
    return gained / reachable if reachable > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", type=Path, required=True)
    ap.add_argument("--workload-source", choices=("tunableop", "rocblas-log"))
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--cap", type=int, default=16, help="max_generations of the budgeted run")
    ap.add_argument("--results", type=Path, help="a finished budgeted run's results/<arch>")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    wall = float("nan")
    if args.results:
        results = args.results
    else:
        root = args.workdir or Path(tempfile.mkdtemp(prefix="oto-budget-headroom-"))
        extra = {
            **workload_config(args.workload, args.workload_source),
            "budget": {"hours": args.hours},
            "max_generations": args.cap,
        }
        results, wall = run(root / "budgeted", extra)
    t0 = time.monotonic()
    profile = json.loads((results / "arch_profile.json").read_text())["profile"]
    gpu = run_gpu(results)
    limits = legality.Limits.from_profile(profile)
    spaces: dict = {}
    libs = [LibraryHeadroom(d.parent, gpu, limits, spaces) for d in sorted(results.glob("Cijk_*/deck.yaml"))]
    libs = [h for h in libs if h.index]
    gens = max(len(list(h.dir.glob("gen*/selection.yaml"))) for h in libs)
    per_gen = []
    cumulative = 0.0
    every = sorted(results.glob("Cijk_*/deck.yaml"))
    for g in range(gens):
        paths = [p for d in every for p in glob.glob(f"{d.parent}/gen{g}/samples.csv")]
        cumulative += sum(generation_gpu_seconds(p) for p in paths)
        times = [h.at_generation(g) for h in libs]
        per_gen.append({"generation": g, "gpu_h": cumulative / 3600, "share": share(libs, times)})
    final_times = [h.final() for h in libs]
    beyond = sum(int(np.sum(t < h.best * (1 - 1e-9))) for h, t in zip(libs, final_times, strict=True))
    finalize_s = sum(generation_gpu_seconds(p) for p in glob.glob(f"{results}/Cijk_*/final_samples.csv"))
    floor_t = sum(float(np.sum(h.calls * h.floor)) for h in libs)
    reach = floor_t / sum(float(np.sum(h.calls * h.best)) for h in libs)
    print(
        f"workload {args.workload.name}: {len(libs)} libraries called, {sum(len(h.index) for h in libs)} "
        f"sizes; reachable workload-weighted speed-up over the floor {reach:.3f}x (simulated)\n"
    )
    print("| GPU-hours | last generation within | cumulative GPU h | share of the reachable captured |")
    print("|---|---|---|---|")
    at_hours = {}
    for hours in HOURS:
        done = [r for r in per_gen if r["gpu_h"] <= hours]
        r = done[-1] if done else None
        at_hours[hours] = r["share"] if r else 0.0
        gen = f"gen{r['generation']}" if r else "(gen0 not done)"
        print(f"| {hours} | {gen} | {r['gpu_h'] if r else 0:.2f} | {100 * at_hours[hours]:.1f}% |")
    print(f"| finalize | (+{finalize_s / 3600:.2f} h of finalize's race) | {per_gen[-1]['gpu_h']:.2f} | "
          f"{100 * share(libs, final_times):.1f}% |")  # fmt: skip
    curve = [f"gen{r['generation']} {r['gpu_h']:.2f} h {100 * r['share']:.1f}%" for r in per_gen]
    print("\nper generation: " + ", ".join(curve))
    print(f"sizes where the run beat the grid's best: {beyond}; run wall {wall:.0f} s, "
          f"analysis {time.monotonic() - t0:.0f} s")  # fmt: skip
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        doc = {"per_generation": per_gen, "at_hours": at_hours, "final": share(libs, final_times)}
        args.json.write_text(json.dumps({**doc, "reachable": reach}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
