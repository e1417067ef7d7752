"""Replay a Kernel Tuner cache as a recorded oracle and score a strategy on it (``oto replay``).

The cache (``.json`` or ``.json.gz``; format in Kernel Tuner's ``doc/source/cache_files.rst``) lists every
configuration of a space that was compiled and timed. A configuration absent from ``cache`` violates the
space's restrictions; one whose ``time`` is a string (``CompilationFailedConfig``…) failed.

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
import gzip
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oto.space import Index, Parameter, Space
from oto.strategies import DEFAULT_STRATEGY, STRATEGIES, Evidence, Observation, make_strategy

CHECKPOINTS = (25, 50, 100, 200, 400)


class CacheError(ValueError):
    """A cache file that is not a Kernel Tuner cache; the message names the file and the field."""


@dataclass
class ReplayCache:
    path: Path
    space: Space
    times: dict[Index, float | None]  # recorded mean time (ms); None = failed configuration
    reps: dict[Index, np.ndarray]  # recorded repetitions (ms), may be empty
    failures: dict[Index, str]
    device: str
    kernel: str

    @property
    def optimum(self) -> float:
        return min(t for t in self.times.values() if t is not None)


def _read_json(path: Path) -> Any:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt") as fh:
                raw = fh.read()
        else:
            raw = path.read_text()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CacheError(f"{path}: cannot read ({exc})") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        # Kernel Tuner appends while tuning and accepts an unterminated ("open") cache file.
        try:
            return json.loads(raw.rstrip().rstrip(",") + "}}")
        except json.JSONDecodeError as exc:
            raise CacheError(f"{path}: not valid JSON ({exc})") from None


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v  # list-valued parameters (Tensile's ThreadTile)


def load_cache(path: str | Path) -> ReplayCache:
    path = Path(path)
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise CacheError(f"{path}: top level must be an object, got {type(doc).__name__}")
    for key in ("tune_params_keys", "tune_params", "cache"):
        if key not in doc:
            raise CacheError(f"{path}: missing field {key!r} (is this a Kernel Tuner cache file?)")
    keys, tune, cache = doc["tune_params_keys"], doc["tune_params"], doc["cache"]
    if not isinstance(keys, list) or not keys:
        raise CacheError(f"{path}: field 'tune_params_keys' must be a non-empty list")
    if not isinstance(tune, dict) or any(not isinstance(tune.get(k), list) or not tune[k] for k in keys):
        raise CacheError(f"{path}: field 'tune_params' must map every tune_params_keys entry to a list")
    if not isinstance(cache, dict) or not cache:
        raise CacheError(f"{path}: field 'cache' must be a non-empty object")
    objective = doc.get("objective", "time")
    params = tuple(Parameter(k, tuple(_hashable(v) for v in tune[k])) for k in keys)
    lookup = [{v: i for i, v in enumerate(p.values)} for p in params]
    times: dict[Index, float | None] = {}
    reps: dict[Index, np.ndarray] = {}
    failures: dict[Index, str] = {}
    for ckey, rec in cache.items():
        if not isinstance(rec, dict):
            raise CacheError(f"{path}: field 'cache.{ckey}' must be an object")
        try:
            idx = tuple(lookup[i][_hashable(rec[k])] for i, k in enumerate(keys))
        except (KeyError, TypeError) as exc:
            raise CacheError(
                f"{path}: field 'cache.{ckey}': parameter {exc} missing or not among tune_params"
            ) from None
        t = rec.get(objective)
        if isinstance(t, int | float) and math.isfinite(t) and t > 0:
            times[idx] = float(t)
            r = rec.get("times")
            reps[idx] = np.asarray(r, dtype=float) if isinstance(r, list) and r else np.asarray([t])
        elif isinstance(t, str) or t is None:
            times[idx] = None
            failures[idx] = str(t or "missing objective")
        else:
            raise CacheError(
                f"{path}: field 'cache.{ckey}.{objective}' must be a positive number or a string"
            )
    if all(t is None for t in times.values()):
        raise CacheError(f"{path}: every configuration in 'cache' failed; nothing to replay")
    space = Space(name=f"replay:{path.name}", parameters=params, members=frozenset(times))
    return ReplayCache(
        path, space, times, reps, failures, str(doc.get("device_name", "")), str(doc.get("kernel_name", ""))
    )


def measure(cache: ReplayCache, idx: Index, rng: np.random.Generator) -> float | None:
    """One benchmark of a configuration: mean of a bootstrap resample of its recorded repetitions."""
    if cache.times.get(idx) is None:
        return None
    r = cache.reps[idx]
    return float(r[rng.integers(len(r), size=len(r))].mean())


def run_seed(cache: ReplayCache, strategy_name: str, budget: int, seed: int, batch: int = 1) -> list[float]:
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
            library=None,
            generation=len(curve),
            observations=sorted(obs, key=lambda o: -(o.score or 0.0)),
            seeds=(),
            seen=frozenset(seen),
            space=space,
        )
        proposals = strategy.ask(evidence, min(batch, budget - len(curve)))
        strategy.tell(obs[-batch:])
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
