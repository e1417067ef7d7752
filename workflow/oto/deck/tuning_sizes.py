"""Choosing the tuning sizes: a small, spread-out subset of a library's deck sizes.

Benchmarking every candidate on all 1,908 sizes of SGEMM NN would spend a night on one generation. Sizes
that are close in log space behave alike (the runtime itself picks solutions by Euclidean nearest size),
so each generation measures a farthest-point sample in log2(M, N, batch, K); the finalize stage then
measures the winners on every deck size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from oto.deck.model import LibraryDeck
from oto.tensile.params import canonical


def tuning_indices(sizes: Sequence[Sequence[int]], count: int) -> list[int]:
    """Deterministic farthest-point sample of ``count`` size indices (all of them when fewer)."""
    n = len(sizes)
    if n <= count:
        return list(range(n))
    pts = np.log2(np.maximum(np.asarray([s[:4] for s in sizes], dtype=float), 1.0))
    volume = pts.sum(axis=1)
    chosen = [int(np.argmax(volume))]  # the largest problem: where ceilings and tuning matter most
    dist = np.linalg.norm(pts - pts[chosen[0]], axis=1)
    while len(chosen) < count:
        nxt = int(np.argmax(dist))  # ties resolve to the lowest index: deterministic
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(pts - pts[nxt], axis=1))
    return sorted(chosen)


def shipped_seeds(deck: LibraryDeck, count: int) -> list[dict[str, Any]]:
    """Shipped solutions used at the tuning sizes, most used first (ties: lower solution index)."""
    use = Counter(int(deck.shipped[i][0]) for i in tuning_indices(deck.sizes, count))
    order = sorted(use, key=lambda pos: (-use[pos], pos))
    return [canonical(deck.solutions[pos]["params"]) for pos in order]
