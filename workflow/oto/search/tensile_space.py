"""Tensile's kernel parameters as a search space: one per library and ISA, valid where Tensile's legality
rules say so (with their reasons), ids = oto's kernel ids. Strategies and the agent both propose in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oto.gemm import Library
from oto.search.space import Parameter, Space
from oto.tensile import legality
from oto.tensile.params import CandidateError, candidate_id, canonical, complete_wmma, space_params

# Geometry knobs travel together in recombination: a tile shape only makes sense with its workgroup (and,
# where the ISA has them, with its matrix instruction and wave size: they change what ThreadTile and WorkGroup
# mean).
GEOMETRY = ("ThreadTile", "WorkGroup", "VectorWidth", "GlobalReadVectorWidth")
ISA_GEOMETRY = ("MatrixInstruction", "WavefrontSize")


def tensile_space(library: Library, limits: legality.Limits) -> Space:
    """oto's Tensile knobs for one library on the ISA of ``limits`` (``oto.tensile.params.space_params``:
    wave32, dot-product and WMMA knobs where the ISA and the library's data have them), legal per
    :mod:`oto.tensile.legality`."""
    params = space_params(limits.caps, library.family)

    def explain(config: Mapping[str, Any]) -> tuple[str, ...]:
        try:
            cand = canonical(config)
        except CandidateError as exc:
            return (str(exc),)
        verdict = legality.check_raw(library, cand, limits)  # check() would canonicalise again
        return () if verdict.valid else tuple(verdict.reasons)

    def identify(config: Mapping[str, Any]) -> str:
        # ids as Tensile resolves the kernel, the ids candidates.yaml records (oto.search.candidates)
        return candidate_id(legality.resolve(library, config, limits))

    return Space(
        name=f"tensile:{library.name}",
        parameters=tuple(Parameter(p.name, tuple(p.values), p.default, p.doc) for p in params.values()),
        identify=identify,
        explain=explain,
        # One kind for every library: the agent's cached system prompt is shared by all libraries of an arch.
        kind="tensile-gemm",
        linked=((*GEOMETRY, *(name for name in ISA_GEOMETRY if name in params)),),
        complete=complete_wmma if "MatrixInstruction" in params else None,
    )
