"""Plain-number helpers shared by measurement, registry and reporting, free of numpy and pandas so that the
stages that only read YAML (emit, mutate) start fast."""

from __future__ import annotations

import math


def finite(x) -> float | None:
    """A finite float, or None for missing, malformed or non-finite values."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def is_weighted(weights) -> bool:
    """Whether sizes weigh differently (a workload's weights); uniform weights aggregate as before."""
    return weights is not None and len(set(weights)) > 1


def weighted_geomean(values, weights) -> float | None:
    """exp(Σ w·log v / Σ w) over the values that are finite and positive (None when there are none): the
    speed-up a workload sees when its sizes run in proportion to ``weights``."""
    num = den = 0.0
    for v, w in zip(values, weights, strict=True):
        v = finite(v)
        if v is not None and v > 0 and w > 0:
            num += w * math.log(v)
            den += w
    return math.exp(num / den) if den > 0 else None


def mean_ranks(values) -> list[float]:
    """Each value's rank from 0, ties sharing their mean rank; a NaN gets a NaN rank and ranks nothing."""
    vals = [float(v) for v in values]
    order = sorted((i for i, v in enumerate(vals) if not math.isnan(v)), key=vals.__getitem__)
    ranks = [math.nan] * len(vals)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and vals[order[end + 1]] == vals[order[start]]:
            end += 1
        for pos in range(start, end + 1):
            ranks[order[pos]] = (start + end) / 2
        start = end + 1
    return ranks


def spearman(a, b) -> float:
    """Spearman's rank correlation of paired values, as pandas computes it (each side ranked over its own
    values, ties at their mean rank, then the pairs without a NaN correlated); NaN when fewer than two pairs
    remain or either side is constant."""
    ranked = zip(mean_ranks(a), mean_ranks(b), strict=True)
    pairs = [(x, y) for x, y in ranked if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 2:
        return math.nan
    mx, my = (sum(p[k] for p in pairs) / len(pairs) for k in (0, 1))
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx, syy = sum((x - mx) ** 2 for x, _ in pairs), sum((y - my) ** 2 for _, y in pairs)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan
