"""What every space-generic strategy needs: the space, the history as (config, cost) and a seeded rng."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from oto.search.space import Index, Space
from oto.search.strategies.base import Evidence, Observation, Proposal


def rng_for(seed: int, space: Space, step: int, salt: str = "") -> np.random.Generator:
    """A generator that depends only on (seed, space, step): reruns and resumed runs propose the same."""
    key = f"{seed}:{space.name}:{step}:{salt}".encode()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))


def cost(o: Observation) -> float | None:
    """Minimised quantity: minus log score (score = reference/kernel time, or 1/time when replaying)."""
    if o.score is None or not o.score > 0 or not math.isfinite(o.score):
        return None
    return -math.log(o.score)


@dataclass
class History:
    """The evidence mapped into a space: evaluated configs with their costs (None = failed)."""

    space: Space
    points: list[Index]
    costs: list[float | None]
    prior_points: list[Index]
    prior_costs: list[float]
    prior_distances: list[float]  # how far each prior was moved onto this space (0: legal here as it is)
    prior_sources: list[str]  # what each prior is ("": the family's other patterns), for the proposals' why
    taken: set[str]  # ids never to propose again (measured, rejected or proposed in this ask)
    seeds: list[Index]

    def ok(self) -> list[tuple[Index, float]]:
        return [(p, c) for p, c in zip(self.points, self.costs, strict=True) if c is not None]

    def ranked(self) -> list[Index]:
        return [p for p, _ in sorted(self.ok(), key=lambda pc: pc[1])]


def history(evidence: Evidence, space: Space) -> History:
    pts, costs, ppts, pcosts, pdist, psource = [], [], [], [], [], []
    for o in evidence.observations:
        # the observed parameters first: several configurations may share an id (Tensile builds them as one
        # kernel), and which of them the space met first depends on its cache
        idx = space.index(o.params) or space.known(o.kernel_id)
        if idx is not None:
            pts.append(idx)
            costs.append(cost(o))
    for o in evidence.prior:
        idx, c = space.index(o.params), cost(o)
        if idx is not None and c is not None:
            ppts.append(idx)
            pcosts.append(c)
            pdist.append(float(o.distance))
            psource.append(o.source)
    seeds = [i for i in (space.index(_listify(s)) for s in evidence.seeds) if i is not None]
    taken = set(evidence.seen) | {space.key(p) for p in pts}
    return History(space, pts, costs, ppts, pcosts, pdist, psource, taken, seeds)


def _listify(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


class Picker:
    """Collects proposals: unseen, valid, each id once."""

    def __init__(self, hist: History, n: int, proposer: str):
        self.hist, self.n, self.proposer = hist, n, proposer
        self.out: list[Proposal] = []
        self.picked: list[Index] = []

    @property
    def full(self) -> bool:
        return len(self.out) >= self.n

    def offer(self, idx: Index | None, rationale: str, proposer: str | None = None) -> bool:
        if idx is None or self.full:
            return False
        space = self.hist.space
        kid = space.key(idx)
        if kid in self.hist.taken or not space.valid(idx):
            return False
        self.hist.taken.add(kid)
        self.out.append(Proposal(space.config(idx), proposer or self.proposer, rationale))
        self.picked.append(idx)
        return True


def lines(space: Space, idx: Index) -> list[Index]:
    """Valid configurations that differ from ``idx`` in exactly one parameter, by any amount.

    Wider than :meth:`Space.neighbours` (one rank step): tuning spaces are often multi-modal along one knob
    (a 256-wide block beating 128 and 32 while 64 is worse), which adjacent steps cannot cross."""
    out = []
    for k, p in enumerate(space.parameters):
        for j in range(len(p.values)):
            if j != idx[k]:
                nb = (*idx[:k], j, *idx[k + 1 :])
                if space.valid(nb):
                    out.append(nb)
    return out


def pair_lines(space: Space, idx: Index, rng: np.random.Generator, limit: int = 300) -> list[Index]:
    """Valid configurations that differ from ``idx`` in exactly two parameters (the second neighbourhood
    of a variable-neighbourhood descent). Complete when a validity check is a set lookup (enumerated
    spaces); otherwise ``limit`` random draws, since every check there runs the legality checker."""
    active = [k for k, p in enumerate(space.parameters) if len(p.values) > 1]
    pairs = [(a, b) for i, a in enumerate(active) for b in active[i + 1 :]]
    out: dict[Index, None] = {}
    if space.enumerable:
        for a, b in pairs:
            for va in range(len(space.parameters[a].values)):
                for vb in range(len(space.parameters[b].values)):
                    if va != idx[a] and vb != idx[b]:
                        nb = list(idx)
                        nb[a], nb[b] = va, vb
                        if space.valid(tuple(nb)):
                            out[tuple(nb)] = None
        return list(out)
    for _ in range(limit if pairs else 0):
        a, b = pairs[int(rng.integers(len(pairs)))]
        va = int(rng.integers(len(space.parameters[a].values) - 1))
        vb = int(rng.integers(len(space.parameters[b].values) - 1))
        nb = list(idx)
        nb[a], nb[b] = va + (va >= idx[a]), vb + (vb >= idx[b])  # any value but the current one
        if space.valid(tuple(nb)):
            out[tuple(nb)] = None
    return list(out)


def fill_random(pick: Picker, rng: np.random.Generator, rationale: str) -> None:
    """Top up with random valid configurations (random walks from seeds when not enumerable)."""
    space, hist = pick.hist.space, pick.hist
    anchors = hist.ranked()[:4] or hist.seeds
    for _ in range(50 * pick.n):
        if pick.full:
            return
        if space.enumerable or not anchors:
            idx = space.random(rng, attempts=200)
        else:  # legal configs are rare in Tensile's product space: wander from known-legal ones
            idx = space.walk(anchors[int(rng.integers(len(anchors)))], int(rng.integers(2, 7)), rng)
        pick.offer(idx, rationale)
    if not pick.full and space.enumerable:  # nearly exhausted: sweep the rest in random order
        members = space.all_members()
        for i in rng.permutation(len(members)):
            if pick.full:
                return
            pick.offer(members[int(i)], rationale)
