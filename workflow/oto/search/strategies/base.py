"""The search-strategy contract: one small protocol, every strategy a plug-in (cf. Optuna's samplers and
Kernel Tuner's strategies).

A strategy is constructed with a seed and its options, and answers one question: given the evidence so far
in a space, which ``n`` new, valid, unseen configurations to measure next (:meth:`Strategy.ask`). It keeps no
state that changes its answers: everything it learns arrives as evidence in every ask, so a resumed or
re-run job proposes exactly the same (a strategy may memoise what it can recompute, for speed).

Options are declared by each strategy (:class:`Option`: a name, a default and a doc), set from the config's
``search.options`` block and validated there, naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from oto.search.space import Space


class StrategyError(ValueError):
    """An unknown strategy, or an option it does not declare or of the wrong type or range; names the config
    field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"field '{field}': {problem}")
        self.field, self.problem = field, problem


@dataclass(frozen=True)
class Option:
    """One declared option of a strategy; its type is the default's."""

    name: str
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None

    def check(self, value: Any, where: str) -> Any:
        kind = type(self.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            raise StrategyError(where, f"must be {kind.__name__}, got {type(value).__name__} {value!r:.60}")
        if kind is float and not math.isfinite(value):
            raise StrategyError(where, f"must be a finite number, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise StrategyError(where, f"{value!r} is below the minimum {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise StrategyError(where, f"{value!r} is above the maximum {self.maximum}")
        if self.choices is not None and value not in self.choices:
            raise StrategyError(where, f"{value!r} is not one of {', '.join(map(str, self.choices))}")
        return value


def resolve_options(
    strategy: str, declared: Sequence[Option], given: Mapping[str, Any] | None, where: str = "search.options"
) -> dict[str, Any]:
    """Declared defaults overridden by ``given``, each checked; an undeclared option is an error."""
    given = dict(given or {})
    known = {o.name: o for o in declared}
    unknown = sorted(set(given) - set(known))
    if unknown:
        names = ", ".join(known) or "none"
        raise StrategyError(
            f"{where}.{unknown[0]}", f"strategy {strategy!r} has no such option (its options: {names})"
        )
    return {
        o.name: o.check(given[o.name], f"{where}.{o.name}") if o.name in given else o.default
        for o in declared
    }


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
    score: float | None  # geometric-mean score over the sizes it ran on (reference = 1; 1/time in replay)
    sizes_won: int = 0
    failure: str = ""  # failure class when it did not run or failed a launch
    failure_reason: str = ""  # what the compiler, Tensile or the validation said
    source: str = ""  # "" for this run's and same-kind evidence; else what it is (e.g. "simulated prior ...")
    # a prior from another GPU moved to its nearest legal point of this space (oto.search.prior_map): how far
    # it moved; 0 for everything else (measured here, or legal here as it is)
    distance: float = 0.0


@dataclass(frozen=True)
class Evidence:
    """Everything a strategy is asked with. The space decides what is valid and how ids are formed."""

    space: Space
    generation: int
    observations: Sequence[Observation] = ()  # everything measured so far, best first
    seeds: Sequence[Mapping[str, Any]] = ()  # shipped solutions relevant to the tuning sizes, most used first
    seen: frozenset[str] = frozenset()  # ids already measured or rejected: never propose them again
    # Transferable knowledge from related problems (the other patterns of the family, earlier runs),
    # scored on the same reference-ratio scale; weaker evidence than ``observations``.
    prior: Sequence[Observation] = ()


class Strategy(Protocol):
    name: ClassVar[str]
    options: ClassVar[tuple[Option, ...]]
    seed: int
    settings: dict[str, Any]  # the resolved options

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        """Propose up to ``n`` new, valid, unseen configurations of ``evidence.space``."""
        ...


class BaseStrategy:
    """Seed and options handling shared by the built-in strategies."""

    name: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, seed: int = 0, **options: Any):
        self.seed = int(seed)
        self.settings = resolve_options(self.name, self.options, options)
