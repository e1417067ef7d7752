"""The replay scorer (``oto replay``): score a search strategy on a recorded Kernel Tuner cache
(:mod:`oto.search.tuning_cache`) used as an oracle.

Evaluations are counted the way Kernel Tuner's simulation runner counts ``max_fevals``: each configuration
of the space (present in the cache) counts once, the first time it is evaluated, failed ones included;
configurations outside the space never count (Kernel Tuner never runs them). Proposing one twice is free
but useless, and strategies never do it.

A measurement is the mean of a bootstrap resample of the recorded repetitions (seeded), so a strategy sees
realistic noise. The curve scores what was found the way Kernel Tuner's methodology does, by recorded
time: ``best_fraction = optimum time / best recorded time among the configurations evaluated so far``
(0 until a configuration ran). Picking the winner under noise is the workflow's re-measurement's job.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oto.search.strategies import DEFAULT_STRATEGY, STRATEGIES, Evidence, Observation, make_strategy
from oto.search.tuning_cache import CacheError, TuningCache, load_cache, measure

CHECKPOINTS = (25, 50, 100, 200, 400)


def run_seed(cache: TuningCache, strategy_name: str, budget: int, seed: int, batch: int = 1) -> list[float]:
    """best_fraction after each counted evaluation for one seeded run."""
    strategy = make_strategy(strategy_name, seed)
    noise = np.random.default_rng([seed, 0x5EED])
    space, opt = cache.space, cache.optimum
    obs: list[Observation] = []
    seen: set[str] = set()
    curve: list[float] = []
    best = math.inf
    size = space.size() or 0
    stalls = 0
    while len(curve) < min(budget, size):
        evidence = Evidence(
            space=space,
            generation=len(curve),
            observations=sorted(obs, key=lambda o: -(o.score or 0.0)),
            seen=frozenset(seen),
        )
        proposals = strategy.ask(evidence, min(batch, budget - len(curve)))
        stalls = stalls + 1 if not proposals else 0
        if stalls > 3:
            break  # strategy has nothing left to propose
        for p in proposals:
            idx = space.index(p.params)
            if idx is None or not space.valid(idx):
                continue  # outside the space: Kernel Tuner would not run it, so it does not count
            kid = space.key(idx)
            if kid in seen:
                continue
            seen.add(kid)
            t = measure(cache, idx, noise)
            obs.append(Observation(kid, space.config(idx), None if t is None else 1.0 / t))
            if t is not None:
                best = min(best, cache.times[idx])
            curve.append(opt / best)
            if len(curve) >= budget:
                break
    return curve


def summarise(curves: Sequence[Sequence[float]], budget: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in (*[c for c in CHECKPOINTS if c <= budget], budget):
        vals = [cur[min(c, len(cur)) - 1] if cur else 0.0 for cur in curves]
        out[f"fraction_at_{c}"] = {"mean": float(np.mean(vals)), "min": float(np.min(vals))}
    for level in (0.95, 0.99):
        reached = [next((i + 1 for i, v in enumerate(cur) if v >= level), None) for cur in curves]
        got = [r for r in reached if r is not None]
        out[f"share_reaching_{int(level * 100)}"] = len(got) / len(curves) if curves else 0.0
        out[f"median_evals_to_{int(level * 100)}"] = float(np.median(got)) if got else None
    return out


def replay(
    path: str | Path,
    strategy: str,
    budget: int,
    seeds: int,
    first_seed: int = 0,
    progress: Callable[[int, int, list[float], float], None] | None = None,
) -> dict[str, Any]:
    """Score ``strategy`` on the cache over ``seeds`` seeded runs; ``progress(done, seeds, curve, seconds)``
    is called after each run."""
    cache = load_cache(path)
    curves = []
    for s in range(first_seed, first_seed + seeds):
        t0 = time.monotonic()
        curves.append(run_seed(cache, strategy, budget, s))
        if progress is not None:
            progress(len(curves), seeds, curves[-1], time.monotonic() - t0)
    return {
        "optimum": cache.optimum,
        "budget": budget,
        "seeds": [
            {"seed": s, "best_fraction": c}
            for s, c in zip(range(first_seed, first_seed + seeds), curves, strict=True)
        ],
        "summary": {
            "strategy": strategy,
            "cache": str(path),
            "device": cache.device,
            "kernel": cache.kernel,
            "space_size": cache.space.size(),
            "failed_configs": len(cache.failures),
            "numbers": "replayed",
            "evaluations": "unique configurations of the space, failed ones included (Kernel Tuner's rule)",
            **summarise(curves, budget),
        },
    }


def explain(doc: dict[str, Any], out: Path) -> str:
    """What the numbers of a replay mean, for the terminal."""
    s = doc["summary"]
    seeds, budget = len(doc["seeds"]), doc["budget"]
    at = [(k.split("_")[-1], v) for k, v in s.items() if k.startswith("fraction_at")]
    lines = [
        f"{s['strategy']} on {Path(s['cache']).name}: {s['kernel']} on {s['device']}, {s['space_size']:,} "
        f"configurations ({s['failed_configs']:,} failed when recorded), replayed from Kernel Tuner's "
        "recorded measurements.",
        "Best configuration found so far, as a fraction of the recorded optimum (1.000 = found the "
        f"fastest), after N evaluations; mean over {seeds} seeds, worst seed in brackets:",
        "  " + "   ".join(f"N={n}: {v['mean']:.3f} ({v['min']:.3f})" for n, v in at),
    ]
    for level in (95, 99):
        share, median = s[f"share_reaching_{level}"], s[f"median_evals_to_{level}"]
        reach = f"median {median:.0f} evaluations" if median is not None else "never within the budget"
        lines.append(
            f"  {level}% of the optimum: reached by {share:.0%} of the seeds within {budget} ({reach})"
        )
    lines.append(f"Per-seed curves and this summary: {out}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="oto replay",
        description="Score a search strategy on a recorded Kernel Tuner cache, used as an oracle: each "
        "seeded run proposes configurations one at a time and 'measures' them from the recorded "
        "repetitions; the score after N evaluations is the recorded optimum time over the best recorded "
        "time found so far. "
        "Progress goes to stderr, one line per seed; the summary to stdout.",
        epilog="example: oto replay ../shared/reference/replay/gemm_RTX_2080_Ti.json.gz --budget 400 "
        "--seeds 20 --json out.json",
    )
    ap.add_argument("cache", help="Kernel Tuner cache file (.json or .json.gz) recorded on a real GPU")
    ap.add_argument(
        "--budget",
        type=int,
        required=True,
        help="evaluations per seed (unique configurations, failed ones count)",
    )
    ap.add_argument(
        "--seeds", type=int, default=20, help="number of seeded runs, seeds 0..S-1 (default %(default)s)"
    )
    ap.add_argument(
        "--strategy",
        default=DEFAULT_STRATEGY,
        choices=sorted(STRATEGIES),
        help="search strategy to score (default %(default)s; oto strategies lists them)",
    )
    ap.add_argument(
        "--json", required=True, type=Path, help="output file: every seed's curve and the summary (JSON)"
    )
    args = ap.parse_args(argv)
    if args.budget < 1 or args.seeds < 1:
        ap.error("--budget and --seeds must be at least 1")
    started = time.monotonic()

    def progress(done: int, total: int, curve: list[float], seconds: float) -> None:
        left = (time.monotonic() - started) / done * (total - done)
        best = f"best fraction {curve[-1]:.3f} after {len(curve)} evaluations" if curve else "no evaluation"
        tail = f", about {left:.0f} s left" if done < total else ""
        print(f"oto replay: seed {done}/{total}: {best} ({seconds:.1f} s){tail}", file=sys.stderr, flush=True)

    try:
        doc = replay(args.cache, args.strategy, args.budget, args.seeds, progress=progress)
    except CacheError as exc:
        print(f"oto replay: {exc}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc) + "\n")
    print(explain(doc, args.json))
    return 0
