"""The Tensile kernel parameters oto tunes, their legal values, and the canonical form of a candidate.

A *candidate* is a dict of Tensile's independent solution parameters (ROCm/Tensile:Tensile/Common.py
``validParameters``): the knobs below (:data:`PARAMS`, the search space of every ISA), the knobs only some
ISAs have (:data:`ISA_PARAMS`: wave32, RDNA3's WMMA, dot-product layouts; :func:`space_params` says which an
ISA's space offers) plus, for kernels that come from a logic file (the shipped spoof-floor references), the
few further parameters of :data:`EXTRA_PARAMS` their file sets (FractionalLoad, GlobalSplitUAlgorithm, ...):
without them such a kernel is not the one that shipped and may not even be legal. Every other parameter
takes Tensile's default. Its identity is a hash of the canonical form; :func:`oto.tensile.legality.resolve`
first puts the knobs Tensile resolves itself into their resolved form, so two proposals Tensile would build
as one kernel get one id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oto.gemm import Family
from oto.tensile.defaults import subset
from oto.tensile.isa import IsaCaps


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

# Values of the knobs above that only some ISAs use: 32-thread workgroups (wave32, GFX10+), the thread tiles
# of WMMA kernels (Tensile reads ThreadTile as [MIWaveTile0, MIWaveTile1 * MatrixInstN] when
# MatrixInstruction is set: every navi31 WMMA solution is [1, 16], [2, 32] or [4, 64]) and 16-element global
# reads (int8 WMMA).
# A candidate may carry them anywhere (legality judges them); only the spaces of those ISAs offer them.
_WAVE32_WORKGROUPS = tuple(
    _wg(x, y, lsu)
    for x in (4, 8, 12, 16, 32, 64)
    for y in (2, 4, 6, 8, 12, 16, 32, 64)
    for lsu in (1, 2, 4, 8)
    if x * y * lsu == 32
)
_WMMA_THREAD_TILES = tuple((a, 16 * b) for a in (1, 2, 4, 8) for b in (1, 2, 4, 8))
_WIDER: dict[str, tuple] = {
    "WorkGroup": _WAVE32_WORKGROUPS,
    "ThreadTile": tuple(t for t in _WMMA_THREAD_TILES if t not in PARAMS["ThreadTile"].values),
    "GlobalReadVectorWidth": (16,),
    # some of navi31's int8 and bf16 WMMA kernels pad LDS by 16 elements
    "LdsPadA": (16,),
    "LdsPadB": (16,),
}

# Values Tensile's validParameters takes (LdsPad: -1, 0, 1, 2, 3, 4, 8, 16, 32, 48, 64) that a kernel read
# from a logic file may carry but no space searches: navi33's int8 WMMA kernels pad LDS by 32, and upstream's
# gfx1103 and gfx1150 folders are copies of navi33's, so their native floors would not read without them.
_READ_ONLY: dict[str, tuple] = {"LdsPadA": (3, 32, 48, 64), "LdsPadB": (3, 32, 48, 64)}

# Knobs only some ISAs have (oto.tensile.isa): searched where the ISA runs them (:func:`space_params`), and
# kept in a candidate's canonical form only when they differ from Tensile's default, so that a kernel without
# them (every gfx9 kernel) keeps its form and id. Defaults are Tensile's: a candidate that omits one means it.
ISA_PARAMS: dict[str, Param] = {
    p.name: p
    for p in [
        Param("WavefrontSize", (64, 32), 64, "threads per wave: 32 (wave32, GFX10+) or 64"),
        Param(
            "MatrixInstruction",
            ((), (16, 16, 16, 1)),
            (),
            "matrix instruction M x N x K x blocks: [] for VALU FMAs, [16, 16, 16, 1] for RDNA3's WMMA "
            "(wave32; half, bf16 and int8); ThreadTile is then [MIWaveTile0, MIWaveTile1 * 16]",
        ),
        Param(
            "LocalDotLayout",
            (1, 2, 4),
            1,
            "dot-product layout in LDS: 2 for v_dot2 (half HPA), 4 for v_dot4 (int8)",
        ),
        Param(
            "SourceSwap",
            (0, 1),
            0,
            "swap the matrix instruction's A and B sources (WMMA stores by VectorWidth)",
        ),
        Param(
            "TransposeLDS", (0, 1), 0, "store the unroll dimension contiguously in LDS (matrix instructions)"
        ),
        Param(
            "WaveSeparateGlobalReadA", (0, 1), 0, "each wave loads its own rows of A (matrix instructions)"
        ),
        Param(
            "WaveSeparateGlobalReadB", (0, 1), 0, "each wave loads its own rows of B (matrix instructions)"
        ),
        Param(
            "ScheduleIterAlg",
            (1, 2, 3),
            1,
            "instruction scheduling of the unroll loop (2, 3: matrix instructions)",
        ),
    ]
}


def space_params(caps: IsaCaps, family: Family | None = None) -> dict[str, Param]:
    """The knobs a search space offers on an ISA: :data:`PARAMS` itself where the ISA has nothing more
    (gfx9), else PARAMS with the ISA's wider values and its knobs of :data:`ISA_PARAMS`. Given the library's
    ``family``, only the knobs its data can use: the WMMA knobs for half, bf16 and int8 (Tensile's WMMA
    types), a dot-product layout for HPA half (2) and int8 (4); a knob no kernel of the family may set would
    only make most random points of the space illegal. A library's space leaves SourceSwap out: its WMMA
    kernels imply it (:func:`complete_wmma`)."""
    a_char = family.a.char if family else None
    wmma = caps.has_wmma and (family is None or a_char in ("H", "B", "I8"))
    layouts = (1,)
    if caps.has_wave32 and caps.v_dot2_f32_f16 and (family is None or (a_char == "H" and family.hpa)):
        layouts += (2,)
    if caps.has_wave32 and caps.v_dot4_i32_i8 and (family is None or (a_char == "I8" and family.hpa)):
        layouts += (4,)
    wider: dict[str, tuple] = {}
    knobs: list[Param] = []
    if caps.has_wave32:
        wider["WorkGroup"] = _WIDER["WorkGroup"]
        knobs.append(ISA_PARAMS["WavefrontSize"])
    if len(layouts) > 1:
        knobs.append(Param("LocalDotLayout", layouts, 1, ISA_PARAMS["LocalDotLayout"].doc))
    if wmma:
        wider["ThreadTile"] = _WIDER["ThreadTile"]
        wider["GlobalReadVectorWidth"] = _WIDER["GlobalReadVectorWidth"]
        # navi31's shipped WMMA kernels pad LDS by 16: without it they would be no point of the space
        wider["LdsPadA"], wider["LdsPadB"] = _WIDER["LdsPadA"], _WIDER["LdsPadB"]
        names = ("MatrixInstruction", "SourceSwap", "TransposeLDS", "WaveSeparateGlobalReadA")
        names += ("WaveSeparateGlobalReadB", "ScheduleIterAlg")
        knobs += [ISA_PARAMS[name] for name in names if family is None or name != "SourceSwap"]
    if not wider and not knobs:
        return PARAMS
    out = {
        name: Param(name, p.values + wider[name], p.default, p.doc) if name in wider else p
        for name, p in PARAMS.items()
    }
    out.update((p.name, p) for p in knobs)
    return out


def offers_matrix_instruction(caps: IsaCaps, family: Family) -> bool:
    """Whether an ISA's space for a library of ``family`` holds matrix-instruction kernels (RDNA3's WMMA for
    half, bf16 and int8): a kernel from an ISA without them adopts the target's when it is warm-started
    there (:mod:`oto.search.prior_map`)."""
    return "MatrixInstruction" in space_params(caps, family)


# Tensile parameters beyond PARAMS that a kernel may carry (with their Tensile defaults): the ones shipped
# vega10 and navi21/navi31 logic files set that oto.tensile.legality models. Never searched; a kernel keeps
# them from its file.
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
        "StaggerUStride",
        # the matrix-instruction kernels of RDNA3 (navi31's WMMA solutions set these)
        "UnrollMajorLDSA",
        "UnrollMajorLDSB",
        "MIArchVgpr",
    )
)


class CandidateError(ValueError):
    pass


# The knobs a VALU kernel of oto's space leaves at Tensile's default: TransposeLDS and ScheduleIterAlg 2/3
# only work with matrix instructions, and Tensile's RDNA logic separates global reads by wave only there.
_MI_ONLY = {
    "TransposeLDS": 0,
    "ScheduleIterAlg": 1,
    "WaveSeparateGlobalReadA": 0,
    "WaveSeparateGlobalReadB": 0,
}


def complete_wmma(config: dict[str, Any]) -> dict[str, Any]:
    """A point of a WMMA-capable space as the kernel it stands for: a WMMA kernel is wave32 and stores by
    VectorWidth (SourceSwap 1, as every navi31 WMMA solution does: without it Tensile demands StoreVectorWidth
    1); a VALU kernel takes the defaults of the knobs only matrix instructions use. So neither half of the
    space is mostly illegal."""
    if config.get("MatrixInstruction"):
        config.update(SourceSwap=1, WavefrontSize=32)
    else:
        config.update((k, v) for k, v in _MI_ONLY.items() if k in config)
    return config


# Each knob's legal values as a set: canonical() runs for every kernel a job reads or proposes (a navi31
# manifest holds 6,753), and ThreadTile's and WorkGroup's tuples are long. A set member equals a tuple member
# exactly when ``in`` on the tuple says so (numbers hash by value); an unhashable value is no member.
_SEARCHED: dict[str, frozenset] = {
    n: frozenset(p.values) | frozenset(_WIDER.get(n, ())) for n, p in PARAMS.items()
}
_LEGAL: dict[str, frozenset] = {n: v | frozenset(_READ_ONLY.get(n, ())) for n, v in _SEARCHED.items()}
_ISA_LEGAL: dict[str, frozenset] = {n: frozenset(p.values) for n, p in ISA_PARAMS.items()}
_EXTRA_NAMES = frozenset(EXTRA_PARAMS)
_KNOWN = frozenset(PARAMS) | frozenset(ISA_PARAMS) | _EXTRA_NAMES


def _legal(value: Any, legal: frozenset) -> bool:
    try:
        return value in legal
    except TypeError:  # a list or mapping where a number was expected
        return False


def legal_value(name: str, value: Any) -> bool:
    """Whether ``value`` for the knob ``name`` of :data:`PARAMS` (a bool as its integer) is one some space
    searches, so a candidate with it changed stays canonical and, where its ISA offers the value, a point of
    the space (:func:`canonical` also takes the values only files carry, ``_READ_ONLY``)."""
    if isinstance(value, bool):
        value = int(value)
    return name in _SEARCHED and name not in _LIST_PARAMS and _legal(value, _SEARCHED[name])


def canonical(params: Mapping[str, Any]) -> dict[str, Any]:
    """Fill defaults, normalise list/bool forms and reject unknown names or illegal values. The ISA knobs
    (:data:`ISA_PARAMS`) and the extra parameters (:data:`EXTRA_PARAMS`) are kept, normalised, after the knobs
    when they differ from Tensile's default."""
    if not _KNOWN.issuperset(params):
        unknown = sorted(set(params) - _KNOWN)
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
        if not _legal(value, _LEGAL[name]):
            legal = list(p.values) + list(_WIDER.get(name, ()))
            if name in _READ_ONLY:
                legal = sorted(legal + list(_READ_ONLY[name]))
            raise CandidateError(f"{name}={value!r} is not a legal value (legal: {legal})")
        out[name] = list(value) if name in _LIST_PARAMS else value
    for name, p in ISA_PARAMS.items():
        if name in params:
            value = _isa_value(name, params[name])
            if not _legal(value, _ISA_LEGAL[name]):
                raise CandidateError(
                    f"{name}={_shown(value)} is not a legal value (legal: {_shown(p.values)})"
                )
            if value != p.default:
                out[name] = list(value) if isinstance(value, tuple) else value
    for name in sorted(_EXTRA_NAMES.intersection(params)):
        value = _extra_value(name, params[name])
        if value != EXTRA_PARAMS[name]:
            out[name] = value
    return out


def _isa_value(name: str, value: Any) -> Any:
    """An ISA knob as :data:`ISA_PARAMS` spells it: MatrixInstruction a tuple, the others integers."""
    if name == "MatrixInstruction":
        if not isinstance(value, list | tuple):
            raise CandidateError(f"{name} must be a list, got {value!r}")
        return tuple(int(v) for v in value)
    if isinstance(value, bool) or (isinstance(value, int | float) and int(value) == value):
        return int(value)
    raise CandidateError(f"{name}={value!r} is not an integer")


def _shown(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_shown(v) for v in value]
    return value


def extras(params: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`EXTRA_PARAMS` a (canonical) kernel carries."""
    return {k: v for k, v in params.items() if k in EXTRA_PARAMS}


_PLAIN = (int, bool, str)


def _extra_value(name: str, value: Any) -> Any:
    """An extra parameter in Tensile's own type (old logic files store booleans for 0/1 knobs)."""
    default = EXTRA_PARAMS[name]
    if type(value) is type(default) and type(value) in _PLAIN:  # already in its type: most files' values
        return value
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


def mi_geometry(params: Mapping[str, Any]) -> dict[str, Any]:
    """How Tensile reads the geometry of a matrix-instruction kernel given in the 4-element form
    (``MatrixInstruction: [M, N, K, B]`` with ThreadTile and WorkGroup): Solution.parameterWrapper and
    assignProblemIndependentDerivedParameters (the M != 4 branch, the only one a WMMA kernel takes)."""
    m, n, _, b = (int(v) for v in params["MatrixInstruction"])
    wave = int(params.get("WavefrontSize", ISA_PARAMS["WavefrontSize"].default))
    tt, wg = params["ThreadTile"], params["WorkGroup"]
    miwg0 = m if wg[0] < m else wg[0]
    block_m = min(miwg0 // m, b)
    block_n = b // block_m
    waves = max(wg[0] * wg[1] // wave, 1)
    group0 = min(miwg0 // m // block_m, waves)
    wave_group = (group0, waves // group0)
    wave_tile = (tt[0], tt[1] // n)
    tt0, tt1 = block_m * wave_tile[0] * (m * n // wave), block_n * wave_tile[1]
    sg0, sg1 = wave_group[0] * (wave // n), wave_group[1] * n
    return {
        "MIBlock": (m, n, int(params["MatrixInstruction"][2]), b, block_m, block_n),
        "MIWaveGroup": wave_group,
        "MIWaveTile": wave_tile,
        "ThreadTile0": tt0,
        "ThreadTile1": tt1,
        "SubGroup0": sg0,
        "SubGroup1": sg1,
        "MacroTile0": sg0 * tt0,
        "MacroTile1": sg1 * tt1,
    }


def macro_tile(params: Mapping[str, Any]) -> tuple[int, int]:
    if params.get("MatrixInstruction"):
        geometry = mi_geometry(params)
        return geometry["MacroTile0"], geometry["MacroTile1"]
    tt, wg = params["ThreadTile"], params["WorkGroup"]
    return tt[0] * wg[0], tt[1] * wg[1]


def num_threads(params: Mapping[str, Any]) -> int:
    wg = params["WorkGroup"]
    return wg[0] * wg[1] * wg[2]


def short_name(params: Mapping[str, Any]) -> str:
    """Readable summary like ``MT128x64x16_TT8x4_WG16x16x1_VW4_GSU1_PGR1_PLR1_asm`` (``_MI16x16x16x1`` and
    ``_WS32`` follow for a matrix-instruction or wave32 kernel)."""
    mt0, mt1 = macro_tile(params)
    tt, wg = params["ThreadTile"], params["WorkGroup"]
    lang = "asm" if params["KernelLanguage"] == "Assembly" else "src"
    mi = "x".join(str(v) for v in params.get("MatrixInstruction") or ())
    return (
        f"MT{mt0}x{mt1}x{params['DepthU']}_TT{tt[0]}x{tt[1]}_WG{wg[0]}x{wg[1]}x{wg[2]}"
        f"_VW{params['VectorWidth']}_GSU{params['GlobalSplitU']}"
        f"_PGR{params['PrefetchGlobalRead']}_PLR{params['PrefetchLocalRead']}_{lang}"
        + (f"_MI{mi}" if mi else "")
        + (f"_WS{params['WavefrontSize']}" if params.get("WavefrontSize", 64) != 64 else "")
    )
