"""Is a candidate kernel a valid Tensile solution for a library on a non-MFMA gfx9 arch?

The rules re-implement, for VALU (``MatrixInstruction: []``) GEMM kernels, the checks Tensile 4.44 makes while
deriving a solution (ROCm/Tensile:Tensile/SolutionStructs.py ``Solution.parameterWrapper``,
``assignProblemIndependentDerivedParameters``, ``assignDerivedParameters``, ``setGlobalLoadVectorWidth``,
``setGlobalLoadTileDimClassic``, ``setGlobalLoadTileDimFractional``, ``ldsPaddingAuto``,
``getLdsNumElements[Aligned]``), plus the arch profile's limits and a lower bound of the VGPRs
KernelWriterAssembly allocates. Rejection reasons use Tensile's own messages where it has one, so a verdict
can be matched against a ``PrintSolutionRejectionReason`` log. Parameters the candidate does not set take
the defaults of Tensile's ``defaultBenchmarkCommonParameters``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from oto.gemm import HPA_TYPES, Library
from oto.tensile.defaults import subset
from oto.tensile.params import CandidateError, canonical, extras

# Tensile 4.44 Common.py defaultBenchmarkCommonParameters, restricted to the parameters the rules below read
# (lists as tuples: the table is read-only). A raw parameter dict may override any of these (e.g. a shipped
# logic file's own AssertFree0ElementMultiple).
TENSILE_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    subset(
        (
            "KernelLanguage",
            "ThreadTile",
            "WorkGroup",
            "MatrixInstruction",
            "DepthU",
            "DepthULdsDivisor",
            "VectorWidth",
            "GlobalReadVectorWidth",
            "GlobalLoadVectorWidthA",
            "GlobalLoadVectorWidthB",
            "LocalReadVectorWidth",
            "StoreVectorWidth",
            "VectorStore",
            "VectorAtomicWidth",
            "GlobalSplitU",
            "GlobalSplitUAlgorithm",
            "GlobalSplitUSummationAssignmentRoundRobin",
            "GlobalSplitUAtomicAdd",
            "LoopTail",
            "PrefetchGlobalRead",
            "PrefetchLocalRead",
            "InnerUnroll",
            "LdsPadA",
            "LdsPadB",
            "LdsBlockSizePerPadA",
            "LdsBlockSizePerPadB",
            "UnrollMajorLDSA",
            "UnrollMajorLDSB",
            "TransposeLDS",
            "1LDSBuffer",
            "ScheduleIterAlg",
            "ScheduleLocalWrite",
            "WorkGroupMapping",
            "WorkGroupMappingType",
            "StaggerU",
            "StaggerUStride",
            "BufferLoad",
            "BufferStore",
            "FractionalLoad",
            "NumLoadsCoalescedA",
            "NumLoadsCoalescedB",
            "AssertFree0ElementMultiple",
            "AssertFree1ElementMultiple",
            "AssertSummationElementMultiple",
            "AssertStrideAEqual",
            "AssertStrideBEqual",
            "AssertStrideCEqual",
            "AssertStrideDEqual",
            "MacroTileShapeMin",
            "MacroTileShapeMax",
            "MaxOccupancy",
            "LocalDotLayout",
            "UseSgprForGRO",  # kept as given (the resolved value is _UseSgprForGRO), no rule reads it
            "StaggerUMapping",
        ),
        frozen=True,
    )
)

# Common.py validGEMMTypes: (A/B, C/D, compute) triples Tensile accepts (the 8-bit float ones left out).
_VALID_GEMM_TYPES = {(t, t, t) for t in ("D", "S", "Z", "C", "H")} | HPA_TYPES
_MAX_DEPTHU = 1024  # Common.py globalParameters["MaxDepthU"]
_VGPRS_PER_CU = 65536  # KernelWriterAssembly.functionSuffix: vgprPerCU, occupancy error code 4


@dataclass(frozen=True)
class Limits:
    """The arch profile's limits that decide legality (defaults: gfx9)."""

    lds_bytes: int = 65536
    max_workgroup_size: int = 1024
    wavefront_size: int = 64
    has_mfma: bool = False
    vgprs_max: int = 256

    # The arch-profile fields legality depends on (oto.run.profile_views).
    PROFILE_FIELDS = (
        "max_lds_per_workgroup", "max_workgroup_size", "wavefront_size", "has_mfma", "vgprs_per_lane_max"
    )  # fmt: skip

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any]) -> Limits:
        d = cls()
        return cls(
            lds_bytes=int(profile.get("max_lds_per_workgroup", d.lds_bytes)),
            max_workgroup_size=int(profile.get("max_workgroup_size", d.max_workgroup_size)),
            wavefront_size=int(profile.get("wavefront_size", d.wavefront_size)),
            has_mfma=bool(profile.get("has_mfma", d.has_mfma)),
            vgprs_max=int(profile.get("vgprs_per_lane_max", d.vgprs_max)),
        )


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reasons: tuple[str, ...]
    derived: Mapping[str, int]


class _Stop(Exception):
    """A rejection after which Tensile returns from the derivation (later rules would read unset values)."""


class _Run:
    """Working state of one derivation: Tensile's ``state`` dict plus the reasons collected so far."""

    def __init__(self, library: Library, params: Mapping[str, Any], limits: Limits):
        fam = library.family
        self.limits = limits
        self.bpe = fam.a.bytes  # DataType.numBytes()
        self.dest_bytes = fam.dest.bytes
        self.compute_bytes = fam.compute.bytes
        self.a_char, self.compute_char, self.dest_char = fam.a.char, fam.compute.char, fam.dest.char
        self.hpa = fam.hpa
        # ProblemType.initGEMM / assignDerivedParameters for batched GEMM: the tile index of A (B) is the
        # fastest-moving one ("transposed loads", TLU) unless A is transposed (B is not).
        self.tlu = {"A": not library.transpose_a, "B": library.transpose_b}
        self.initial_strides_ab = fam.initial_strides_ab
        self.initial_strides_cd = fam.initial_strides_cd
        self.s: dict[str, Any] = dict(TENSILE_DEFAULTS)
        self.s.update(params)
        self.reasons: list[str] = []
        self.derived: dict[str, int] = {}

    def reject(self, msg: str) -> None:
        self.reasons.append(msg)

    def stop(self, msg: str) -> None:
        self.reasons.append(msg)
        raise _Stop

    @property
    def asm(self) -> bool:
        return self.s["KernelLanguage"] == "Assembly"


def check(library: Library, params: Mapping[str, Any], limits: Limits | None = None) -> Verdict:
    """Judge a candidate in oto's PARAMS vocabulary (values outside PARAMS are rejected by canonical())."""
    try:
        cand = canonical(params)
    except CandidateError as e:
        return Verdict(False, (str(e),), MappingProxyType({}))
    return check_raw(library, cand, limits)


def check_raw(library: Library, params: Mapping[str, Any], limits: Limits | None = None) -> Verdict:
    """Judge a dict of Tensile solution parameters (any values; names from TENSILE_DEFAULTS)."""
    unknown = sorted(set(params) - set(TENSILE_DEFAULTS))
    if unknown:
        reason = f"parameter(s) not modelled by oto.tensile.legality: {', '.join(unknown)}"
        return Verdict(False, (reason,), MappingProxyType({}))
    run = _Run(library, _with_defaults(params), limits or Limits())
    with contextlib.suppress(_Stop):
        _derive(run)
    return Verdict(not run.reasons, tuple(run.reasons), MappingProxyType(dict(run.derived)))


# Knobs Tensile resolves in the solution state it names the kernel from (Solution.getNameFull): LdsPad -1 is
# 0 for Source kernels and for an asm operand read along the tile (TLU), else VectorWidth (0 again when the
# pad would overflow LDS); 1LDSBuffer -1 becomes 0 or 1 by the LDS size; StaggerU is 0 on asm kernels
# without buffer loads.
RESOLVED_KNOBS = ("LdsPadA", "LdsPadB", "1LDSBuffer", "StaggerU")


def resolve(library: Library, params: Mapping[str, Any], limits: Limits | None = None) -> dict[str, Any]:
    """A candidate as Tensile resolves it: identity and duplicate detection use this form.

    The knobs of :data:`RESOLVED_KNOBS` take the value Tensile derives, and an extra parameter whose
    presence leaves the derived state unchanged (AssertStrideAEqual {0: 1} without initial strides, a
    LocalReadVectorWidth equal to VectorWidth, GlobalSplitUAlgorithm with GlobalSplitU 1...) is dropped.
    Raises CandidateError for names or values outside oto's vocabulary."""
    cand = canonical(params)
    limits = limits or Limits()
    state = _final_state(library, cand, limits)
    out = dict(cand)
    for key in RESOLVED_KNOBS:
        value = state.get(key, out[key])
        out[key] = int(value) if isinstance(value, bool | int) else value
    for key in extras(cand):
        without = {k: v for k, v in out.items() if k != key}
        if _final_state(library, without, limits) == state:
            out = without
    return canonical(out)


def _final_state(library: Library, params: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    run = _Run(library, _with_defaults(params), limits)
    with contextlib.suppress(_Stop):
        _derive(run)
    return run.s


def _with_defaults(params: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(params)
    for key in ("PrefetchGlobalRead", "PrefetchLocalRead", "FractionalLoad", "1LDSBuffer"):
        if isinstance(out.get(key), bool):  # old logic files store booleans
            out[key] = int(out[key])
    for key in ("ThreadTile", "WorkGroup", "MatrixInstruction"):
        if key in out:
            out[key] = tuple(out[key])
    return out


def _derive(run: _Run) -> None:
    _problem_type(run)
    _geometry(run)
    if run.reasons:  # assignDerivedParameters returns when the problem-independent part rejected
        return
    _accumulation(run)
    _vector_widths(run)
    _split_and_atomics(run)
    _depth_u(run)
    _lds(run)
    _loop_iters(run)
    _partial_tile_loads(run)
    _source_kernel(run)
    _store_batches(run)
    _vgpr_bound(run)


def _problem_type(run: _Run) -> None:
    # ProblemType.checkIfSupportedGEMMType; HHH+HPA is turned into HHS by Tensile, so accept it as such.
    triple = (run.a_char, run.dest_char, run.compute_char)
    if run.hpa and triple == ("H", "H", "H"):
        run.compute_char, run.compute_bytes = "S", 4
    elif triple not in _VALID_GEMM_TYPES:
        run.stop("This typed-GEMM (Ti, To, Tc) = ({}, {}, {}) is not supported yet.".format(*triple))
    if run.s["MatrixInstruction"]:
        if not run.limits.has_mfma:
            run.stop("isa doesn't support matrix instruction")
        run.stop("MatrixInstruction kernels are not modelled by oto.tensile.legality")


def _accumulation(run: _Run) -> None:
    # assignDerivedParameters (non-MI branch): a wider accumulator needs HPA.
    if not run.hpa and run.compute_bytes > run.bpe:
        run.reject(
            "For non-MI Kernel, if sizeof(ComputeDataType) > sizeof(DataType), "
            "Please add the following config:\n - HighPrecisionAccumulate: True"
        )
    pgr = run.s["PrefetchGlobalRead"]
    if pgr not in (0, 1, 2):  # Common.py validParameters
        run.reject(f"PrefetchGlobalRead {pgr!r} is not one of validParameters [0, 1, 2]")


def _geometry(run: _Run) -> None:
    s, lim = run.s, run.limits
    # assignProblemIndependentDerivedParameters
    if len(s["WorkGroup"]) != 3 or len(s["ThreadTile"]) != 2:
        run.stop("EnableMatrixInstruction undetermined")
    (tt0, tt1), (wg0, wg1, lsu) = s["ThreadTile"], s["WorkGroup"]
    s.update(ThreadTile0=tt0, ThreadTile1=tt1, LocalSplitU=lsu)
    nt = wg0 * wg1 * lsu
    s.update(NumThreads=nt, MacroTile0=wg0 * tt0, MacroTile1=wg1 * tt1)
    run.derived.update(NumThreads=nt, MacroTile0=wg0 * tt0, MacroTile1=wg1 * tt1, LocalSplitU=lsu)
    if nt % lim.wavefront_size != 0:
        run.reject(f"size of WorkGroup {nt} should be multiple of WavefrontSize {lim.wavefront_size}")
    if nt > lim.max_workgroup_size:  # the arch profile's limit; Tensile's validWorkGroups stop at 1024
        run.reject(f"NumThreads {nt} > max workgroup size {lim.max_workgroup_size}")
    if not run.reasons:
        mt0, mt1 = s["MacroTile0"], s["MacroTile1"]
        shape = max(mt0 // mt1, mt1 // mt0)
        if not s["MacroTileShapeMin"] <= shape <= s["MacroTileShapeMax"]:
            run.reject(
                f"rejecting MacroTile Shape {mt0}:{mt1} for Min:Max "
                f"{s['MacroTileShapeMin']}:{s['MacroTileShapeMax']}"
            )
    if s["WorkGroupMappingType"] == "Z" and abs(s["WorkGroupMapping"]) > 2:
        run.reject("WorkGroupMappingType=Z only supports WorkGroupMapping=1, 2")


def _vector_widths(run: _Run) -> None:
    s = run.s
    if s["ThreadTile0"] > 16 or s["ThreadTile1"] > 16:
        run.reject("Invalid value for ThreadTile")
    if s["ScheduleIterAlg"] in (2, 3):
        run.reject("SIA2 and SIA3 only support MatrixInstruction")
    if run.asm and not s["BufferLoad"]:
        s["StaggerU"] = 0  # StaggerU needs BufferLoad in assembly; Tensile silently turns it off
    # Stagger stride shift: ceil(log2(StaggerUStride / (DepthU * bpe))) must not be negative.
    if s["StaggerU"] == 0:
        s["StaggerUStride"] = 0
    elif s["StaggerUStride"] == 0:
        run.stop(
            "StaggerUStride={} is only valid if StaggerU is 0 (StaggerU={})".format(
                s["StaggerUStride"], s["StaggerU"]
            )
        )
    if s["StaggerUStride"] > 0 and s["DepthU"] > 0 and 2 * s["StaggerUStride"] <= s["DepthU"] * run.bpe:
        run.stop(
            f"StaggerUStride={s['StaggerUStride']} is less than size of DepthU={s['DepthU']} * "
            f"BytesPerElement={run.bpe}"
        )
    run.derived["StaggerU"] = s["StaggerU"]
    if s["GlobalReadVectorWidth"] != -1:
        s["GlobalLoadVectorWidthA"] = s["GlobalLoadVectorWidthB"] = s["GlobalReadVectorWidth"]
    # Default VW: one 16-byte vector, halved until it divides both thread-tile dimensions.
    if s["VectorWidth"] < 1:
        vw = 16 // run.bpe
        while s["ThreadTile0"] % vw or s["ThreadTile1"] % vw:
            vw //= 2
        s["VectorWidth"] = vw
    vw = s["VectorWidth"]
    run.derived["VectorWidth"] = vw
    if s["ThreadTile0"] % vw or s["ThreadTile1"] % vw:
        run.stop(
            f"ThreadTile0 {s['ThreadTile0']} or ThreadTile1 {s['ThreadTile1']} "
            f"not a multiple of VectorWidth {vw}"
        )
    if run.asm and run.a_char == "H" and vw < 2:
        run.reject("VectorWidth must be >= 2 for half")  # packed half math in the unroll loop
    if run.asm and run.a_char == "I8" and vw < 4:
        run.reject("VectorWidth must be >= 4 for Int8 or 8bitFloat")
    for tc in "AB":
        key = f"GlobalLoadVectorWidth{tc}"
        if s[key] == -1:
            # asm loads whole dwords: at least 4/bpe elements (2 for half)
            s[key] = max(vw, math.ceil(4 / run.bpe)) if run.asm else vw
        if s[key] * run.bpe > 16:
            run.stop(f"GlobalLoadVectorWidth{tc} * DataType.numBytes() > 16")
    if s["StoreVectorWidth"] == -1:
        s["StoreVectorWidth"] = 4 if run.bpe <= 4 else 16 // run.bpe
    if vw * run.bpe > 16:
        run.stop("VWA * DataType.numBytes() > 16")
    mt0, mt1, nt = s["MacroTile0"], s["MacroTile1"], s["NumThreads"]
    if mt0 * mt1 < nt:
        run.stop(f"NumElementsPerWorkGroup {mt0 * mt1} < NumThreads {nt}; reduce LocalSplitU")
    nept = mt0 * mt1 // nt
    gwvw = min(vw, nept)
    run.derived.update(NumElementsPerThread=nept, GlobalWriteVectorWidth=gwvw)
    if nept % gwvw:
        run.stop(f"LSU NumElementsPerThread {nept} not divisible into GWVW {gwvw}")
    if s["LocalSplitU"] > 1:  # the LSU reduction stores sideways through LDS
        if nt % mt0:
            run.stop(f"LocalSplitU but NumThreads={nt} not divisible by MT0={mt0} for sideways store")
        if mt0 * mt1 % nt:
            run.stop(f"LocalSplitU but MT0*MT1={mt0 * mt1} elements doesn't divide into NumThreads={nt}")
        if run.a_char == "I8":
            run.stop("int8 doesn't support non-MFMA + LocalSplitU")


def _split_and_atomics(run: _Run) -> None:
    s = run.s
    gsu = s["GlobalSplitU"]
    # _GlobalAccumulation: a workspace is used when GSU>1 and either MultipleBuffer, or SingleBuffer with a
    # compute type different from the destination type (HPA half/bf16).
    ga = None
    if gsu > 1:
        if s["GlobalSplitUAlgorithm"] == "MultipleBuffer":
            ga = "MultipleBuffer"
        elif run.compute_char != run.dest_char:
            ga = "SingleBuffer"
    s["_GlobalAccumulation"] = ga
    if gsu == 1:
        s["GlobalSplitUAlgorithm"] = "SingleBuffer"
        if s["GlobalSplitUAtomicAdd"]:
            run.reject(
                " GlobalSplitU=1 and GlobalSplitUAtomicAdd=True. Rejecting to avoid duplicate kernels."
            )
    else:
        if not s["GlobalSplitUSummationAssignmentRoundRobin"] and s["LoopTail"]:
            run.stop(
                "GlobalSplitU and LoopTail require SummationAssignmentRoundRobin=True since strongly "
                "breaks Tensile kernel architecture"
            )
        supported = (
            run.a_char == "S"
            or (run.a_char == "D" and s["BufferStore"])
            or run.dest_char == "I"
            or (run.asm and run.compute_char == "H")
            or ga is not None
        )
        if not supported:
            run.stop(
                "GlobalSplitU only compatible with single, or asm and (half or mixed) precision, "
                "or EnableMatrixInstruction"
            )
        if s["GlobalSplitUAtomicAdd"]:
            run.reject("GlobalSplitUAtomicAdd is not supported by this arch")  # no HasAtomicAdd on gfx9 VALU
        if run.initial_strides_cd:
            # Solution.initBetaOnlyKernelObjects adds a BetaOnly kernel for every GSU > 1 kernel, and
            # KernelWriterBetaOnly.kernelBodyBetaOnly asserts on UseInitialStridesCD: the run dies.
            run.reject(
                "GlobalSplitU > 1 needs the BetaOnly kernel, which does not support UseInitialStridesCD"
            )
    # VectorAtomicWidth: exactly one legal value, 2 for a 2-byte compute type (32-bit CAS), else 1.
    vaw_min = 2 if run.compute_bytes == 2 else 1
    use_atomic = gsu > 1 and s["GlobalSplitUAlgorithm"] == "SingleBuffer"
    if s["VectorAtomicWidth"] == -1:
        s["VectorAtomicWidth"] = vaw_min
    vaw = s["VectorAtomicWidth"]
    if vaw < vaw_min:
        run.reject(f"VectorAtomicWidth should not be smaller than min(={vaw_min})")
    if vaw > vaw_min:
        run.reject(f"VectorAtomicWidth should not be larger than max(={vaw_min})")
    if not use_atomic and vaw > vaw_min:
        run.reject(
            f"Rejecting (GlobalSplitU=1 or MultipleBuffer) and VectorAtomicWidth>min(={vaw_min}) to avoid "
            "duplicate kernels."
        )
    if use_atomic and vaw > run.derived["GlobalWriteVectorWidth"]:
        run.reject(
            f"GSU + SingleBuffer + VectorAtomicWidth({vaw}) > "
            f"GlobalWriteVectorWidth({run.derived['GlobalWriteVectorWidth']}) not supported"
        )
    if run.a_char == "H" and run.asm:
        if s["VectorWidth"] < 2:
            run.reject("Assembly half requires VectorWidth >= 2 for non-MFMA mode")
        if gsu > 1 and ga is None:
            if vaw < 2:
                run.reject("Assembly GSU half requires VectorWidth >= 2 (for 32-bit CAS)")
            if s["AssertFree0ElementMultiple"] < 2:
                run.reject("Assembly GSU half requires AF0EM>=2 (for atomics on edge tiles)")


def _load_shape(run: _Run, tc: str, depth_u: int) -> tuple[int, int]:
    """(coalesced, perpendicular) element counts of one tensor's global-read tile."""
    mt = run.s["MacroTile0" if tc == "A" else "MacroTile1"]
    return (mt, depth_u) if run.tlu[tc] else (depth_u, mt)


def _glvw_classic(run: _Run, tc: str, total: int, grvw: int, why: list[str]) -> bool:
    """setGlobalLoadVectorWidth: shrink GLVW until every thread has a load, else demand whole loads."""
    s = run.s
    per_round = s["NumThreads"] * grvw
    ok = True
    if total < per_round:
        pv = per_round // total
        if not s["FractionalLoad"]:
            if per_round % total:
                why.append(f"(NumThreads * grvw) {per_round} % totalElements {total} != 0")
                why.append(f"pv {pv} * totalElements {total} != (NumThreads * grvw) {per_round} ")
                ok = False
            if grvw % pv:
                why.append(f"GlobalLoadVectorWidth{tc} {grvw} % pv {pv} != 0")
                ok = False
            grvw //= pv
            per_round //= pv
    elif total % per_round and not s["FractionalLoad"]:
        why.append(f"totalElements {total} % (NumThreads * grvw) {per_round} != 0")
        ok = False
    s[f"GlobalLoadVectorWidth{tc}"] = grvw
    s[f"NumLoads{tc}"] = total // per_round if per_round else 0
    return ok


def fractional_load(threads: int, par: int, perp: int, glvw: int) -> tuple[int, int, int] | None:
    """setGlobalLoadTileDimFractional for one tensor: (GlobalLoadVectorWidth, LSC, LSP) of a load tile of
    ``par`` x ``perp`` elements whose rows may be partial (buffer loads clip the rest), or None."""
    grvw = glvw
    while grvw >= 1:
        per_inst = threads * grvw
        lsc, lsp = (per_inst, 1) if par >= per_inst else (par, min(perp, per_inst // par))
        if lsc % grvw == 0:  # a vector must not wrap into the next row
            best, valid = grvw, lsc * lsp
            narrower = grvw // 2
            while narrower >= 1 and threads * narrower >= valid:  # prefer the narrowest covering the row
                if lsc % narrower == 0:
                    best = narrower
                narrower //= 2
            return best, lsc, lsp
        grvw //= 2
    return None


def _glvw_fractional(run: _Run, tc: str, depth_u: int, glvw: int) -> bool:
    s = run.s
    par, perp = _load_shape(run, tc, depth_u)
    found = fractional_load(s["NumThreads"], par, perp, glvw)
    if found is None:
        return False
    best, lsc, lsp = found
    s[f"GlobalLoadVectorWidth{tc}"] = best
    s[f"LSC{tc}"], s[f"LSP{tc}"] = lsc, lsp
    s[f"NumLoadsCoalesced{tc}"] = -(-par // lsc)
    s[f"NumLoadsPerpendicular{tc}"] = -(-perp // lsp)
    return True


def _depth_u(run: _Run) -> None:
    """The DepthU search of assignDerivedParameters (a positive DepthU is the only value tried)."""
    s = run.s
    user = s["DepthU"]
    if user == -1 and s["MacroTile0"] != s["MacroTile1"]:
        run.stop("DepthU=0 requires square MacroTile")
    div = s["DepthULdsDivisor"]
    depth_u, max_depth_u = (2, _MAX_DEPTHU) if user < 0 else (user, user)
    # The LDS depth used by the prefetch checks; Tensile resets it to 2 (not 2*DepthU/div) after a doubling.
    depth_lds = 2 if user < 0 else user // div
    if s["LocalReadVectorWidth"] == -1:
        s["LocalReadVectorWidth"] = s["VectorWidth"]
    if not (run.asm and s["BufferLoad"]):
        s["FractionalLoad"] = 0  # fractional loads rely on buffer-load clipping
    if s["FractionalLoad"] and depth_u & (depth_u - 1):
        run.reject("FractionalLoad requires DepthU = power of 2")
    orig = {tc: s[f"GlobalLoadVectorWidth{tc}"] for tc in "AB"}
    while True:
        why: list[str] = []
        loop_iters = depth_lds // s["LocalSplitU"] // s["InnerUnroll"]
        if loop_iters < 1:
            run.stop("LoopIters need to greater than 0")
        plr = s["PrefetchLocalRead"]
        if depth_lds % (plr % loop_iters + 1):  # prefetch registers must cycle evenly through the loop
            why.append(f"DepthU {depth_lds} % ((PrefetchLocalRead {plr} % LoopIters {loop_iters}) + 1) != 0")
        for tc in "AB":
            coal, perp = _load_shape(run, tc, depth_u)
            if s["FractionalLoad"]:
                if not _glvw_fractional(run, tc, depth_u, orig[tc]):
                    why.append(f"{tc}: no fractional GlobalLoadVectorWidth found")
            else:
                _glvw_classic(run, tc, coal * perp, orig[tc], why)
        if not why and run.asm and run.a_char == "I8":
            for tc in "AB":
                if s[f"GlobalLoadVectorWidth{tc}"] < 4:
                    run.reject(f"Int8 requires GLVW{tc} >= 4, current is {s[f'GlobalLoadVectorWidth{tc}']}")
        glvw = {tc: s[f"GlobalLoadVectorWidth{tc}"] for tc in "AB"}
        if not s["FractionalLoad"]:
            reduced = [glvw[tc] < orig[tc] for tc in "AB"]
            if (
                (user == -1 and (glvw["A"] != 1 or glvw["B"] != 1))
                or (user == -2 and all(reduced))
                or (user <= -3 and any(reduced))
            ):
                why.append("GlobalLoadVectorWidth reduced below the requested width")
        if not why:
            for tc in "AB":
                if not run.tlu[tc] and depth_u < glvw[tc]:
                    why.append(f"DepthU {depth_u} < GlobalLoadVectorWidth{tc} {glvw[tc]}")
        if not why:
            if user < -3:  # each value below -3 asks for one more doubling after the first valid DepthU
                user += 1
                depth_u, depth_lds = depth_u * 2, 2
                continue
            break
        if depth_u < max_depth_u:
            depth_u += 2
            depth_lds = depth_u // div
            continue
        if user > 0:
            run.reasons.extend(why)  # Tensile prints these via reject(None, ...) before giving up
        run.stop("No valid DepthU found")
    s["DepthU"] = depth_u
    s["_DepthULds"] = depth_u // div
    run.derived["DepthU"] = depth_u
    run.derived.update({f"GlobalLoadVectorWidth{tc}": glvw[tc] for tc in "AB"})
    if not s["FractionalLoad"]:
        for tc in "AB":
            _load_tile_classic(run, tc, depth_u)
    for tc in "AB":
        for key in ("NumLoadsCoalesced", "NumLoadsPerpendicular", "LSC", "LSP"):
            run.derived[key + tc] = s[key + tc]
        run.derived[f"LVC{tc}"] = -(-s[f"LSC{tc}"] // glvw[tc])
        run.derived[f"LVP{tc}"] = -(-s[f"LSP{tc}"] // glvw[tc])
    _strides(run)


def _load_tile_classic(run: _Run, tc: str, depth_u: int) -> None:
    """setGlobalLoadTileDimClassic: split NumLoads into coalesced x perpendicular loads."""
    s = run.s
    coal, perp = _load_shape(run, tc, depth_u)
    glvw, nl, nlc_req = s[f"GlobalLoadVectorWidth{tc}"], s[f"NumLoads{tc}"], s[f"NumLoadsCoalesced{tc}"]
    vectors_coal = coal // glvw

    def fits(nlc: int) -> bool:
        return nl % nlc == 0 and vectors_coal % nlc == 0 and perp % (nl // nlc) == 0

    run.derived[f"NumLoads{tc}"] = nl
    if nlc_req in (1, -1):  # search the smallest (1) or largest (-1) split that tiles evenly
        order = range(1, nl + 1) if nlc_req == 1 else range(nl, 0, -1)
        nlc = next((n for n in order if fits(n)), None)
        if nlc is None:
            run.stop(f"{tc}: No NumLoadsCoalesced={nlc_req} found")
    else:
        nlc = nlc_req
        if nlc > nl:
            run.stop(f"{tc} nlc > numLoads")
        if nl % nlc:
            run.stop(f"{tc}: numLoads {nl} % numLoadsCoalesced {nlc} != 0")
        if vectors_coal % nlc:
            run.stop(f"{tc}: totalVectorsCoalesced {vectors_coal} % numLoadsPara {nlc} != 0")
        if perp % (nl // nlc):
            run.stop(f"{tc}: totalElementsPerp {perp} % numLoadsPerp {nl // nlc} != 0")
    nlp = nl // nlc
    s[f"NumLoadsCoalesced{tc}"], s[f"NumLoadsPerpendicular{tc}"] = nlc, nlp
    mt = s["MacroTile0" if tc == "A" else "MacroTile1"]
    if run.tlu[tc]:
        s[f"LSC{tc}"], s[f"LSP{tc}"] = mt // nlc, -(-depth_u // nlp)
    else:
        s[f"LSC{tc}"], s[f"LSP{tc}"] = -(-depth_u // nlc), mt // nlp


def _strides(run: _Run) -> None:
    s = run.s
    # Without initial strides Tensile asserts unit stride in dim 0; for GEMM the coalesced dim is position 0.
    if not run.initial_strides_ab:
        for tc in "AB":
            s[f"AssertStride{tc}Equal"] = {**s[f"AssertStride{tc}Equal"], 0: 1}
    if not run.initial_strides_cd:
        for tc in "CD":
            s[f"AssertStride{tc}Equal"] = {**s[f"AssertStride{tc}Equal"], 0: 1}
    for tc in "AB":
        stride = s[f"AssertStride{tc}Equal"].get(0, -1)
        if stride != 1 and s[f"GlobalLoadVectorWidth{tc}"] != 1:
            index = (0 if tc == "A" else 1) if run.tlu[tc] else 3
            run.reject(
                f"Non-unit stride({'TBD' if stride == -1 else stride}) for coalesced dimension "
                f"(index={index}) requires GlobalLoadVectorWidth{tc}==1"
            )


def _lds_elements(run: _Run, tc: str, aligned: bool) -> int:
    """getLdsNumElements[Aligned]: the tile plus one pad per MacroTile-long row, aligned to 256 bytes."""
    s = run.s
    mt = s["MacroTile0" if tc == "A" else "MacroTile1"]
    n = mt * s["_DepthULds"]
    n += (n // mt) * s[f"LdsPad{tc}"]
    if aligned:
        align = 256 // run.bpe
        n = -(-n // align) * align
    return n


def _lds(run: _Run) -> None:
    s, lds_max = run.s, run.limits.lds_bytes
    if not run.asm:
        for tc in "AB":
            s[f"LdsPad{tc}"] = max(s[f"LdsPad{tc}"], 0)
            s[f"LdsBlockSizePerPad{tc}"] = max(s[f"LdsBlockSizePerPad{tc}"], 0)
        if s["LdsPadA"] != s["LdsPadB"]:
            run.stop("Source KernelLanguage only supports LdsPadA == LdsPadB")
    if s["LocalReadVectorWidth"] != s["VectorWidth"]:
        run.reject("LocalReadVectorWidth must equal VectorWidth for non MI kernels")
    # ldsPaddingAuto (VALU branch)
    lrvw = s["LocalReadVectorWidth"]
    if lrvw * run.bpe // 4 > 4:
        run.reject(f"LocalReadVectorWidth={lrvw} results in attemping to read LDS larger than b128, reject")
    auto = {}
    for tc in "AB":
        if s[f"LdsBlockSizePerPad{tc}"] == -1:
            s[f"LdsBlockSizePerPad{tc}"] = 0
        auto[tc] = s[f"LdsPad{tc}"] == -1
        if auto[tc]:  # pad reads along the tile dimension only when they are not already contiguous
            s[f"LdsPad{tc}"] = 0 if run.tlu[tc] and not s[f"UnrollMajorLDS{tc}"] else s["VectorWidth"]
        if s[f"UnrollMajorLDS{tc}"]:
            run.reject("didn't support UnrollMajorLDS in VALU mode yet")
        if s[f"LdsBlockSizePerPad{tc}"] != 0:
            run.reject("didn't support LdsBlockSizePerPad in VALU mode yet")
    for tc in "AB":  # drop an automatic pad that would overflow LDS
        ab = _lds_elements(run, "A", True) + _lds_elements(run, "B", False)
        if s["1LDSBuffer"] != 1:
            ab *= 2
        if auto[tc] and ab * run.bpe > lds_max:
            s[f"LdsPad{tc}"] = 0
    lds_b = _lds_elements(run, "B", False)
    aligned_a, aligned_b = _lds_elements(run, "A", True), _lds_elements(run, "B", True)
    if s["PrefetchGlobalRead"]:  # double buffer: second copy starts at the next power of two
        blk = 1 << (aligned_a + aligned_b - 1).bit_length()
        lds_ab = blk + aligned_a + lds_b
        run.derived["LdsOffsetA_Blk"] = blk
    else:
        lds_ab = aligned_a + lds_b
    multiplier = run.compute_bytes // run.bpe
    reduction = (
        multiplier * s["LocalSplitU"] * s["MacroTile0"] * s["MacroTile1"] if s["LocalSplitU"] > 1 else 0
    )
    occupancy = lds_max // s["MaxOccupancy"] // run.dest_bytes
    if s["1LDSBuffer"] == -1:
        s["1LDSBuffer"] = int(lds_ab * run.bpe > lds_max)
    if s["1LDSBuffer"]:
        if not s["PrefetchGlobalRead"]:
            run.reject("PGR=0 already use 1 LDS buffer only")
        if s["ScheduleIterAlg"] not in (2, 3) and s["ScheduleLocalWrite"]:
            run.reject("1LDSBuffer only support SIA2 or SIA3, or SIA1 without SLW")
        lds_ab = aligned_a + lds_b
        run.derived.pop("LdsOffsetA_Blk", None)
    lds = max(lds_ab, reduction, occupancy)
    run.derived.update(
        LdsPadA=s["LdsPadA"],
        LdsPadB=s["LdsPadB"],
        LdsNumElementsAlignedA=aligned_a,
        LdsNumElementsAlignedB=aligned_b,
        LdsOffsetB=aligned_a,
        LdsNumElements=lds,
        lds_bytes=lds * run.bpe,
        **{"1LDSBuffer": s["1LDSBuffer"]},
    )
    if lds * run.bpe > lds_max:
        run.stop(f"Kernel Uses {lds * run.bpe} > {lds_max} bytes of LDS")


def _loop_iters(run: _Run) -> None:
    s = run.s
    lsu, du = s["LocalSplitU"], s["_DepthULds"]
    unroll = du // lsu
    if unroll * lsu != du:
        run.reject(f"DepthU {du} is not a multiple of LocalSplitU {lsu}")
    if not run.asm and s["InnerUnroll"] != 1:
        run.reject("InnerUnroll only supported on assembly")
    unroll //= s["InnerUnroll"]
    run.derived.update(LoopUnroll=unroll, LoopIters=unroll)
    if unroll < 1:
        run.stop("LoopIters need to greater than 0")
    plr = s["PrefetchLocalRead"]
    if plr >= 2 * unroll:
        run.reject(f"Reject since PrefetchLocalRead {plr} >= 2x LoopIters {unroll}")
    if plr % unroll > 1:
        run.reject(f"PrefetchLocalRead: {plr}, LoopIters: {unroll} performance is low")


def _partial_tile_loads(run: _Run) -> None:
    s = run.s
    buffer_load = run.asm and s["BufferLoad"]
    for tc, af in (("A", "AssertFree0ElementMultiple"), ("B", "AssertFree1ElementMultiple")):
        glvw = s[f"GlobalLoadVectorWidth{tc}"]
        # A tile edge can split a vector along the free dim only when the free dim is the coalesced one.
        no_partial = not run.tlu[tc] or s[af] % glvw == 0
        # The shift-pointer edge handling needs vectors of VW or single elements.
        if (not buffer_load or not no_partial) and glvw > 1 and glvw != s["VectorWidth"]:
            run.reject(f"GlobalLoadVectorWidth{tc} {glvw} must be == VectorWidth {s['VectorWidth']} or == 1")
    for tc in "CD":
        if s[f"AssertStride{tc}Equal"].get(0, -1) != 1 and s["VectorStore"] > 0:
            run.reject("UseInitialStridesCD requires not VectorStore since store locations not adjacent")


def _source_kernel(run: _Run) -> None:
    if not run.asm and run.s["PrefetchGlobalRead"] == 2:
        run.reject("Source kernel does not support PGR2")


def _store_batches(run: _Run) -> None:
    """KernelWriterAssembly.globalWriteElements stores half/bf16 C in batches of an even number of elements
    (vectors of GlobalWriteVectorWidth); without a workspace (no _GlobalAccumulation) a VALU kernel whose
    thread holds a single such vector cannot be written: overflowedResources 3. Checked against Tensile 4.44
    on HB/HHS_BH/HSS_BH asm kernels (bench/RESULTS.md, Tensile conformance)."""
    s = run.s
    if not run.asm or run.a_char not in ("H", "B") or s.get("_GlobalAccumulation") is not None:
        return
    vectors = run.derived["NumElementsPerThread"] // run.derived["GlobalWriteVectorWidth"]
    if vectors < 2:
        run.reject(
            f"{vectors} store vector(s) per thread: half requires at least two elements per batch "
            "(KernelWriterAssembly overflowedResources 3)"
        )


def _vgpr_bound(run: _Run) -> None:
    """KernelWriterAssembly allocates at least accumulators + PLR+1 A/B fragments + global-read buffers;
    more than the VGPR limit (error 1) or than one workgroup per CU can hold (error 4) fails generation."""
    s = run.s
    if not run.asm:
        return  # the HIP compiler spills instead of failing
    plr = min(s["PrefetchLocalRead"], run.derived["LoopIters"] - 1)
    blocks = (1 + plr) * s["InnerUnroll"]
    acc = s["ThreadTile0"] * s["ThreadTile1"] * run.compute_bytes // 4
    frag = g2l = 0
    for tc, tt in (("A", s["ThreadTile0"]), ("B", s["ThreadTile1"])):
        # bf16 HPA unpacks fragments to one element per register
        frag += (tt if run.a_char == "B" and run.hpa else tt * run.bpe // 4) * blocks
        loads = s[f"NumLoadsCoalesced{tc}"] * s[f"NumLoadsPerpendicular{tc}"]
        g2l += -(-loads * s[f"GlobalLoadVectorWidth{tc}"] * run.bpe // 4)  # ceil: registers hold whole dwords
    need = acc + frag + g2l
    run.derived["vgpr_lower_bound"] = need
    limit = min(run.limits.vgprs_max, _VGPRS_PER_CU // s["NumThreads"])
    if need > limit:
        run.reject(f"needs at least {need} VGPRs > {limit} (KernelWriterAssembly overflowedResources)")
