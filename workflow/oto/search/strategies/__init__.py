"""Search strategies, registered by name; every one follows :class:`oto.search.strategies.base.Strategy`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oto.config import config_defaults
from oto.search.strategies.base import (
    Evidence,
    Observation,
    Option,
    Proposal,
    Strategy,
    StrategyError,
    resolve_options,
)
from oto.search.strategies.random_search import RandomStrategy
from oto.search.strategies.surrogate import SurrogateStrategy
from oto.search.strategies.symbolic import SymbolicStrategy

STRATEGIES: dict[str, type] = {s.name: s for s in (SurrogateStrategy, SymbolicStrategy, RandomStrategy)}
# The default follows bench/strategy_bench.py on oto's own space and bench/search_bench.py on recorded
# Kernel Tuner spaces (bench/RESULTS.md); it is the config schema's default for search.strategy.
DEFAULT_STRATEGY: str = config_defaults("search")["strategy"]


def make_strategy(name: str, seed: int, options: Mapping[str, Any] | None = None) -> Strategy:
    """The strategy registered as ``name`` with its options (``search.options``) checked."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise StrategyError(
            "search.strategy", f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})"
        ) from None
    return cls(seed, **dict(options or {}))


def describe() -> str:
    """Every strategy and its options with defaults and docs (``oto strategies``)."""
    lines = []
    for name, cls in STRATEGIES.items():
        doc = (
            (cls.__module__ and __import__(cls.__module__, fromlist=["_"]).__doc__ or "").strip().splitlines()
        )
        lines.append(f"{name}{' (default)' if name == DEFAULT_STRATEGY else ''}: {doc[0] if doc else ''}")
        for o in cls.options:
            lines.append(f"    {o.name} = {o.default!r}: {o.doc}")
        if not cls.options:
            lines.append("    (no options)")
    return "\n".join(lines)


__all__ = [
    "DEFAULT_STRATEGY",
    "Evidence",
    "Observation",
    "Option",
    "Proposal",
    "STRATEGIES",
    "Strategy",
    "StrategyError",
    "describe",
    "make_strategy",
    "resolve_options",
]
