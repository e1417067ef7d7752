"""The Tensile kernel parameters oto tunes, their legal values, and the canonical form of a candidate.

A *candidate* is a dict of Tensile's independent solution parameters (ROCm/Tensile:Tensile/Common.py
``validParameters``): the knobs below (:data:`PARAMS`, the search space) plus, for kernels that come from a
logic file (the shipped spoof-floor references), the few further parameters of :data:`EXTRA_PARAMS` their
file sets (FractionalLoad, GlobalSplitUAlgorithm, ...): without them such a kernel is not the one that
shipped and may not even be legal. Every other parameter takes Tensile's default. Its identity is a hash of
the canonical form; :func:`oto.tensile.legality.resolve` first puts the knobs Tensile resolves itself into
their resolved form, so two proposals Tensile would build as one kernel get one id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oto.tensile.defaults import subset


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple  # legal values, in a meaningful order (neighbours are adjacent)
    default: Any
    doc: str


def _wg(x: int, y: int, lsu: int = 1) -> tuple[int, int, int]:
    return (x, y, lsu)


# Values chosen from Tensile's validParameters, narrowed to what is meaningful on a non-MFMA gfx9 part, and
# widened so that every solution rocBLAS ships for vega10 is legal (TT 3, WG 12/6, LSU 8, GSU 7, LdsPad 8).
PARAMS: dict[str, Param] = {
    p.name: p
    for p in [
        Param(
            "KernelLanguage", ("Assembly", "Source"), "Assembly", "hand-scheduled GCN assembly or HIP source"
        ),
        Param(
            "ThreadTile",
            tuple((a, b) for a in (1, 2, 3, 4, 6, 8, 16) for b in (1, 2, 3, 4, 6, 8, 16)),
            (4, 4),
            "elements of C each thread computes (TT0 x TT1)",
        ),
        Param(
            "WorkGroup",
            tuple(
                _wg(x, y, lsu)
                for x in (4, 8, 12, 16, 32, 64)
                for y in (2, 4, 6, 8, 12, 16, 32, 64)
                for lsu in (1, 2, 4, 8)
                if 64 <= x * y * lsu <= 1024
            ),
            (16, 16, 1),
            "threads per workgroup (WG0 x WG1) and LocalSplitU",
        ),
        Param("DepthU", (2, 4, 8, 16, 24, 32, 64), 16, "summation-loop unroll depth"),
        Param("VectorWidth", (1, 2, 4, 8), 4, "elements per thread read/written as one vector"),
        Param("GlobalReadVectorWidth", (-1, 1, 2, 4, 8), -1, "global load vector width (-1: = VectorWidth)"),
        Param("GlobalSplitU", (1, 2, 3, 4, 5, 7, 8, 16, 32), 1, "split the summation over workgroups"),
        Param("PrefetchGlobalRead", (0, 1, 2), 1, "prefetch the next tile from global memory"),
        Param("PrefetchLocalRead", (0, 1, 2, 3), 1, "prefetch local (LDS) reads"),
        Param("LdsPadA", (-1, 0, 1, 2, 4, 8), 0, "LDS padding of A to avoid bank conflicts"),
        Param("LdsPadB", (-1, 0, 1, 2, 4, 8), 0, "LDS padding of B to avoid bank conflicts"),
        Param("WorkGroupMapping", (1, 2, 4, 8, 16, 32, 64), 8, "workgroup rasterisation width"),
        Param("StaggerU", (0, 2, 4, 8, 16, 32), 32, "stagger the start of the summation loop"),
        Param("1LDSBuffer", (-1, 0, 1), 0, "single LDS buffer for prefetch"),
        Param("InnerUnroll", (1, 2, 4), 1, "inner-loop unroll (assembly only)"),
    ]
}

_LIST_PARAMS = {"ThreadTile", "WorkGroup"}

# Tensile parameters beyond PARAMS that a kernel may carry (with their Tensile defaults): the ones shipped
# vega10 logic files set that oto.tensile.legality models. Never searched; a kernel keeps them from its file.
EXTRA_PARAMS: dict[str, Any] = subset(
    (
        "GlobalSplitUAlgorithm",
        "FractionalLoad",
        "BufferLoad",
        "VectorStore",
        "StoreVectorWidth",
        "LocalReadVectorWidth",
        "VectorAtomicWidth",
        "GlobalLoadVectorWidthA",
        "GlobalLoadVectorWidthB",
        "NumLoadsCoalescedA",
        "NumLoadsCoalescedB",
        "LdsBlockSizePerPadA",
        "LdsBlockSizePerPadB",
        "AssertFree0ElementMultiple",
        "AssertFree1ElementMultiple",
        "AssertSummationElementMultiple",
        "AssertStrideAEqual",
        "AssertStrideBEqual",
        "AssertStrideCEqual",
        "AssertStrideDEqual",
        "UseSgprForGRO",
        "StaggerUMapping",
    )
)


class CandidateError(ValueError):
    pass


def canonical(params: Mapping[str, Any]) -> dict[str, Any]:
    """Fill defaults, normalise list/bool forms and reject unknown names or illegal values. Extra parameters
    (:data:`EXTRA_PARAMS`) are kept, normalised, after the knobs when they differ from Tensile's default."""
    unknown = sorted(set(params) - set(PARAMS) - set(EXTRA_PARAMS))
    if unknown:
        raise CandidateError(f"unknown Tensile parameter(s): {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for name, p in PARAMS.items():
        value = params.get(name, p.default)
        if name in _LIST_PARAMS:
            if not isinstance(value, list | tuple):
                raise CandidateError(f"{name} must be a list, got {value!r}")
            value = tuple(int(v) for v in value)
            if name == "WorkGroup" and len(value) == 2:
                value = (*value, 1)
        elif isinstance(value, bool):  # old logic files store PrefetchGlobalRead: true
            value = int(value)
        if value not in p.values:
            raise CandidateError(f"{name}={value!r} is not a legal value (legal: {list(p.values)})")
        out[name] = list(value) if name in _LIST_PARAMS else value
    for name in sorted(set(params) & set(EXTRA_PARAMS)):
        value = _extra_value(name, params[name])
        if value != EXTRA_PARAMS[name]:
            out[name] = value
    return out


def extras(params: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`EXTRA_PARAMS` a (canonical) kernel carries."""
    return {k: v for k, v in params.items() if k in EXTRA_PARAMS}


def _extra_value(name: str, value: Any) -> Any:
    """An extra parameter in Tensile's own type (old logic files store booleans for 0/1 knobs)."""
    default = EXTRA_PARAMS[name]
    if isinstance(default, dict):
        if not isinstance(value, Mapping):
            raise CandidateError(f"{name} must be a mapping of index: value, got {value!r}")
        return {int(k): int(v) for k, v in sorted(value.items(), key=lambda kv: int(kv[0]))}
    if isinstance(default, bool):
        if value not in (0, 1):  # also True/False
            raise CandidateError(f"{name}={value!r} is not a boolean")
        return bool(value)
    if isinstance(default, int):
        if isinstance(value, bool) or (isinstance(value, int | float) and int(value) == value):
            return int(value)
        raise CandidateError(f"{name}={value!r} is not an integer")
    if not isinstance(value, str):
        raise CandidateError(f"{name}={value!r} is not a string")
    return value


def candidate_id(params: Mapping[str, Any]) -> str:
    """Stable short id of a candidate: hash of its canonical JSON (pass the form
    :func:`oto.tensile.legality.resolve` gives, so that Tensile's duplicates share an id)."""
    text = json.dumps(canonical(params), sort_keys=True, separators=(",", ":"))
    return "k" + hashlib.sha256(text.encode()).hexdigest()[:12]


def macro_tile(params: Mapping[str, Any]) -> tuple[int, int]:
    tt, wg = params["ThreadTile"], params["WorkGroup"]
    return tt[0] * wg[0], tt[1] * wg[1]


def num_threads(params: Mapping[str, Any]) -> int:
    wg = params["WorkGroup"]
    return wg[0] * wg[1] * wg[2]


def short_name(params: Mapping[str, Any]) -> str:
    """Readable summary like ``MT128x64x16_TT8x4_WG16x16x1_VW4_GSU1_PGR1_PLR1_asm``."""
    mt0, mt1 = macro_tile(params)
    tt, wg = params["ThreadTile"], params["WorkGroup"]
    lang = "asm" if params["KernelLanguage"] == "Assembly" else "src"
    return (
        f"MT{mt0}x{mt1}x{params['DepthU']}_TT{tt[0]}x{tt[1]}_WG{wg[0]}x{wg[1]}x{wg[2]}"
        f"_VW{params['VectorWidth']}_GSU{params['GlobalSplitU']}"
        f"_PGR{params['PrefetchGlobalRead']}_PLR{params['PrefetchLocalRead']}_{lang}"
    )
