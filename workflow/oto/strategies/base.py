"""The search-strategy interface: one small protocol, every strategy a plug-in (cf. Optuna's samplers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from oto.datatypes import Library
from oto.space import Space


@dataclass(frozen=True)
class Proposal:
    params: Mapping[str, Any]
    proposer: str
    rationale: str = ""


@dataclass(frozen=True)
class Observation:
    """What was learned about one kernel: its parameters and how it scored (None: failed or unmeasured)."""

    kernel_id: str
    params: Mapping[str, Any]
    score: float | None  # geometric-mean score over the sizes it ran on (reference = 1)
    sizes_won: int = 0
    failure: str = ""  # failure class when it did not run or failed a launch
    failure_reason: str = ""  # what the compiler, Tensile or the validation said


@dataclass(frozen=True)
class Evidence:
    library: Library | None  # None outside Tensile (e.g. replaying a Kernel Tuner cache)
    generation: int
    observations: Sequence[Observation]  # everything measured so far, best first
    seeds: Sequence[Mapping[str, Any]]  # shipped solutions relevant to the tuning sizes, most used first
    seen: frozenset[str]  # kernel ids already measured or rejected: never propose them again
    is_legal: Callable[[Mapping[str, Any]], bool] = field(repr=False, default=lambda p: True)
    # The space searched; None means Tensile's parameters under ``is_legal`` (see oto.space).
    space: Space | None = field(repr=False, default=None)
    # Transferable knowledge from related problems (the other patterns of the family, earlier runs),
    # scored on the same reference-ratio scale; weaker evidence than ``observations``.
    prior: Sequence[Observation] = ()


class Strategy(Protocol):
    name: str

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        """Propose up to ``n`` new, legal, unseen candidates."""
        ...

    def tell(self, observations: Sequence[Observation]) -> None:
        """Learn from results (stateless strategies may ignore this: evidence is passed to ask)."""
        ...
