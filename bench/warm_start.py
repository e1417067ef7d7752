"""Warm start across GPUs: how many benchmarks a run needs when it starts from another GPU's registry.

    python bench/warm_start.py [--pairs gfx90c:gfx902,...] [--seeds 3] [--first-seed 0] [--generations 8]
                               [--per-generation 12] [--sizes 32] [--libraries L1,L2,...] [--jobs 2]

For each pair ``donor:target`` and each library, the workflow's loop runs without Snakemake, as
``bench/strategy_bench.py`` runs it (the default strategy proposes ``--per-generation`` kernels a generation
from the evidence so far, seeded with the shipped solutions at the tuning sizes; each kernel is timed on the
simulated GPU at the library's tuning sizes (each GPU's deck is its stock library's: vega10 for gfx90c and
gfx902, navi21 for gfx1035, navi31 for gfx1103); its observed score is the geomean of reference time /
kernel time with 3% log-normal noise; the reference is each size's shipped solution on *that* GPU):

1. the donor tunes the library on its own simulated GPU; its benchmarked kernels and their observed scores are
   what its registry would hand on (``registry.warm_start``);
2. the target tunes cold (no priors), and warm: the donor's kernels as labelled priors, as
   :func:`oto.search.evidence.evidence_for` passes them (the library's best ``PRIOR_KEPT``), each at its
   nearest legal point of the target's space (:mod:`oto.search.prior_map`: unchanged where legal; a kernel of
   an ISA without the library's matrix instruction adopts the target's), deduplicated; the table counts how
   many were legal as they were, mapped, merged and left without a legal point.

The figure is the number of benchmarked kernels each target run needs before what it would ship (per tuning
size the best kernel benchmarked so far, graded on the truth, geomean over the sizes) reaches 95% of the
cold run's final figure; ``cold / warm`` is the saving (target: >= 2x). A warm run that never reaches it
counts as the full budget. Numbers are **simulated** on both GPUs (docs/simulator.md); the donor's and the
target's simulated GPUs differ only by their profiles (CUs, clocks, memory, ISA limits).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small GP solves: threading only adds contention

import argparse  # noqa: E402
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

from oto.registry.transfer import valu_only  # noqa: E402
from oto.search.evidence import PRIOR_KEPT, prior_label  # noqa: E402
from oto.search.prior_map import map_priors  # noqa: E402
from oto.search.strategies import DEFAULT_STRATEGY, Evidence, Observation, make_strategy  # noqa: E402
from strategy_bench import DEFAULT_LIBRARIES, NOISE, Problem  # noqa: E402  (the bench folder is the script's)

REACH = 0.95  # of the cold run's final figure


def problem(name: str, sizes: int, arch: str) -> Problem:
    """strategy_bench's problem (one library at its tuning sizes on the simulated GPU, true per-size scores
    against the spoof floor) on ``arch``'s own deck: its stock library's (vega10 for gfx90c and gfx902,
    navi21 for gfx1035, navi31 for gfx1103)."""
    return Problem(name, sizes, yaml.safe_load((ROOT / "arch_profiles" / f"{arch}.yaml").read_text()))


def tune(problem: Problem, seed: int, generations: int, per_generation: int, prior=()) -> tuple[list, list]:
    """One run: (its observations, what it would ship after each benchmarked kernel)."""
    strategy = make_strategy(DEFAULT_STRATEGY, seed)
    noise = np.random.default_rng([seed, 0xBE7C])
    obs: list[Observation] = []
    seen: set[str] = set()
    best = np.ones(problem.ref.shape)  # the spoof floor is measured every generation, as in the workflow
    curve = []
    for gen in range(generations):
        ranked = sorted(obs, key=lambda o: -(o.score or 0.0))
        ev = Evidence(problem.space, gen, ranked, problem.seeds, frozenset(seen), prior=list(prior))
        for p in strategy.ask(ev, per_generation):
            kid = problem.space.id_of(p.params)
            seen.add(kid)
            truth = problem.true_scores(p.params)
            if truth is None:
                obs.append(Observation(kid, p.params, None, 0, "build_failed"))
            else:
                best = np.maximum(best, truth)
                observed = float(np.exp(np.mean(np.log(truth)) + noise.normal(0.0, NOISE)))
                obs.append(Observation(kid, p.params, observed))
            curve.append(float(np.exp(np.mean(np.log(best)))))
    return obs, curve


def to_reach(curve: list[float], target: float) -> int:
    """Benchmarks until the curve reaches ``target`` (the whole budget when it never does)."""
    return next((i + 1 for i, v in enumerate(curve) if v >= target), len(curve))


def run_one(task: tuple) -> dict:
    donor_arch, target_arch, library, seed, generations, per_generation, sizes = task
    donor_obs, _ = tune(problem(library, sizes, donor_arch), seed + 1000, generations, per_generation)
    kept = sorted((o for o in donor_obs if o.score), key=lambda o: -o.score)[:PRIOR_KEPT]
    label = prior_label({"numbers": "simulated", "from_arch": donor_arch})
    prior = [Observation(o.kernel_id, o.params, o.score, source=label) for o in kept]
    target = problem(library, sizes, target_arch)
    moved = map_priors(prior, target.space, [bool(valu_only(donor_arch, library))] * len(prior))
    _, cold = tune(target, seed, generations, per_generation)
    _, warm = tune(target, seed, generations, per_generation, moved.priors)
    goal = REACH * cold[-1]
    return {
        "pair": f"{donor_arch}:{target_arch}",
        "library": library,
        "seed": seed,
        "cold_final": cold[-1],
        "warm_final": warm[-1],
        "cold_to_reach": to_reach(cold, goal),
        "warm_to_reach": to_reach(warm, goal),
        "priors": len(prior),
        "as_is": moved.as_is,
        "mapped": moved.mapped,
        "merged": moved.merged,
        "unmapped": len(moved.unmapped),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default="gfx90c:gfx902")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed .. first-seed + seeds - 1 (donors: each + 1000); fresh seeds judge a change",
    )
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--per-generation", type=int, default=12)
    ap.add_argument("--sizes", type=int, default=32, help="tuning sizes per library")
    ap.add_argument(
        "--libraries", default=",".join(DEFAULT_LIBRARIES), help="libraries both GPUs' decks hold"
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",") if p]
    libraries = [x for x in args.libraries.split(",") if x]
    tasks = [
        (d, t, lib, seed, args.generations, args.per_generation, args.sizes)
        for d, t in pairs
        for lib in libraries
        for seed in range(args.first_seed, args.first_seed + args.seeds)
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(run_one, tasks))
    budget = args.generations * args.per_generation
    print(
        f"warm start bench: {len(pairs)} pair(s) x {len(libraries)} libraries x {args.seeds} seeds "
        f"({args.first_seed}-{args.first_seed + args.seeds - 1}), "
        f"{args.generations} generations x {args.per_generation} kernels ({budget} benchmarks), "
        f"{args.sizes} tuning sizes, simulated, {time.perf_counter() - t0:.0f} s wall"
    )
    print(
        "\n| pair | library | cold final | warm final | benchmarks to 95% of cold final: cold | warm "
        "| cold / warm | priors: legal as they are / mapped / merged / no legal point |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for d, t in pairs:
        ratios, at_goal = [], 0
        for lib in libraries:
            mine = [r for r in runs if r["pair"] == f"{d}:{t}" and r["library"] == lib]
            cold = statistics.mean(r["cold_to_reach"] for r in mine)
            warm = statistics.mean(r["warm_to_reach"] for r in mine)
            ratio = math.exp(statistics.mean(math.log(r["cold_to_reach"] / r["warm_to_reach"]) for r in mine))
            ratios += [r["cold_to_reach"] / r["warm_to_reach"] for r in mine]
            at_goal += ratio >= 2.0
            kinds = ("as_is", "mapped", "merged", "unmapped")
            legal = " / ".join(str(sum(r[k] for r in mine)) for k in kinds)
            legal += f" of {sum(r['priors'] for r in mine)}"
            print(
                f"| {d}→{t} | {lib} | {statistics.mean(r['cold_final'] for r in mine):.3f} "
                f"| {statistics.mean(r['warm_final'] for r in mine):.3f} | {cold:.1f} | {warm:.1f} "
                f"| {ratio:.2f}x | {legal} |"
            )
        geo = math.exp(statistics.mean(math.log(x) for x in ratios))
        print(
            f"\n{d}→{t}: geomean cold/warm benchmarks to 95% of the cold final = {geo:.2f}x "
            f"(min {min(ratios):.2f}x over {len(ratios)} library-seeds); {at_goal} of {len(libraries)} "
            "libraries at >= 2x (their geomean over the seeds); target >= 2x on at least three libraries"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
