"""Tensile's kernel parameters as a search space: one per library, valid where Tensile's legality rules say
so (with their reasons), ids = oto's kernel ids. Strategies and the agent both propose in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oto.gemm import Library
from oto.search.space import Parameter, Space
from oto.tensile import legality
from oto.tensile.params import PARAMS, candidate_id, canonical

# Geometry knobs travel together in recombination: a tile shape only makes sense with its workgroup.
GEOMETRY = ("ThreadTile", "WorkGroup", "VectorWidth", "GlobalReadVectorWidth")


def tensile_space(library: Library, limits: legality.Limits) -> Space:
    """oto's Tensile knobs for one library, legal per :mod:`oto.tensile.legality`."""

    def explain(config: Mapping[str, Any]) -> tuple[str, ...]:
        verdict = legality.check(library, canonical(config), limits)
        return () if verdict.valid else tuple(verdict.reasons)

    def identify(config: Mapping[str, Any]) -> str:
        # ids as Tensile resolves the kernel, the ids candidates.yaml records (oto.search.candidates)
        return candidate_id(legality.resolve(library, config, limits))

    return Space(
        name=f"tensile:{library.name}",
        parameters=tuple(Parameter(p.name, tuple(p.values), p.default, p.doc) for p in PARAMS.values()),
        identify=identify,
        explain=explain,
        # One kind for every library: the agent's cached system prompt is shared by all libraries of an arch.
        kind="tensile-gemm",
        linked=(GEOMETRY,),
    )
