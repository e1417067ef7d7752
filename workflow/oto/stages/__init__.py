"""One module per workflow stage (one Snakemake rule each), orchestration only: read the stage's input files,
call the domain, write its outputs. Each exposes ``run(...)`` with explicit paths so tests can call it
without Snakemake; ``scripts/<stage>.py`` only unpacks the ``snakemake`` object. A stage imports this package
(its :class:`Stage` type), never another stage.

Each stage module declares its stage once, beside its code: ``STAGE = Stage(...)``. The Snakemake glue
(:mod:`oto.run`) reads the declarations (:func:`stages`): the profile fields each rule's view holds, the jobs
per rule of a run's estimate, the GPU rules of the progress line; ``tests/test_stages.py`` compares them with
the rules Snakemake lists and with the cluster profile."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Literal

# In a stage's ``profile``: the configured backend's profile fields (oto.backends.profile_fields), which
# depend on the run's config.
BACKEND_FIELDS = "{backend}"
# ... and the fields the configured backend's provenance reads (oto.backends.provenance_fields: the simulated
# chip's identity), for a stage that resolves the backend only for its provenance (registry knowledge).
PROVENANCE_FIELDS = "{provenance}"
SCOPES = ("run", "library", "generation", "round", "family")


@dataclass(frozen=True)
class Stage:
    """One workflow stage, as its rule runs it."""

    name: str  # the rule's name
    # One job per run, per library, per (library, generation), per generation after gen0 (round), or per
    # family (on request: no default target)
    scope: Literal["run", "library", "generation", "round", "family"]
    home: str  # its outputs' folder under results/<arch>/ ('' for results/<arch>/ itself), with wildcards
    reads: tuple[str, ...] = ()  # the stages whose outputs it reads (a generation's: also the previous one's)
    gpu: bool = False  # holds the GPU (resources gpu=1; the cluster profile's GPU partition)
    # The arch-profile fields its view holds (oto.run.profile_views), BACKEND_FIELDS for the configured
    # backend's, PROVENANCE_FIELDS for its provenance's; None: the rule takes no profile
    profile: tuple[str, ...] | None = None
    # A config key: the stage has jobs only where the run's config sets it (None: in every run)
    when: str | None = None

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"stage {self.name}: scope {self.scope!r} is not one of {', '.join(SCOPES)}")


@functools.cache
def stages() -> tuple[Stage, ...]:
    """Every stage module's declaration, in workflow order: a stage after every stage it reads, ties by
    name."""
    declared: dict[str, Stage] = {}
    for module in pkgutil.iter_modules(__path__):
        stage = importlib.import_module(f"{__name__}.{module.name}").STAGE
        if stage.name in declared:
            raise ValueError(f"stage {stage.name} is declared twice (oto.stages.{module.name})")
        declared[stage.name] = stage
    unknown = {(s.name, r) for s in declared.values() for r in s.reads if r not in declared}
    if unknown:
        raise ValueError(f"stages read undeclared stages: {sorted(unknown)}")
    order: list[Stage] = []
    while len(order) < len(declared):
        placed = {s.name for s in order}
        ready = [s for s in declared.values() if s.name not in placed and placed.issuperset(s.reads)]
        if not ready:
            raise ValueError(f"stages read each other in a cycle: {sorted(set(declared) - placed)}")
        order.append(min(ready, key=lambda s: s.name))
    return tuple(order)


def declaration(name: str) -> Stage:
    """The declaration of one stage (rule)."""
    for s in stages():
        if s.name == name:
            return s
    raise KeyError(f"no stage {name!r}: every rule declares its stage in workflow/oto/stages/<rule>.py")


def gpu_stages() -> tuple[str, ...]:
    """The stages that hold the GPU, in workflow order."""
    return tuple(s.name for s in stages() if s.gpu)
