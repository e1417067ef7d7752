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
