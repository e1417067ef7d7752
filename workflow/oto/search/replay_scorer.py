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
from collections.abc import Sequence
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


def replay(path: str | Path, strategy: str, budget: int, seeds: int, first_seed: int = 0) -> dict[str, Any]:
    cache = load_cache(path)
    curves = [run_seed(cache, strategy, budget, s) for s in range(first_seed, first_seed + seeds)]
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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="oto replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", help="Kernel Tuner cache file (.json or .json.gz)")
    ap.add_argument("--budget", type=int, required=True, help="evaluations per seed")
    ap.add_argument("--seeds", type=int, default=20, help="number of seeded runs (seeds 0..S-1)")
    ap.add_argument("--strategy", default=DEFAULT_STRATEGY, choices=sorted(STRATEGIES))
    ap.add_argument("--json", required=True, type=Path, help="output file")
    args = ap.parse_args(argv)
    if args.budget < 1 or args.seeds < 1:
        ap.error("--budget and --seeds must be at least 1")
    try:
        doc = replay(args.cache, args.strategy, args.budget, args.seeds)
    except CacheError as exc:
        print(f"oto replay: {exc}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc) + "\n")
    s = doc["summary"]
    at = ", ".join(
        f"@{k.split('_')[-1]}={v['mean']:.3f}" for k, v in s.items() if k.startswith("fraction_at")
    )
    print(f"{args.strategy} on {Path(args.cache).name}: {at}; 99% reached by {s['share_reaching_99']:.0%}")
    return 0
