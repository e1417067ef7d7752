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


def heaviest(weights: Sequence[float], count: int) -> list[int]:
    """Up to ``count`` indices of sizes weighing more than the mean, heaviest first (ties: lower index)."""
    mean = sum(weights) / len(weights)
    above = [i for i, w in enumerate(weights) if w > mean * (1 + 1e-9)]
    return sorted(above, key=lambda i: (-weights[i], i))[:count]


def tuning_indices(
    sizes: Sequence[Sequence[int]], count: int, weights: Sequence[float] | None = None
) -> list[int]:
    """Deterministic sample of ``count`` size indices (all of them when fewer).

    Uniform weights: a farthest-point sample, from the largest problem. Weights that differ (a workload:
    oto.deck.sources.weights_from_calls): up to half the tuning sizes are the heaviest (those weighing more
    than the mean, heaviest first), where the workload spends its time; the rest are still spread by
    farthest-point sampling from them, so the footprint keeps being measured."""
    n = len(sizes)
    if n <= count:
        return list(range(n))
    pts = np.log2(np.maximum(np.asarray([s[:4] for s in sizes], dtype=float), 1.0))
    chosen = heaviest(weights, (count + 1) // 2) if weights is not None and len(set(weights)) > 1 else []
    if not chosen:
        chosen = [int(np.argmax(pts.sum(axis=1)))]  # the largest problem: where ceilings and tuning matter
    dist = np.min([np.linalg.norm(pts - pts[c], axis=1) for c in chosen], axis=0)
    while len(chosen) < count:
        nxt = int(np.argmax(dist))  # ties resolve to the lowest index: deterministic
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(pts - pts[nxt], axis=1))
    return sorted(chosen)


def deck_tuning_indices(deck: LibraryDeck, count: int) -> list[int]:
    """The tuning sizes of a library's deck, by its weights (:func:`tuning_indices`)."""
    return tuning_indices(deck.sizes, count, deck.weights)


def shipped_seeds(deck: LibraryDeck, count: int) -> list[dict[str, Any]]:
    """Shipped solutions used at the tuning sizes, most used first (ties: lower solution index); a size with
    nothing shipped (a workload's) seeds nothing."""
    idx = deck_tuning_indices(deck, count)
    use = Counter(int(deck.shipped[i][0]) for i in idx if deck.shipped[i] is not None)
    order = sorted(use, key=lambda pos: (-use[pos], pos))
    return [canonical(deck.solutions[pos]["params"]) for pos in order]
