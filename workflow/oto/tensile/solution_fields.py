"""Fields of a TensileCreateLibrary solution, derived from a logic file's solution dict without Tensile.

TensileCreateLibrary (TCL) re-derives every solution on load (ROCm/Tensile:Tensile/LibraryIO.py
``parseLibraryLogicData`` forces ``AssignedDerivedParameters: False``), so the ``.dat`` fields come from
``SolutionStructs.Solution.assignDerivedParameters`` applied to the stored independent parameters, not from
the derived values an old logic file happens to store. This module re-implements the part of that derivation
that reaches the library (non-MFMA kernels: the VALU path gfx9 parts without matrix cores take), then the
``Contractions.py`` conversions: problem type, problem predicates, size mapping and the minimal kernel name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oto.gemm import DATATYPES, HPA_TYPES, DataType, FamilyCodeError, Library, datatype
from oto.tensile import legality
from oto.tensile.defaults import TENSILE_DEFAULTS
from oto.tensile.isa import UnknownIsa, caps_donor
from oto.tensile.legality import fractional_load

# Tensile's defaults for every solution parameter, in its order (the order of a solution's state, which fixes
# the order of the problem predicates TCL writes).
DEFAULTS = TENSILE_DEFAULTS

# Tensile's ``validParameters`` keys: the only keys a kernel name can carry (Common.py).
VALID_PARAMETERS = frozenset(DEFAULTS) | {"ISA", "MacroTile", "DelayRemainingArguments"}

_INDEX_CHARS = "ijklmnopqrstuvwxyz"


def isa_tuple(arch: str) -> tuple[int, int, int]:
    """``gfx90c`` -> (9, 0, 12) like Common.gfxArch: the last two characters are hex digits."""
    digits = arch[3:].split(":")[0]
    return int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)


@dataclass(frozen=True)
class ProblemTypeInfo:
    """The parts of a logic ProblemType dict that reach the library (SolutionStructs.ProblemType)."""

    a: DataType
    dest: DataType
    compute: DataType
    hpa: bool
    silent_hpa: bool
    use_beta: bool
    strided_batched: bool
    initial_strides_ab: bool
    initial_strides_cd: bool
    conjugate_a: bool
    conjugate_b: bool
    index_a: tuple[int, ...]
    index_b: tuple[int, ...]
    num_indices_c: int
    indices_free: tuple[int, ...]
    indices_batch: tuple[int, ...]
    indices_summation: tuple[int, ...]
    mirror_a: tuple[int, ...]
    mirror_b: tuple[int, ...]
    f32_xdl_math_op: DataType
    stochastic_rounding: bool
    fp16_alt_impl: bool
    fp16_alt_impl_round: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProblemTypeInfo:
        # Data types are read as Tensile's DataType() reads them, a bool as enum 0/1 (F32XdlMathOp: false).
        a = datatype(d["DataType"], bool_is_int=True)
        dest = datatype(d.get("DestDataType", d["DataType"]), bool_is_int=True)
        compute = datatype(d.get("ComputeDataType", d.get("DestDataType", d["DataType"])), bool_is_int=True)
        hpa = bool(d.get("HighPrecisionAccumulate", False))
        if hpa and a.char in ("H", "B") and compute.char == a.char:
            compute = DATATYPES["S"]  # ProblemType.__init__ turns HHH+HPA into HHS
        batched = bool(d.get("Batched", True))
        if d.get("OperationType", "GEMM") == "GEMM":
            # ProblemType.initGEMM rebuilds the index assignments from the transposes.
            s = 3 if batched else 2
            ia, ib = ([s, 0] if d.get("TransposeA") else [0, s]), ([1, s] if d.get("TransposeB") else [s, 1])
            if batched:
                ia.append(2)
                ib.append(2)
            num_c = 3 if batched else 2
            free, batch, summ = (0, 1), ((2,) if batched else ()), (s,)
        else:
            ia, ib = list(d["IndexAssignmentsA"]), list(d["IndexAssignmentsB"])
            num_c = d["NumIndicesC"]
            free, batch, summ = (tuple(d[k]) for k in ("IndicesFree", "IndicesBatch", "IndicesSummation"))
        return cls(
            a=a,
            dest=dest,
            compute=compute,
            hpa=hpa,
            silent_hpa=bool(d.get("SilentHighPrecisionAccumulate")),
            use_beta=bool(d.get("UseBeta", True)),
            strided_batched=bool(d.get("StridedBatched", True)),
            initial_strides_ab=bool(d.get("UseInitialStridesAB", False)),
            initial_strides_cd=bool(d.get("UseInitialStridesCD", False)),
            conjugate_a=bool(d.get("ComplexConjugateA")),
            conjugate_b=bool(d.get("ComplexConjugateB")),
            index_a=tuple(ia),
            index_b=tuple(ib),
            num_indices_c=num_c,
            indices_free=free,
            indices_batch=batch,
            indices_summation=summ,
            mirror_a=tuple(d.get("MirrorDimsA", ())),
            mirror_b=tuple(d.get("MirrorDimsB", ())),
            f32_xdl_math_op=datatype(d.get("F32XdlMathOp", 0), bool_is_int=True),
            stochastic_rounding=bool(d.get("StochasticRounding", False)),
            fp16_alt_impl=bool(d.get("Fp16AltImpl", False)),
            fp16_alt_impl_round=bool(d.get("Fp16AltImplRound", False)),
        )

    # --- derived index facts (ProblemType.assignDerivedParameters) ---
    @property
    def index01(self) -> tuple[int, int]:
        dims = [i for i in self.indices_free if i not in self.indices_batch]
        return [i for i in self.index_a if i in dims][0], [i for i in self.index_b if i in dims][0]

    @property
    def tensor0(self) -> int:
        a, b = self.index01
        return 0 if a < b else 1

    def tlu(self, tc: str) -> bool:
        """Tile dimension leads the unroll dimension in memory (TLUA/TLUB)."""
        ia = self.index_a if tc == "A" else self.index_b
        unroll = self.indices_summation[-1]
        return ia.index(self.index01[0 if tc == "A" else 1]) < ia.index(unroll)

    @property
    def name(self) -> str:
        """str(SolutionStructs.ProblemType), e.g. ``Cijk_Ailk_Bjlk_HHS_BH``."""
        chars = "IJKLMNOPQRSTUVWXYZ"
        a = "".join(chars[i] if i in self.mirror_a else chars[i].lower() for i in self.index_a)
        b = "".join(chars[i] if i in self.mirror_b else chars[i].lower() for i in self.index_b)
        name = f"C{_INDEX_CHARS[: self.num_indices_c]}_A{a}{'C' if self.conjugate_a else ''}"
        name += f"_B{b}{'C' if self.conjugate_b else ''}_{self.a.char}"
        if (self.a.char, self.dest.char, self.compute.char) in HPA_TYPES:
            name += self.dest.char + self.compute.char + "_"
        name += "B" if self.use_beta else ""
        name += "H" if self.hpa and not self.silent_hpa else ""
        if self.fp16_alt_impl:
            name += "RZ" if self.fp16_alt_impl_round else "R"
        name += ("I" if self.initial_strides_ab else "") + ("Ic" if self.initial_strides_cd else "")
        name += "" if self.strided_batched else "_GB"
        if self.a.char == "S" and self.f32_xdl_math_op.char != "S":
            name += "_M" + self.f32_xdl_math_op.char
        return name + ("_SR" if self.stochastic_rounding else "")

    @property
    def operation_identifier(self) -> str:
        """Contractions.ProblemType.operationIdentifier, e.g. ``Contraction_l_Ailk_Bljk_Cijk_Dijk``."""
        d_names = _INDEX_CHARS[: self.num_indices_c]
        sums = _INDEX_CHARS[self.num_indices_c : self.num_indices_c + len(self.indices_summation)]

        def tensor(ia: tuple[int, ...], mirror: tuple[int, ...]) -> str:
            out = []
            for i in ia:
                if i in self.indices_summation:
                    c = sums[self.indices_summation.index(i)]
                    out.append(c.upper() if i in mirror else c)
                else:
                    out.append(d_names[i])
            return "".join(out)

        a = tensor(self.index_a, self.mirror_a) + ("C" if self.conjugate_a else "")
        b = tensor(self.index_b, self.mirror_b) + ("C" if self.conjugate_b else "")
        return f"Contraction_{sums}_A{a}_B{b}_C{d_names}_D{d_names}"

    def state(self) -> dict[str, Any]:
        """The ``problemType`` field of a .dat solution (Contractions.ProblemType.StateKeys order)."""
        return {
            "operationIdentifier": self.operation_identifier,
            "aType": self.a.name,
            "bType": self.a.name,
            "cType": self.dest.name,
            "dType": self.dest.name,
            "useBeta": self.use_beta,
            "highPrecisionAccumulate": self.hpa,
            "useInitialStridesAB": self.initial_strides_ab,
            "useInitialStridesCD": self.initial_strides_cd,
            "stridedBatched": self.strided_batched,
            "f32XdlMathOp": self.f32_xdl_math_op.name,
            "stochasticRounding": self.stochastic_rounding,
        }

    def operation_predicates(self) -> list[dict[str, Any]]:
        """ProblemType.predicates(includeOperation=True)."""
        preds = [_pred("OperationIdentifierEqual", value=self.operation_identifier)]
        if not self.use_beta:
            preds.append(_pred("BetaZero"))
        return preds + [_pred("StridedBatched", value=self.strided_batched)]

    def type_predicates(self) -> list[dict[str, Any]]:
        """ProblemType.predicates(includeType=True): the per-type level of the library tree."""
        return [
            _pred("TypesEqual", value=[self.a.name, self.a.name, self.dest.name, self.dest.name]),
            _pred("HighPrecisionAccumulate", value=self.hpa),
            _pred("F32XdlMathOp", value=self.f32_xdl_math_op.name),
            _pred("StochasticRounding", value=self.stochastic_rounding),
        ]

    def placeholder_suffix(self) -> str:
        """ProblemType.placeholderStr(includeType=True), e.g. ``_Type_HH_HPA``."""
        return f"_Type_{self.a.char}{self.dest.char}" + ("_HPA" if self.hpa else "")


def _pred(tag: str, index: int | None = None, value: Any = None) -> dict[str, Any]:
    """Properties.Property.state(): type, then index and value when set."""
    out: dict[str, Any] = {"type": tag}
    if index is not None:
        out["index"] = index
    if value is not None:
        out["value"] = value
    return out


def and_predicate(preds: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Properties.Predicate.And: TruePred, the single predicate, or an And list."""
    preds = list(preds)
    if not preds:
        return {"type": "TruePred"}
    return preds[0] if len(preds) == 1 else {"type": "And", "value": preds}


def _has_glc_modifier(isa: tuple[int, int, int]) -> bool:
    # AsmCaps HasGLCModifier: gfx8/9/10 assemblers spell the cache bit "glc"; gfx94x uses sc0/sc1 and the
    # source-kernel ISA (0,0,0) has no caps at all.
    return isa[0] in (8, 9, 10) and isa[:2] != (9, 4)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def derive(solution: Mapping[str, Any], pt: ProblemTypeInfo, isa: tuple[int, int, int]) -> dict[str, Any]:
    """A solution's state after Tensile's re-derivation, for a VALU kernel or an RDNA3 WMMA kernel (its
    matrix-instruction part from :func:`oto.tensile.legality.final_state`).

    Keys come in Tensile's state order (defaults, ISA, then the file's other keys) because TCL turns the
    ``Assert*`` keys into problem predicates in that order. Re-derived are the keys that reach the
    library or a kernel name (Solution.assignDerivedParameters and the helpers it calls).
    """
    mi = _matrix_state(solution, pt, isa) if _is_matrix(solution) else None
    s: dict[str, Any] = {k: _copy(solution.get(k, v)) for k, v in DEFAULTS.items()}
    s["ISA"] = list(isa) if s["KernelLanguage"] == "Assembly" else [0, 0, 0]
    for k, v in solution.items():
        if k not in s and k != "ProblemType":
            s[k] = _copy(v)
    s["Kernel"] = True  # Solution.getKernels marks kernels; it is always part of the minimal name
    asm = s["KernelLanguage"] == "Assembly"
    regs = pt.a.registers
    bpe = pt.a.bytes

    wg, tt = list(s["WorkGroup"]), list(s["ThreadTile"])
    s["ThreadTile0"], s["ThreadTile1"] = tt
    s["LocalSplitU"] = wg[2] if len(wg) > 2 else 1
    s["NumThreads"] = wg[0] * wg[1] * s["LocalSplitU"]
    s["MacroTile0"], s["MacroTile1"] = wg[0] * tt[0], wg[1] * tt[1]
    if mi is not None:  # the wave group, not the workgroup, spans the macro tile
        s.update({k: _copy(mi[k]) for k in _MI_GEOMETRY}, EnableMatrixInstruction=True)
        tt = [s["ThreadTile0"], s["ThreadTile1"]]
    mt = {"A": s["MacroTile0"], "B": s["MacroTile1"]}
    if pt.tensor0 == 1:
        mt = {"A": s["MacroTile1"], "B": s["MacroTile0"]}

    # Workspace for split-K (assignDerivedParameters, top).
    s["_GlobalAccumulation"], s["_WorkspaceSizePerElemC"] = None, 0
    if s["StreamK"] > 0 and s["StreamKAtomic"] == 0:
        s["_GlobalAccumulation"], s["_WorkspaceSizePerElemC"] = (
            "PartialsBuffer",
            pt.compute.bytes,
        )
    if s["GlobalSplitU"] > 1:
        cbytes = pt.compute.bytes
        if s["GlobalSplitUAlgorithm"] == "SingleBuffer" and pt.compute.char != pt.dest.char:
            s["_GlobalAccumulation"], s["_WorkspaceSizePerElemC"] = "SingleBuffer", cbytes
        elif s["GlobalSplitUAlgorithm"] == "MultipleBuffer":
            s["_GlobalAccumulation"], s["_WorkspaceSizePerElemC"] = (
                "MultipleBuffer",
                cbytes * s["GlobalSplitU"],
            )
    if s["StreamK"] == 0:
        s["StreamKAtomic"] = s["StreamKXCCMapping"] = s["DebugStreamK"] = 0
    if asm and not s["BufferLoad"]:
        s["StaggerU"] = 0  # StaggerU needs buffer loads in assembly
    if s["PreloadKernelArguments"] == -1:
        s["PreloadKernelArguments"] = 0  # no gfx9 part before gfx942 can preload kernel arguments
    s.setdefault("DelayRemainingArguments", False)
    if s["MemoryModifierFormat"] not in ("GLC", "SC0", "SC1", "NT"):
        s["MemoryModifierFormat"] = "GLC" if _has_glc_modifier(tuple(s["ISA"])) else "SC0"
    if not asm or s["WorkGroupMappingType"] == "Z":
        s["WorkGroupMapping"] = abs(s["WorkGroupMapping"])
    if s["WorkGroupMapping"] == -1:
        s["WorkGroupMapping"] = 1
    if s["PersistentKernel"] and asm and (s["GlobalSplitU"] != 1 or s["WorkGroupMapping"] < 0):
        s["PersistentKernel"] = 0
    if s["PersistentKernelAlongBatch"] and (
        not s["PersistentKernel"] or (not asm and s["GlobalSplitU"] != 1)
    ):
        s["PersistentKernelAlongBatch"] = False

    # Unit-stride asserts for the leading dimensions (assignDerivedParameters).
    for tc, initial in (
        ("A", pt.initial_strides_ab),
        ("B", pt.initial_strides_ab),
        ("C", pt.initial_strides_cd),
        ("D", pt.initial_strides_cd),
    ):
        key = f"AssertStride{tc}Equal"
        s[key] = {int(k): v for k, v in dict(s[key] or {}).items()}
        if not initial:
            s[key][0] = 1
    for mask, tc in ((0x1, "B"), (0x2, "A")):
        if s["PackBatchDims"] & mask:
            ia = pt.index_a if tc == "A" else pt.index_b
            for bi in pt.indices_batch:
                s[f"AssertStride{tc}Equal"][ia.index(bi)] = 0
    s["PackedC0IndicesX"], s["PackedC1IndicesX"] = _packed_indices(s, pt)

    buffer_load = bool(s["BufferLoad"]) and asm
    if not buffer_load:
        s["DirectToLdsA"] = s["DirectToLdsB"] = False
        s["FractionalLoad"] = False
    if s["SuppressNoLoadLoop"] == 1 and not (
        buffer_load and s["PrefetchGlobalRead"] == 1 and s["GlobalSplitU"] == 1
    ):
        s["SuppressNoLoadLoop"] = 0
    if s["ExpandPointerSwap"] == 1:
        # Pointer swap is kept for PGR 1, and for PGR > 1 on the data types DirectToVgpr supports (every
        # type but int32 and packed int8: Solution.isDirectToVgprSupportDataType).
        dtv = s["DirectToVgprA"] or s["DirectToVgprB"]
        pgr = s["PrefetchGlobalRead"]
        pgr_ok = pgr == 1 or (pgr > 1 and pt.a.char not in ("I", "4xi8"))
        if not ((buffer_load or dtv) and pgr_ok) or s["DepthULdsDivisor"] > 1:
            s["ExpandPointerSwap"] = 0
    s["OptPreLoopVmcnt"] = s["OptPreLoopVmcnt"] and s["PrefetchAcrossPersistent"]

    if s["StaggerU"] == 0:
        s["StaggerUMapping"] = s["StaggerUStride"] = 0
    ratio = s["StaggerUStride"] / (s["DepthU"] * bpe)
    s["_staggerStrideShift"] = math.ceil(math.log2(ratio)) if ratio > 0 else 0

    if mi is not None:  # vector widths, LDS layout and loads of a matrix-instruction kernel
        s.update({k: _copy(mi[k]) for k in _MI_RESOLVED})
        s["VectorWidthA"] = s["VectorWidth"]
        s["AssertMinApproxSize"] = (3 if asm else 2) if s["VectorWidth"] > 1 else 0
        if s["UnrollIncIsDepthU"] or s["PackSummationDims"] == 1:
            s["AssertSummationElementMultiple"] = s["DepthU"]
            s["StaggerU"] = 0
        s["TLUA"], s["TLUB"] = pt.tlu("A"), pt.tlu("B")
        return s
    if s["GlobalReadVectorWidth"] != -1:
        s["GlobalLoadVectorWidthA"] = s["GlobalLoadVectorWidthB"] = s["GlobalReadVectorWidth"]
    if s["VectorWidth"] < 1:
        vw = int(4 / regs)
        while tt[0] % vw or tt[1] % vw:
            vw //= 2
        s["VectorWidth"] = vw
    s["VectorWidthA"] = s["VectorWidthB"] = s["VectorWidth"]
    for tc in "AB":
        key = f"GlobalLoadVectorWidth{tc}"
        if s[key] == -1:
            s[key] = max(s["VectorWidth"], math.ceil(1 / regs)) if asm else s["VectorWidth"]
    if s["VectorAtomicWidth"] == -1:
        # non-MFMA: one legal value, 2 for a 2-byte compute type (32-bit CAS), else 1; it is in the name
        s["VectorAtomicWidth"] = 2 if pt.compute.bytes == 2 else 1
    if s["StoreVectorWidth"] == -1:
        s["StoreVectorWidth"] = s["VectorWidth"] if s["SourceSwap"] else (4 if regs <= 1 else int(4 // regs))
    if s["LocalReadVectorWidth"] == -1:
        s["LocalReadVectorWidth"] = s["VectorWidth"]
    auto = {}
    for tc in "AB":
        auto[tc] = s[f"LdsPad{tc}"] == -1
        if auto[tc]:
            s[f"LdsPad{tc}"] = (
                0 if (pt.tlu(tc) and not s[f"UnrollMajorLDS{tc}"]) or not asm else s["VectorWidth"]
            )
        if s[f"LdsBlockSizePerPad{tc}"] == -1 or s[f"LdsPad{tc}"] == 0:
            s[f"LdsBlockSizePerPad{tc}"] = 0
    _resolve_lds(s, bpe, auto)
    _global_loads(s, pt, mt)

    # Kernels that need dims > 1 (assignDerivedParameters, near the end).
    s["AssertMinApproxSize"] = (3 if asm else 2) if s["VectorWidth"] > 1 else 0
    if s["UnrollIncIsDepthU"] or s["PackSummationDims"] == 1:
        s["AssertSummationElementMultiple"] = s["DepthU"]
        s["StaggerU"] = 0
    s["TLUA"], s["TLUB"] = pt.tlu("A"), pt.tlu("B")
    return s


_MAX_LDS = 65536  # Common.py globalParameters["MaxLDS"]

# What a matrix-instruction kernel's derivation sets that a VALU kernel's does not, or sets otherwise: its
# geometry (parameterWrapper, assignProblemIndependentDerivedParameters) and the vector widths, LDS layout
# and global loads that follow from it. oto.tensile.legality replays Tensile's derivation for both kinds of
# kernel (cross-checked against Tensile's Solution(), bench/RESULTS.md); its state supplies these.
_MI_GEOMETRY = (
    "MIBlock", "MIWaveGroup", "MIWaveTile", "MatrixInstM", "MatrixInstN",
    "MatrixInstK", "MatrixInstB", "MatrixInstBM", "MatrixInstBN", "MIInputPerThread", "MIOutputVectorWidth",
    "ThreadTile0", "ThreadTile1", "SubGroup0", "SubGroup1", "LocalSplitU", "NumThreads", "MacroTile0",
    "MacroTile1",
)  # fmt: skip
_MI_RESOLVED = (
    "VectorWidth", "VectorWidthB", "GlobalLoadVectorWidthA", "GlobalLoadVectorWidthB", "StoreVectorWidth",
    "LocalReadVectorWidth", "VectorAtomicWidth", "LdsPadA", "LdsPadB", "LdsBlockSizePerPadA",
    "LdsBlockSizePerPadB", "UnrollMajorLDSA", "UnrollMajorLDSB", "1LDSBuffer", "NumLoadsCoalescedA",
    "NumLoadsCoalescedB", "InnerUnroll", "PrefetchLocalRead", "MIArchVgpr", "FractionalLoad",
)  # fmt: skip


def _is_matrix(solution: Mapping[str, Any]) -> bool:
    return bool(solution.get("MatrixInstruction") or solution.get("EnableMatrixInstruction"))


def _matrix_state(solution: Mapping[str, Any], pt: ProblemTypeInfo, isa: tuple[int, int, int]) -> dict:
    """Tensile's state of a matrix-instruction (WMMA) kernel, as oto.tensile.legality derives it for ``isa``
    (an ISA Tensile has no caps of, gfx1103, takes those of its family's nearest one). Raises ValueError for
    a form legality does not model (MFMA ISAs, a MatrixInstruction without ThreadTile and WorkGroup)."""
    if not solution.get("MatrixInstruction"):
        raise ValueError(
            "a matrix-instruction solution without MatrixInstruction (MIBlock form) is not modelled"
        )
    try:
        limits = legality.Limits(isa=isa, caps_from=caps_donor(isa))
        library = Library.parse(pt.name)
    except (UnknownIsa, FamilyCodeError) as exc:
        raise ValueError(f"matrix-instruction solution: {exc}") from None
    params = {k: solution[k] for k in DEFAULTS if k in solution}
    state = legality.final_state(library, params, limits)
    if "MIBlock" not in state:
        raise ValueError(f"matrix-instruction solution on {list(isa)}: the ISA has no matrix instructions")
    return state


def _lds_elements(s: Mapping[str, Any], tc: str, bpe: int, aligned: bool) -> int:
    """Solution.getLdsNumElements[Aligned] (VALU: one pad per MacroTile-long row, 256-byte alignment)."""
    mt = s["MacroTile0" if tc == "A" else "MacroTile1"]
    n = mt * (s["DepthU"] // s["DepthULdsDivisor"])
    n += (n // mt) * s[f"LdsPad{tc}"]
    return _ceil_div(n, 256 // bpe) * (256 // bpe) if aligned else n


def _resolve_lds(s: dict[str, Any], bpe: int, auto: Mapping[str, bool]) -> None:
    """The end of ldsPaddingAuto and assignDerivedParameters' LDS part: an automatic pad that would overflow
    LDS is dropped, and 1LDSBuffer -1 becomes 1 exactly when the double buffer does not fit. Both values
    are part of the kernel name, so they are resolved before naming."""
    for tc in "AB":
        ab = _lds_elements(s, "A", bpe, True) + _lds_elements(s, "B", bpe, False)
        if s["1LDSBuffer"] != 1:
            ab *= 2
        if auto[tc] and ab * bpe > _MAX_LDS:
            s[f"LdsPad{tc}"] = 0
    if s["1LDSBuffer"] == -1:
        a_al, b_al = _lds_elements(s, "A", bpe, True), _lds_elements(s, "B", bpe, True)
        b = _lds_elements(s, "B", bpe, False)
        lds_ab = ((1 << (a_al + b_al - 1).bit_length()) + a_al + b) if s["PrefetchGlobalRead"] else a_al + b
        s["1LDSBuffer"] = int(lds_ab * bpe > _MAX_LDS)


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return dict(v)
    if isinstance(v, tuple | list):
        return list(v)
    return v


def _packed_indices(s: Mapping[str, Any], pt: ProblemTypeInfo) -> tuple[list[int], list[int]]:
    """PackedC0/C1IndicesX: free (and packed batch) indices of the tensors holding index 0 and 1."""

    def packed(i: int, mask: int) -> bool:
        return (i in pt.indices_free and bool(s["PackFreeDims"])) or (
            i in pt.indices_batch and bool(s["PackBatchDims"] & mask)
        )

    first_a = pt.index01[0] < pt.index01[1]
    (ia0, m0), (ia1, m1) = (
        ((pt.index_a, 0x1), (pt.index_b, 0x2)) if first_a else ((pt.index_b, 0x2), (pt.index_a, 0x1))
    )
    return [i for i in ia0 if packed(i, m0)], [i for i in ia1 if packed(i, m1)]


def _global_loads(s: dict[str, Any], pt: ProblemTypeInfo, mt: Mapping[str, int]) -> None:
    """GlobalLoadVectorWidth and NumLoadsCoalesced for a fixed DepthU (setGlobalLoadVectorWidth and
    setGlobalLoadTileDimClassic, or setGlobalLoadTileDimFractional for FractionalLoad kernels)."""
    du = s["DepthU"]
    if s["FractionalLoad"]:
        for tc in "AB":
            par, perp = (mt[tc], du) if pt.tlu(tc) else (du, mt[tc])
            found = fractional_load(s["NumThreads"], par, perp, s[f"GlobalLoadVectorWidth{tc}"])
            if found is not None:
                s[f"GlobalLoadVectorWidth{tc}"] = found[0]
                s[f"NumLoadsCoalesced{tc}"] = _ceil_div(par, found[1])
        return
    for tc in "AB":
        coalesced, perp = (mt[tc], du) if pt.tlu(tc) else (du, mt[tc])
        total = coalesced * perp
        grvw = s[f"GlobalLoadVectorWidth{tc}"]
        threads_grvw = s["NumThreads"] * grvw
        if total < threads_grvw:
            pv = threads_grvw // total
            grvw //= pv
            threads_grvw //= pv
        s[f"GlobalLoadVectorWidth{tc}"] = grvw
        num_loads = total // threads_grvw
        s[f"NumLoads{tc}"] = num_loads
        if s[f"WaveSeparateGlobalRead{tc}"]:
            perp = _ceil_div(perp, s["NumThreads"] // s["WavefrontSize"])
        vectors_coalesced = coalesced // grvw if grvw else 0
        nlc = s[f"NumLoadsCoalesced{tc}"]
        if nlc in (1, -1):  # 1: fewest coalesced loads that tile evenly, -1: most
            order = range(1, num_loads + 1) if nlc == 1 else range(num_loads, 0, -1)
            fits = (n for n in order if _tiles(n, num_loads, vectors_coalesced, perp))
            s[f"NumLoadsCoalesced{tc}"] = next(fits, nlc)


def _tiles(nlc: int, num_loads: int, vectors_coalesced: int, perp: int) -> bool:
    return num_loads % nlc == 0 and vectors_coalesced % nlc == 0 and perp % (num_loads // nlc) == 0


def problem_predicate(s: Mapping[str, Any], pt: ProblemTypeInfo) -> dict[str, Any]:
    """Contractions.ProblemPredicate.FromOriginalState: key predicates in state order, then the problem
    type's, then the compound ones."""
    preds = [p for k, v in s.items() for p in _key_predicate(k, v)]
    preds += pt.operation_predicates() + pt.type_predicates()
    if pt.a.char != "4xi8":
        f0 = max(s["GlobalLoadVectorWidthA"], 1) if pt.tlu("A") else 1
        f1 = max(s["GlobalLoadVectorWidthB"], 1) if pt.tlu("B") else 1
        preds += [
            _pred("LeadingFree0SizesGreaterOrEqual", value=f0),
            _pred("LeadingFree1SizesGreaterOrEqual", value=f1),
        ]
    if len(s["PackedC0IndicesX"]) > 1:
        preds.append(_pred("CDStridesEqual"))
    preds.append(_pred("KernelLanguageCompatible", value=s["KernelLanguage"]))
    if s["GlobalSplitU"] > 1 and s["_GlobalAccumulation"] != "MultipleBuffer":
        preds.append(_pred("DeterministicMode", value=False))
    if s["StreamK"] > 0 and s["StreamKAtomic"] == 1:
        preds.append(_pred("DeterministicMode", value=False))
    if s["PersistentKernel"]:
        preds.append(_pred("PersistentKernelCheck"))
    preds.append(_pred("ArithmeticUnitCompatible", value="MFMA" if _is_matrix(s) else "VALU"))
    if s["BufferLoad"] is True or s["BufferLoad"] == 1:
        may_a = pt.tlu("A") and s["AssertFree0ElementMultiple"] < s["GlobalLoadVectorWidthA"]
        may_b = pt.tlu("B") and s["AssertFree1ElementMultiple"] < s["GlobalLoadVectorWidthB"]
        preds.append(
            _pred(
                "BufferLoadOffsetLimitCheck",
                value={
                    "ShiftPtrElemB": s["GlobalLoadVectorWidthB"] if may_b else 0,
                    "ShiftPtrElemA": s["GlobalLoadVectorWidthA"] if may_a else 0,
                    "DUorMT1": s["DepthU"] if pt.tlu("B") else s["MacroTile1"],
                    "DUorMT0": s["DepthU"] if pt.tlu("A") else s["MacroTile0"],
                },
            )
        )
    if s["BufferStore"] is True or s["BufferStore"] == 1:
        value = s["MacroTile1"]
        less = {int(k): v for k, v in dict(s["AssertSizeLessThan"] or {}).items()}
        if 1 in less:
            value = min(value, less[1] - 1)
        preds.append(_pred("BufferStoreOffsetLimitCheck", value=value))
    if s["_GlobalAccumulation"] is not None and not s["StreamK"]:
        preds.append(_pred("GlobalSplitUCheckMinK", value=s["MinKForGSU"] * s["GlobalSplitU"]))
    return and_predicate(preds)


_DIM_PREDICATES = {
    "AssertStrideAEqual": "StrideAEqual",
    "AssertStrideBEqual": "StrideBEqual",
    "AssertStrideCEqual": "StrideCEqual",
    "AssertStrideDEqual": "StrideDEqual",
    "AssertSizeEqual": "SizeEqual",
    "AssertSizeGreaterThan": "SizeGreaterThan",
    "AssertSizeLessThan": "SizeLessThan",
    "AssertSizeMultiple": "SizeMultiple",
}
_MULTIPLE_PREDICATES = {
    "AssertFree0ElementMultiple": ("Free0SizeMultiple", 0),
    "AssertFree1ElementMultiple": ("Free1SizeMultiple", 0),
    "AssertSummationElementMultiple": ("BoundSizeMultiple", -1),
}


def _key_predicate(key: str, value: Any) -> list[dict[str, Any]]:
    """ProblemPredicate.FromOriginalKeyPair (and extractDimPredicate) for one state key."""
    if key in _DIM_PREDICATES:
        preds = [
            _pred(_DIM_PREDICATES[key], index=int(i), value=v) for i, v in dict(value).items() if v != -1
        ]
        return [and_predicate(preds)] if preds else []
    if key in ("AssertAIGreaterThanEqual", "AssertAILessThanEqual"):
        return [_pred(key[6:], value=value)] if value > 0 else []
    if key in ("AssertAlphaValue", "AssertBetaValue"):
        return [_pred(key[6:], value=str(value))] if value is not False else []
    if key == "AssertCEqualsD":
        return [_pred("CEqualsD")] if value is not False else []
    if key in _MULTIPLE_PREDICATES:
        tag, index = _MULTIPLE_PREDICATES[key]
        return [] if value == 1 else [_pred(tag, index=index, value=value)]
    if key in ("Fp16AltImpl", "Fp16AltImplRound"):
        return [_pred(key)] if value is not False else []
    return []


def task_predicate(s: Mapping[str, Any]) -> dict[str, Any]:
    """Contractions.TaskPredicate.FromOriginalState: a workspace check when split-K needs one."""
    return and_predicate([_pred("WorkspaceCheck")] if s["_WorkspaceSizePerElemC"] > 0 else [])


_GLOBAL_ACCUMULATION = {None: 0, "SingleBuffer": 1, "MultipleBuffer": 2, "PartialsBuffer": 3}


def size_mapping(s: Mapping[str, Any]) -> dict[str, Any]:
    """Contractions.SizeMapping.FromOriginalState, in its StateKeys order."""
    return {
        "workGroup": list(s["WorkGroup"]),
        "macroTile": [s["MacroTile0"], s["MacroTile1"], 1],
        "threadTile": list(s["ThreadTile"]),
        "depthU": s["DepthU"],
        "staggerU": s["StaggerU"],
        "globalSplitU": s["GlobalSplitU"],
        "staggerStrideShift": s["_staggerStrideShift"],
        "workGroupMapping": s["WorkGroupMapping"],
        "packSummationDims": s["PackSummationDims"],
        "packBatchDims": s["PackBatchDims"],
        "magicDivAlg": s["MagicDivAlg"],
        "streamK": s["StreamK"],
        "streamKAtomic": s["StreamKAtomic"],
        "persistentKernel": s["PersistentKernel"],
        "persistentKernelAlongBatch": s["PersistentKernelAlongBatch"],
        "sourceKernel": s["KernelLanguage"] == "Source",
        "globalAccumulation": _GLOBAL_ACCUMULATION[s["_GlobalAccumulation"]],
        "workspaceSizePerElemC": s["_WorkspaceSizePerElemC"],
        "preloadKernargs": s["PreloadKernelArguments"],
    }


# Keys that the name always spells out elsewhere or never shows (Solution.getMinNaming).
_NEVER_NAMED = {
    "ProblemType",
    "MacroTile0",
    "MacroTile1",
    "DepthU",
    "LdcEqualsLdd",
    "MatrixInstruction",
    "MatrixInstM",
    "MatrixInstN",
    "MatrixInstK",
    "MatrixInstB",
    "MatrixInstBM",
    "MatrixInstBN",
    "CustomKernelName",
    "Fp16AltImpl",
    "Fp16AltImplRound",
    "StochasticRounding",
}


def min_naming(states: list[Mapping[str, Any]]) -> set[str]:
    """Solution.getMinNaming: the parameters whose values differ between the kernels (plus ``Kernel``)."""
    keys = [k for k in states[0] if k in VALID_PARAMETERS and k not in _NEVER_NAMED] if states else []
    required = {
        k for k in keys if len(states) > 1 and any(st.get(k) != states[0].get(k) for st in states[1:])
    }
    return required | {"Kernel"}


def _abbrev_name(name: str) -> str:
    """Common.getNameAbbreviation: the non-lowercase characters (MACInstruction is blank)."""
    return "" if name == "MACInstruction" else "".join(c for c in name if not c.islower())


def _abbrev_value(key: str, value: Any) -> str:
    """Solution.getParameterValueAbbreviation."""
    if key == "ISA":
        return f"{value[0]}{value[1]}{value[2]:x}"
    if isinstance(value, str):
        return "".join(c for c in value if c.isupper())
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"n{abs(value)}"
    if isinstance(value, tuple):
        return "".join(str(v) for v in value)
    if isinstance(value, list):
        return "_".join(_abbrev_value(key, v) for v in value)
    if isinstance(value, dict):
        return "_".join(f"{p}{k}" for p, k in value.items())
    if isinstance(value, float):
        whole, frac = int(value), int(round(value * 100)) - int(value) * 100
        return f"{whole}p{frac:02d}" if frac > 0 else f"{whole}"
    raise TypeError(f"cannot abbreviate {key}={value!r}")


def kernel_name(s: Mapping[str, Any], pt: ProblemTypeInfo, required: set[str]) -> str:
    """Solution.getNameMin: problem type, macro tile, matrix instruction, store flag, then the required keys
    sorted."""
    name = f"{pt.name}_MT{s['MacroTile0']}x{s['MacroTile1']}x{s['DepthU']}_"
    if "MatrixInstM" in s:
        name += f"MI{s['MatrixInstM']}x{s['MatrixInstN']}x{s['MatrixInstK']}x{s['MatrixInstB']}_"
    if "LdcEqualsLdd" in s:
        name += "SE_" if s["LdcEqualsLdd"] else "SN_"
    parts = [f"{_abbrev_name(k)}{_abbrev_value(k, s[k])}" for k in sorted(s) if k in required and k[0] != "_"]
    return name + "_".join(parts)
