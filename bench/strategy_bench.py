"""Search strategies on oto's own space: the simulated Tensile space of several libraries, equal budget.

    python bench/strategy_bench.py [--seeds 5] [--generations 8] [--per-generation 12] [--sizes 32]
                                   [--libraries L1,L2,...] [--strategies surrogate,symbolic,random]
                                   [--jobs 2] [--json OUT]

For each library (default: five of different families, from the shipped deck) and each registered strategy,
it runs the workflow's loop without Snakemake: every generation the strategy proposes
``--per-generation`` kernels from the evidence so far (seeded with the shipped solutions at the tuning sizes,
as mutate does), each kernel is built and timed on the simulated gfx90c at the library's tuning sizes (the
same farthest-point sample the workflow uses), and its observed score is the geomean over the sizes of
reference time / kernel time with 3% log-normal measurement noise (the reference is each size's shipped
solution, the spoof floor). Every strategy gets the same number of benchmarked kernels.

The figure reported is what the workflow would ship from those kernels, graded on the truth: per tuning size
the best measured kernel (by its noise-free score there, as racing would pick it), geomean over the sizes,
relative to the spoof floor (1.0). ``vs random`` divides by random search's figure on the same library and
seed. Numbers are **simulated** (the simulated GPU, docs/simulator.md); search quality is judged here on the
space oto tunes, and on recorded real spaces in ``bench/search_bench.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small GP solves: threading only adds contention

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from oto.deck.sources import read_manifest, shipped_manifest  # noqa: E402
from oto.deck.tuning_sizes import shipped_seeds, tuning_indices  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.hardware.simulated.performance import SimGPU  # noqa: E402
from oto.search.strategies import STRATEGIES, Evidence, Observation, make_strategy  # noqa: E402
from oto.search.tensile_space import tensile_space  # noqa: E402
from oto.tensile.legality import Limits  # noqa: E402
from oto.tensile.params import canonical  # noqa: E402

# Five families: FP32, FP64, HPA half (FP32 accumulate), packed half, complex double; four patterns.
DEFAULT_LIBRARIES = (
    "Cijk_Ailk_Bljk_SB",
    "Cijk_Ailk_Bjlk_DB",
    "Cijk_Alik_Bljk_HHS_BH",
    "Cijk_Alik_Bjlk_HB",
    "Cijk_Ailk_Bljk_ZB_GB",
)
NOISE = 0.03  # log-normal sigma of an observed score (the measurement bench's jitter)


class Problem:
    """One library on the simulated GPU at its tuning sizes: true per-size scores against the spoof floor."""

    def __init__(self, name: str, sizes: int, profile: dict):
        # the GPU's own deck: its stock library's shipped logic (vega10 for gfx90c), whose solutions are the
        # floor and the seeds, as in the workflow
        deck = read_manifest(shipped_manifest(profile["stock_library"]["arch"])).libraries[name]
        self.library = Library.parse(name)
        self.space = tensile_space(self.library, Limits.from_profile(profile))
        idx = tuning_indices(deck.sizes, sizes)
        self.seeds = shipped_seeds(deck, sizes)
        self.gpu = SimGPU(profile, seed=1)
        self.sizes = np.asarray([deck.sizes[i][:4] for i in idx], dtype=float).T
        self.ref = np.asarray(
            [self._times(canonical(deck.reference_params(i)))[j] for j, i in enumerate(idx)]
        )

    def _times(self, params) -> np.ndarray:
        return self.gpu.true_time_us(self.library.family, params, *self.sizes, self.library.pattern)

    def true_scores(self, params) -> np.ndarray | None:
        status, _, _ = self.gpu.build_outcome(self.library.family, params, self.library.pattern)
        return None if status != "ok" else self.ref / self._times(params)


def run_one(task: tuple) -> dict:
    library, strategy_name, seed, generations, per_generation, sizes = task
    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    problem = Problem(library, sizes, profile)
    strategy = make_strategy(strategy_name, seed)
    noise = np.random.default_rng([seed, 0xBE7C])
    obs: list[Observation] = []
    seen: set[str] = set()
    best = np.ones(problem.ref.shape)  # the spoof floor is measured every generation, as in the workflow
    curve, asked_s = [], 0.0
    for gen in range(generations):
        ev = Evidence(
            problem.space, gen, sorted(obs, key=lambda o: -(o.score or 0.0)), problem.seeds, frozenset(seen)
        )
        t0 = time.perf_counter()
        proposals = strategy.ask(ev, per_generation)
        asked_s += time.perf_counter() - t0
        for p in proposals:
            kid = problem.space.id_of(p.params)
            seen.add(kid)
            truth = problem.true_scores(p.params)
            if truth is None:
                obs.append(Observation(kid, p.params, None, 0, "build_failed"))
                continue
            best = np.maximum(best, truth)
            observed = float(np.exp(np.mean(np.log(truth)) + noise.normal(0.0, NOISE)))
            obs.append(Observation(kid, p.params, observed))
        curve.append(float(np.exp(np.mean(np.log(best)))))
    return {
        "library": library,
        "strategy": strategy_name,
        "seed": seed,
        "curve": curve,
        "benchmarked": len(obs),
        "ask_seconds": asked_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--per-generation", type=int, default=12)
    ap.add_argument("--sizes", type=int, default=32, help="tuning sizes per library")
    ap.add_argument("--libraries", default=",".join(DEFAULT_LIBRARIES))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    libraries = [x for x in args.libraries.split(",") if x]
    strategies = [x for x in args.strategies.split(",") if x]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [
        (lib, s, seed, args.generations, args.per_generation, args.sizes)
        for lib in libraries
        for s in strategies
        for seed in seeds
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(run_one, tasks))
    wall = time.perf_counter() - t0
    by = {(r["library"], r["strategy"], r["seed"]): r for r in runs}
    checkpoints = sorted({1, max(1, args.generations // 2), args.generations})
    print(
        f"strategy bench: {len(libraries)} libraries x {len(strategies)} strategies x {len(seeds)} seeds, "
        f"{args.generations} generations x {args.per_generation} kernels, {args.sizes} tuning sizes, "
        f"simulated gfx90c, {wall:.0f} s wall"
    )
    head = " | ".join(f"after {g * args.per_generation}" for g in checkpoints)
    print(f"\n| library | strategy | {head} | vs random (final) | ask s/gen |")
    print("|---|---|" + "---|" * len(checkpoints) + "---|---|")
    overall: dict[str, list[float]] = {s: [] for s in strategies}
    for lib in libraries:
        for s in strategies:
            cells = []
            for g in checkpoints:
                vals = [by[(lib, s, seed)]["curve"][g - 1] for seed in seeds]
                cells.append(f"{statistics.mean(vals):.3f}")
            ratios = [
                by[(lib, s, seed)]["curve"][-1] / by[(lib, "random", seed)]["curve"][-1]
                for seed in seeds
                if "random" in strategies
            ]
            overall[s] += [math.log(r) for r in ratios]
            ask = statistics.mean(by[(lib, s, seed)]["ask_seconds"] for seed in seeds) / args.generations
            vs = f"{statistics.mean(ratios):.3f} (min {min(ratios):.3f})" if ratios else "-"
            print(f"| {lib} | {s} | {' | '.join(cells)} | {vs} | {ask:.2f} |")
    if "random" in strategies:
        print("\ngeomean over libraries and seeds of (final / random's final):")
        for s in strategies:
            print(f"  {s:10s} {math.exp(statistics.mean(overall[s])):.3f}")
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
