"""Search strategies, registered by name."""

from __future__ import annotations

from collections.abc import Callable

from oto.strategies.base import Evidence, Observation, Proposal, Strategy
from oto.strategies.random_search import RandomStrategy
from oto.strategies.surrogate import SurrogateStrategy
from oto.strategies.symbolic import SymbolicStrategy

STRATEGIES: dict[str, Callable[[int], Strategy]] = {
    "symbolic": SymbolicStrategy,
    "random": RandomStrategy,
    "surrogate": SurrogateStrategy,
}
DEFAULT_STRATEGY = "surrogate"


def make_strategy(name: str, seed: int) -> Strategy:
    try:
        return STRATEGIES[name](seed)
    except KeyError:
        raise ValueError(
            f"config field 'search.strategy': unknown strategy {name!r} (known: {', '.join(STRATEGIES)})"
        ) from None


__all__ = [
    "DEFAULT_STRATEGY",
    "Evidence",
    "Observation",
    "Proposal",
    "Strategy",
    "STRATEGIES",
    "make_strategy",
]
