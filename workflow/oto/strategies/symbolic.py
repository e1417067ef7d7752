"""The symbolic strategy: seeded local search around the best kernels, with a share of exploration.

Generation 0 starts from the shipped solutions (the spoof floor is where the search begins, not what it
must beat blindly) and their one-step neighbourhood. Later generations mutate the best observed kernels one
or two knobs at a time, cross the two best, and keep a slice of the budget for random legal configurations
so the search can leave a basin. Works with no API key; the agent rule falls back to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oto.strategies.base import Evidence, Observation, Proposal
from oto.tensile_params import PARAMS, CandidateError, candidate_id, canonical

_AXES = (1, 2, 4, 6, 8, 16)  # per-dimension ThreadTile values
_WG_AXES = (4, 8, 16, 32, 64)
_LSU = (1, 2, 4)
EXPLORE_SHARE = 0.2


def _rng(seed: int, evidence: Evidence) -> np.random.Generator:
    key = f"{seed}:{evidence.library.name}:{evidence.generation}".encode()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))


def _step(values: Sequence, current, rng: np.random.Generator):
    i = values.index(current) if current in values else int(rng.integers(len(values)))
    j = min(max(i + int(rng.choice([-2, -1, 1, 2], p=[0.15, 0.35, 0.35, 0.15])), 0), len(values) - 1)
    return values[j]


def mutate(params: Mapping[str, Any], rng: np.random.Generator, knobs: int = 1) -> dict[str, Any]:
    """Move ``knobs`` parameters to neighbouring legal values (geometry moves keep the tile meaningful)."""
    out = {k: (list(v) if isinstance(v, list | tuple) else v) for k, v in params.items()}
    names = list(PARAMS)
    for _ in range(knobs):
        name = names[int(rng.integers(len(names)))]
        if name == "ThreadTile":
            d = int(rng.integers(2))
            out[name][d] = _step(_AXES, out[name][d], rng)
        elif name == "WorkGroup":
            move = int(rng.integers(3))
            if move == 2:
                out[name][2] = _step(_LSU, out[name][2], rng)
            else:
                # Trade threads for work per thread so the macro tile stays put, or just resize.
                wg, tt = out[name], out["ThreadTile"]
                if rng.random() < 0.5 and wg[move] >= 8 and tt[move] * 2 in _AXES:
                    wg[move] //= 2
                    tt[move] *= 2
                else:
                    wg[move] = _step(_WG_AXES, wg[move], rng)
        else:
            out[name] = _step(PARAMS[name].values, out[name], rng)
    return out


def crossover(a: Mapping[str, Any], b: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    # Geometry knobs travel together: a tile shape only makes sense with its workgroup.
    geometry = ("ThreadTile", "WorkGroup", "VectorWidth", "GlobalReadVectorWidth")
    take_a = rng.random() < 0.5
    out = {}
    for name in PARAMS:
        src = (a if take_a else b) if name in geometry else (a if rng.random() < 0.5 else b)
        out[name] = src[name]
    return out


def random_params(rng: np.random.Generator) -> dict[str, Any]:
    out = {}
    for name, p in PARAMS.items():
        v = p.values[int(rng.integers(len(p.values)))]
        out[name] = list(v) if isinstance(v, tuple) else v
    return out


class SymbolicStrategy:
    name = "symbolic"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def tell(self, observations: Sequence[Observation]) -> None:
        return None  # stateless: everything it needs arrives as evidence in ask()

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        rng = _rng(self.seed, evidence)
        taken: set[str] = set(evidence.seen)
        out: list[Proposal] = []

        def offer(params: Mapping[str, Any], rationale: str, proposer: str = "symbolic") -> bool:
            try:
                params = canonical(params)
            except CandidateError:
                return False
            kid = candidate_id(params)
            if kid in taken or not evidence.is_legal(params):
                return False
            taken.add(kid)
            out.append(Proposal(params, proposer, rationale))
            return True

        ranked = [o for o in evidence.observations if o.score is not None]
        if evidence.generation == 0:
            for seed in evidence.seeds:
                if len(out) >= max(1, n // 2):
                    break
                offer(seed, "shipped gfx900 solution used at a tuning size", proposer="seed")
            parents = [dict(s) for s in evidence.seeds] or [canonical({})]
        else:
            parents = [dict(o.params) for o in ranked[:4]] or [dict(s) for s in evidence.seeds]

        n_explore = int(round(n * EXPLORE_SHARE)) if evidence.generation > 0 else 0
        attempts = 0
        while len(out) < n - n_explore and attempts < 200 * n and parents:
            attempts += 1
            # Rank-biased parent choice: the best kernel gets most of the local search.
            i = min(int(rng.geometric(0.5)) - 1, len(parents) - 1)
            if len(parents) > 1 and rng.random() < 0.2:
                child = crossover(parents[0], parents[int(rng.integers(1, len(parents)))], rng)
                why = "crossover of the two best kernels"
            else:
                knobs = 1 if rng.random() < 0.7 else 2
                child = mutate(parents[i], rng, knobs)
                why = f"{knobs}-knob neighbour of parent #{i + 1}"
            offer(child, why)
        attempts = 0
        while len(out) < n and attempts < 200 * n:
            attempts += 1
            offer(random_params(rng), "random legal configuration (exploration)")
        return out
