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
