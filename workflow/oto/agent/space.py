"""A parameter space the agent proposes in: named parameters with legal values, a legality check and an id.

Tensile's space (oto.tensile_params + oto.legality) is one; a recorded Kernel Tuner space is another (the A/B
harness). Validation here is strict on JSON types: a reply's value is accepted only if it is, exactly, one
of the legal values (no strings for numbers, no floats, no booleans for integers, no extra keys).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oto import legality
from oto.datatypes import Library
from oto.tensile_params import PARAMS, candidate_id, canonical


@dataclass(frozen=True)
class SpaceParam:
    name: str
    values: tuple  # scalars (int | str) or tuples of ints
    default: Any
    doc: str = ""


def _ok(_params: Mapping[str, Any]) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Space:
    name: str
    params: Mapping[str, SpaceParam]
    key: Callable[[Mapping[str, Any]], str]  # stable id of a full, valid configuration
    violations: Callable[[Mapping[str, Any]], tuple[str, ...]] = field(default=_ok)  # () when legal

    def coerce(self, raw: Any) -> tuple[dict[str, Any] | None, str]:
        """A reply's parameter object → (full configuration, "") or (None, why it was rejected)."""
        if not isinstance(raw, dict):
            return None, f"params must be an object, got {type(raw).__name__}"
        unknown = sorted(str(k) for k in raw if k not in self.params)
        if unknown:
            return None, f"unknown parameter(s): {', '.join(unknown)}"
        out: dict[str, Any] = {}
        for name, p in self.params.items():
            if name not in raw:
                out[name] = list(p.default) if isinstance(p.default, tuple) else p.default
                continue
            value, why = _strict(raw[name], p)
            if why:
                return None, f"{name}: {why}"
            out[name] = value
        reasons = self.violations(out)
        if reasons:
            return None, "illegal: " + "; ".join(reasons)
        return out, ""


def _strict(value: Any, p: SpaceParam) -> tuple[Any, str]:
    sample = p.values[0]
    if isinstance(sample, tuple):
        if not isinstance(value, list) or not all(type(v) is int for v in value):
            return None, f"must be a list of integers, got {value!r:.80}"
        if tuple(value) not in p.values:
            return None, f"{value!r:.80} is out of range (legal: {_legal_text(p)})"
        return list(value), ""
    if type(value) is not type(sample):
        return None, f"must be {type(sample).__name__}, got {type(value).__name__} {value!r:.80}"
    if value not in p.values:
        return None, f"{value!r:.80} is out of range (legal: {_legal_text(p)})"
    return value, ""


def _legal_text(p: SpaceParam, limit: int = 12) -> str:
    vals = [list(v) if isinstance(v, tuple) else v for v in p.values]
    return str(vals if len(vals) <= limit else [*vals[:limit], "..."])


def tensile_space(library: Library, limits: legality.Limits) -> Space:
    """oto's Tensile knobs for one library, legal per oto.legality (Tensile's own derivation checks)."""
    params = {n: SpaceParam(n, p.values, p.default, p.doc) for n, p in PARAMS.items()}

    def violations(cfg: Mapping[str, Any]) -> tuple[str, ...]:
        verdict = legality.check(library, canonical(cfg), limits)
        return () if verdict.valid else verdict.reasons

    # One name for every library: the cached system prompt is then shared by all libraries of an arch.
    return Space("tensile-gemm", params, candidate_id, violations)
