"""Is a candidate kernel a valid Tensile solution for a library on the arch's ISA?

The rules re-implement the checks Tensile 4.44 makes while deriving a solution
(ROCm/Tensile:Tensile/SolutionStructs.py ``Solution.parameterWrapper``,
``assignProblemIndependentDerivedParameters``, ``assignDerivedParameters``, ``setGlobalLoadVectorWidth``,
``setGlobalLoadTileDimClassic``, ``setGlobalLoadTileDimFractional``, ``checkAndAssignWaveSeparateGlobalRead``,
``ldsPaddingAuto``, ``getLdsNumElements[Aligned]``) for the ISA families of :mod:`oto.tensile.isa`: gfx9
without matrix instructions, RDNA2 (gfx10.3: wave32, dot-product layouts) and RDNA3/3.5 (gfx11: wave32 and
the WMMA kernels, ``MatrixInstruction: [16, 16, 16, 1]``), with the capabilities Tensile's probe gives the
ISA (its own, or its donor's where oto registers it). Added to them: the arch profile's limits and, for VALU
and WMMA kernels, a lower bound of the VGPRs KernelWriterAssembly allocates. Rejection reasons use Tensile's
own messages where it has one, so a verdict can be matched against a ``PrintSolutionRejectionReason`` log.
Parameters the candidate does not set take the defaults of Tensile's ``defaultBenchmarkCommonParameters``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from oto.files import loads_exact
from oto.gemm import HPA_TYPES, Library
from oto.tensile.defaults import subset
from oto.tensile.isa import SOURCE_CAPS, IsaCaps, isa_caps
from oto.tensile.params import CandidateError, canonical, extras, legal_value, mi_geometry

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
            "WavefrontSize",
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
            "SourceSwap",
            "WaveSeparateGlobalReadA",
            "WaveSeparateGlobalReadB",
            "MIArchVgpr",
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


_NO_ISA = (0, 0, 0)


@dataclass(frozen=True)
class Limits:
    """What of the arch profile decides legality: its limits and its ISA. Without a profile: gfx90c's, an ISA
    Tensile lacks that takes gfx900's assembler capabilities (the figures are arch_profiles/gfx90c.yaml's and
    the profile schema's defaults; tests/test_legality.py keeps this copy equal to them)."""

    lds_bytes: int = 65536
    max_workgroup_size: int = 1024
    vgprs_max: int = 256
    isa: tuple[int, int, int] = (9, 0, 12)
    caps_from: tuple[int, int, int] = (9, 0, 0)

    # The arch-profile fields legality depends on (oto.run.profile_views).
    PROFILE_FIELDS = (
        "max_lds_per_workgroup", "max_workgroup_size", "vgprs_per_lane_max", "isa", "tensile.caps_from"
    )  # fmt: skip

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any]) -> Limits:
        """The limits of a (validated) profile; its ``isa`` and ``tensile.caps_from`` name Tensile's ISAs
        (absent: the defaults). Raises :class:`oto.tensile.isa.UnknownIsa` for an ISA the rules do not
        model."""
        d = cls()
        isa = tuple(int(x) for x in profile.get("isa", d.isa))
        donor = (profile.get("tensile") or {}).get("caps_from")
        caps_from = _isa_of(donor) if donor else (d.caps_from if "isa" not in profile else isa)
        isa_caps(isa, caps_from)  # refuses an ISA the rules do not model, naming the field
        return cls(
            lds_bytes=int(profile.get("max_lds_per_workgroup", d.lds_bytes)),
            max_workgroup_size=int(profile.get("max_workgroup_size", d.max_workgroup_size)),
            vgprs_max=int(profile.get("vgprs_per_lane_max", d.vgprs_max)),
            isa=isa,
            caps_from=caps_from,
        )

    @property
    def caps(self) -> IsaCaps:
        """Tensile's capabilities of an assembly kernel for this ISA."""
        return isa_caps(self.isa, self.caps_from)


def _isa_of(name: str) -> tuple[int, int, int]:
    """``gfx1102`` -> (11, 0, 2), as Tensile's gfxArch reads it (the last two digits are hex)."""
    digits = str(name).removeprefix("gfx")
    return int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)


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
        self.regs = fam.a.registers  # DataType.numRegisters()
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
        # Tensile gives a HIP-source kernel ISA (0, 0, 0), whose capabilities are all false.
        self.caps = limits.caps if self.asm else SOURCE_CAPS
        self.mi = bool(self.s["MatrixInstruction"])

    def reject(self, msg: str) -> None:
        self.reasons.append(msg)

    def stop(self, msg: str) -> None:
        self.reasons.append(msg)
        raise _Stop

    @property
    def asm(self) -> bool:
        return self.s["KernelLanguage"] == "Assembly"

    @property
    def isa(self) -> tuple[int, int, int]:
        return self.caps.isa if self.asm else _NO_ISA


# Per-process memo of check() and resolve(): a job judges the same shipped solutions several times (the
# floors, the best-shipped shortlist, the baseline), each a full derivation. Keyed on the exact input
# (types included, so 1 and True or a list and a tuple stay apart); a value of any other type is not memoised.
_MEMO_SIZE = 8192
_checked: dict[tuple, Verdict] = {}
_resolved: dict[tuple, dict[str, Any]] = {}


class _NotMemoisable(Exception):
    pass


def _frozen(value: Any) -> Any:
    kind = type(value)
    if kind in (int, bool, str, float) or value is None:
        return (kind, value)
    if kind in (list, tuple):
        return (kind, tuple(_frozen(v) for v in value))
    if kind is dict or isinstance(value, MappingProxyType):
        return (dict, tuple((_frozen(k), _frozen(v)) for k, v in value.items()))
    raise _NotMemoisable


_SCALARS = frozenset((int, bool, str, float))


def _frozen_params(params: Mapping[str, Any]) -> tuple:
    """:func:`_frozen` of a parameter dict, its scalars and lists of integers (nearly every value) without a
    call per element; the rest as :func:`_frozen` has them (a tuple that starts with a type, never an int)."""
    items = []
    for k, v in params.items():
        kind = type(v)
        if kind in _SCALARS or v is None:
            items.append((k, kind, v))
        elif kind in (list, tuple) and all(type(x) is int for x in v):
            items.append((k, kind, tuple(v)))
        else:
            items.append((k, kind, _frozen(v)))
    return tuple(items)


def _memo_key(library: Library, params: Mapping[str, Any], limits: Limits | None) -> tuple | None:
    try:
        return (library, limits or Limits(), _frozen_params(params))
    except (_NotMemoisable, TypeError):  # TypeError: an unhashable library or limits
        return None


def _remember(memo: dict, key: tuple | None, value: Any) -> None:
    if key is not None:
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[key] = value


def _copied(params: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical candidate's copy no caller can change the memo through (its values are scalars, lists
    of scalars and mappings of scalars)."""
    return {
        k: list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
        for k, v in params.items()
    }


# A job's memo can start from an earlier job's answers (:func:`memo_table`, :func:`seed_memo`): the deck job
# judges its library's shipped kernels once and every later job of the library (emit's references each
# generation, finalize's floors and best-shipped shortlist, logic, compare) starts with them. The table names
# the code that answered (this module and the ones its rules read) and the limits; a table of other code is
# ignored, and one of other limits only fills keys no job of these limits asks for.
_RULE_MODULES = (
    "tensile/legality.py", "tensile/params.py", "tensile/isa.py", "tensile/defaults.py", "gemm.py"
)  # fmt: skip


@functools.cache
def rules_fingerprint() -> str:
    """sha256 of the source of the legality rules (this module and the ones they read)."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for name in _RULE_MODULES:
        digest.update((package / name).read_bytes())
    return digest.hexdigest()


def memo_table(library: Library, kernels: Iterable[Mapping[str, Any]], limits: Limits) -> dict[str, Any]:
    """What :func:`check` and :func:`resolve` answer for each of ``kernels`` (distinct ones once), as data
    :func:`seed_memo` gives a later process's memo."""
    rows, seen = [], set()
    for params in kernels:
        key = _memo_key(library, params, limits)
        if key is None or key in seen:
            continue
        seen.add(key)
        verdict = check(library, params, limits)
        row = {"params": dict(params), "valid": verdict.valid, "reasons": list(verdict.reasons)}
        row["derived"] = dict(verdict.derived)
        with contextlib.suppress(CandidateError):  # resolve() raises it again; nothing to remember
            row["resolved"] = resolve(library, params, limits)
        rows.append(row)
    return {"rules": rules_fingerprint(), "library": library.name, "limits": asdict(limits), "kernels": rows}


def seed_memo(table: Mapping[str, Any]) -> int:
    """Put a :func:`memo_table`'s answers in this process's memo; how many kernels (0: a table of other
    rules, or not one)."""
    try:
        if table.get("rules") != rules_fingerprint():
            return 0
        library = Library.parse(table["library"])
        limits = Limits(**{k: tuple(v) if isinstance(v, list) else v for k, v in table["limits"].items()})
        rows = list(table["kernels"])
        answers = []
        for row in rows:
            key = _memo_key(library, row["params"], limits)
            derived = MappingProxyType(dict(row["derived"]))
            verdict = Verdict(bool(row["valid"]), tuple(row["reasons"]), derived)
            answers.append((key, verdict, row.get("resolved")))
    except (AttributeError, KeyError, TypeError, ValueError):
        return 0
    for key, verdict, resolved in answers:
        _remember(_checked, key, verdict)
        if resolved is not None:
            _remember(_resolved, key, resolved)
    return len(answers)


_pending: list[Path] = []  # memo_table files to seed from at this process's next question
_seeded: set[tuple] = set()  # (file, its mtime and size) seeded already


def seed_memo_file(path: str | Path) -> None:
    """:func:`seed_memo` from a :func:`memo_table` file (exact JSON), at this process's next :func:`check` or
    :func:`resolve`: a job that reads a deck but asks no legality question pays nothing. A file missing,
    unreadable or seeded already is passed over."""
    _pending.append(Path(path))


def _seed_pending() -> None:
    while _pending:
        path = _pending.pop()
        with contextlib.suppress(OSError, ValueError, TypeError):
            stat = path.stat()
            mark = (str(path), stat.st_mtime_ns, stat.st_size)
            if mark not in _seeded:
                _seeded.add(mark)
                seed_memo(loads_exact(path.read_bytes()))


def check(library: Library, params: Mapping[str, Any], limits: Limits | None = None) -> Verdict:
    """Judge a candidate in oto's PARAMS vocabulary (values outside PARAMS are rejected by canonical())."""
    if _pending:
        _seed_pending()
    key = _memo_key(library, params, limits)
    hit = _checked.get(key) if key is not None else None
    if hit is not None:
        return hit
    try:
        cand = canonical(params)
    except CandidateError as e:
        verdict = Verdict(False, (str(e),), MappingProxyType({}))
    else:
        verdict = check_raw(library, cand, limits)
    _remember(_checked, key, verdict)
    return verdict


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
# A matrix-instruction kernel with ScheduleIterAlg 2 has its PrefetchLocalRead (1), InnerUnroll (DepthU / 16)
# and 1LDSBuffer (1) set by Tensile.
RESOLVED_KNOBS = ("LdsPadA", "LdsPadB", "1LDSBuffer", "StaggerU", "PrefetchLocalRead", "InnerUnroll")


def resolve(library: Library, params: Mapping[str, Any], limits: Limits | None = None) -> dict[str, Any]:
    """A candidate as Tensile resolves it: identity and duplicate detection use this form.

    The knobs of :data:`RESOLVED_KNOBS` take the value Tensile derives, and an extra parameter whose
    presence leaves the derived state unchanged (AssertStrideAEqual {0: 1} without initial strides, a
    LocalReadVectorWidth equal to VectorWidth, GlobalSplitUAlgorithm with GlobalSplitU 1...) is dropped.
    Raises CandidateError for names or values outside oto's vocabulary."""
    if _pending:
        _seed_pending()
    key = _memo_key(library, params, limits)
    hit = _resolved.get(key) if key is not None else None
    if hit is None:
        hit = _resolve(library, params, limits)
        _remember(_resolved, key, hit)
    return _copied(hit)


def _resolve(library: Library, params: Mapping[str, Any], limits: Limits | None) -> dict[str, Any]:
    cand = canonical(params)
    limits = limits or Limits()
    state = final_state(library, cand, limits)
    out = dict(cand)
    for key in RESOLVED_KNOBS:
        value = state.get(key, out[key])
        value = int(value) if isinstance(value, bool | int) else value
        if legal_value(key, value):  # a resolved value outside oto's vocabulary stays as given
            out[key] = value
    for key in extras(cand):
        without = {k: v for k, v in out.items() if k != key}
        if final_state(library, without, limits) == state:
            out = without
    return canonical(out)


def final_state(library: Library, params: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    """Tensile's solution state after its derivation (as far as these rules replay it), valid or not."""
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
    _matrix_instruction(run)
    _geometry(run)
    if run.reasons:  # assignDerivedParameters returns when the problem-independent part rejected
        return
    _kernel_kind(run)
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


# Common.py validWMMA: the one WMMA shape Tensile 4.44 writes (v_wmma_*_16x16x16_*).
_VALID_WMMA = ((16, 16, 16, 1),)


def _matrix_instruction(run: _Run) -> None:
    """Solution.parameterWrapper: a MatrixInstruction's block, wave group and wave tile."""
    s = run.s
    mi = s["MatrixInstruction"]
    if not mi:
        return
    if len(mi) != 4 or len(s["WorkGroup"]) != 3 or len(s["ThreadTile"]) != 2:
        run.stop(
            f"MatrixInstruction {list(mi)}: only the 4-element form with ThreadTile and WorkGroup is "
            "modelled by oto.tensile.legality"
        )
    if run.caps.has_wmma and tuple(mi) not in _VALID_WMMA:
        run.reject(f"MatrixInstruction {list(mi)} not valid for DataType {run.a_char}")
    if s["ThreadTile"][1] % mi[0]:
        run.reject(f"invalid ThreadTile1 {s['ThreadTile'][1]} for MatrixInstM {mi[0]}")
    geometry = mi_geometry(s)
    s.update(geometry)
    block = geometry["MIBlock"]
    s.update(MatrixInstM=block[0], MatrixInstN=block[1], MatrixInstK=block[2], MatrixInstB=block[3])
    s.update(MatrixInstBM=block[4], MatrixInstBN=block[5])
    s["MIInputPerThread"] = block[0] * block[2] * block[3] // s["WavefrontSize"]
    if run.caps.has_wmma and not run.caps.has_mfma:
        s["MIInputPerThread"] = block[2]
    # getMIOutputInfo: WMMA writes one element per register; anything else takes MFMA's 4
    s["MIOutputVectorWidth"] = 1 if run.caps.has_wmma and not run.caps.has_mfma else 4
    run.derived.update(MIInputPerThread=s["MIInputPerThread"], MIWaveTile0=geometry["MIWaveTile"][0])
    run.derived.update(MIWaveTile1=geometry["MIWaveTile"][1], MIWaveGroup0=geometry["MIWaveGroup"][0])
    run.derived["MIWaveGroup1"] = geometry["MIWaveGroup"][1]


def _geometry(run: _Run) -> None:
    """assignProblemIndependentDerivedParameters: thread tile, subgroups, threads and macro tile."""
    s, lim = run.s, run.limits
    wave = s["WavefrontSize"]
    if run.mi:
        if s["MatrixInstM"] == 4:
            run.stop("MatrixInstM 4 (MFMA 4x4 blocks) is not modelled by oto.tensile.legality")
        tt0, tt1, sg0, sg1 = s["ThreadTile0"], s["ThreadTile1"], s["SubGroup0"], s["SubGroup1"]
        lsu = s["WorkGroup"][2]
    else:
        if len(s["WorkGroup"]) != 3 or len(s["ThreadTile"]) != 2:
            run.stop("EnableMatrixInstruction undetermined")
        (tt0, tt1), (sg0, sg1, lsu) = s["ThreadTile"], s["WorkGroup"]
    s.update(ThreadTile0=tt0, ThreadTile1=tt1, SubGroup0=sg0, SubGroup1=sg1, LocalSplitU=lsu)
    nt = sg0 * sg1 * lsu
    s.update(NumThreads=nt, MacroTile0=sg0 * tt0, MacroTile1=sg1 * tt1)
    run.derived.update(NumThreads=nt, MacroTile0=sg0 * tt0, MacroTile1=sg1 * tt1, LocalSplitU=lsu)
    if nt % wave != 0:
        run.reject(f"size of WorkGroup {nt} should be multiple of WavefrontSize {wave}")
    if run.mi:
        if (sg0 * sg1) % wave != 0:
            run.reject(f"SubGroup0 {sg0} * SubGroup1 {sg1}should be multiple of WavefrontSize {wave}")
        if lsu > 4:
            run.reject(f"LocalSplitU {lsu} should not be larger than 4 with MatrixInstruction")
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


def _kernel_kind(run: _Run) -> None:
    """assignDerivedParameters up to the tensor mapping: ScheduleIterAlg 2, wave32, the matrix-instruction
    or VALU rules, and the wave-separate global reads."""
    s, caps = run.s, run.caps
    if s["ScheduleIterAlg"] == 2:
        if not run.mi:  # Tensile reads MatrixInstK, which a VALU kernel lacks, and raises
            run.stop("SIA2 and SIA3 only support MatrixInstruction")
        s.update(InnerUnroll=s["DepthU"] // s["MatrixInstK"], PrefetchLocalRead=1, **{"1LDSBuffer": 1})
    wave = s["WavefrontSize"]
    if wave == 32 and not caps.has_wave32:
        run.reject(f"WavefrontSize=32 not supported for ISA {run.isa}")
    if wave == 32 and not run.asm:
        run.reject("WavefrontSize=32 not yet supported for source kernels.")
    if run.mi:
        if not (caps.has_mfma or caps.has_wmma):
            run.stop(f"isa {run.isa} doesn't support matrix instruction")
        if run.a_char not in ("S", "D", "B", "H", "C", "Z", "I8"):
            run.stop(f"didn't support Matrix Instruction with type {run.a_char}")
        if caps.has_wmma and not caps.has_mfma and wave == 64:
            run.stop("WMMA only suppport on WGP mode, wave size = 32")
        if caps.has_wmma and run.regs >= 1:
            run.stop("WMMA only supports half, bf16 and i8 types")
    else:
        if not run.hpa and run.compute_bytes > run.bpe:  # a wider accumulator needs HPA
            run.reject(
                "For non-MI Kernel, if sizeof(ComputeDataType) > sizeof(DataType), "
                "Please add the following config:\n - HighPrecisionAccumulate: True"
            )
        if s["ThreadTile0"] > 16 or s["ThreadTile1"] > 16:
            run.reject("Invalid value for ThreadTile")
        if s["ScheduleIterAlg"] in (2, 3):
            run.reject("SIA2 and SIA3 only support MatrixInstruction")
    pgr = s["PrefetchGlobalRead"]
    if pgr not in (0, 1, 2):  # Common.py validParameters
        run.reject(f"PrefetchGlobalRead {pgr!r} is not one of validParameters [0, 1, 2]")
    # checkAndAssignWaveSeparateGlobalRead
    waves = s["NumThreads"] // wave
    for tc, mt in (("A", "MacroTile0"), ("B", "MacroTile1")):
        if not s[f"WaveSeparateGlobalRead{tc}"]:
            continue
        if s["FractionalLoad"] != 0:
            run.reject(
                f"didn't support WaveSeparateGlobalRead with FractionalLoad({int(s['FractionalLoad'])}) != 0"
            )
        if s["LocalDotLayout"] > 1:
            run.reject(
                f"didn't support WaveSeparateGlobalRead when LocalDotLayout({s['LocalDotLayout']}) > 1"
            )
        if run.tlu[tc] and s["DepthU"] > 0 and s["DepthU"] % waves != 0:
            run.reject(
                f"didn't support WaveSeparateGlobalRead when DepthU is not multiple of wave {s['DepthU']} "
                f"in TLU{tc}"
            )
        if not run.tlu[tc] and s[mt] % waves != 0:
            run.reject(
                "didn't support WaveSeparateGlobalRead when MacroTile is not multiple of wave "
                f"{s[mt]} in TLU{tc}"
            )


def _vector_widths(run: _Run) -> None:
    s = run.s
    if not (run.asm and s["BufferLoad"]):
        s["FractionalLoad"] = 0  # fractional loads rely on buffer-load clipping
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
    if run.mi:
        # one register of elements (half 2, int8 4), else 1; a wave tile it does not divide falls back to 1
        per_register = int(1 // run.regs) if run.regs < 1 else 1
        if s["VectorWidth"] < 1:
            s["VectorWidth"] = per_register
        vw_b = per_register
        if s["MIWaveTile"][0] % s["VectorWidth"]:
            if not s["SourceSwap"]:
                s["VectorWidth"] = 1
            else:
                run.stop(
                    f"MIWaveTile0({s['MIWaveTile'][0]}) should be multiple of VectorWidth({s['VectorWidth']})"
                )
        if s["MIWaveTile"][1] % vw_b:
            vw_b = 1
    else:
        # Default VW: one 16-byte vector, halved until it divides both thread-tile dimensions.
        if s["VectorWidth"] < 1:
            vw = 16 // run.bpe
            while s["ThreadTile0"] % vw or s["ThreadTile1"] % vw:
                vw //= 2
            s["VectorWidth"] = vw
        if s["ThreadTile0"] % s["VectorWidth"] or s["ThreadTile1"] % s["VectorWidth"]:
            run.stop(
                f"ThreadTile0 {s['ThreadTile0']} or ThreadTile1 {s['ThreadTile1']} "
                f"not a multiple of VectorWidth {s['VectorWidth']}"
            )
        vw_b = s["VectorWidth"]
    vw = s["VectorWidth"]
    s["VectorWidthB"] = vw_b
    run.derived["VectorWidth"] = vw
    if run.asm and run.a_char == "H":
        if not run.mi and vw < 2:
            run.reject("VectorWidth must be >= 2 for half")  # packed half math in the unroll loop
        if run.caps.has_ecc_half and not run.hpa and s["AssertFree0ElementMultiple"] % 2 != 0:
            run.reject("Archs with HasEccHalf require AF0EM%2==0 except for HPA kernels")
    if run.asm and run.a_char == "I8" and not run.mi and vw < 4:
        run.reject("VectorWidth must be >= 4 for Int8 or 8bitFloat")
    for tc in "AB":
        key = f"GlobalLoadVectorWidth{tc}"
        if s[key] == -1:
            # asm loads whole dwords: at least 4/bpe elements (2 for half)
            s[key] = max(vw, math.ceil(4 / run.bpe)) if run.asm else vw
        if s[key] * run.bpe > 16:
            run.stop(f"GlobalLoadVectorWidth{tc} * DataType.numBytes() > 16")
    if s["StoreVectorWidth"] == -1:
        s["StoreVectorWidth"] = vw if s["SourceSwap"] else (4 if run.bpe <= 4 else 16 // run.bpe)
    svw = s["StoreVectorWidth"]
    if run.mi:
        if s["SourceSwap"]:
            if vw % svw:
                run.stop(f"MFMA SourceSwap mode doesn't support vw({vw}) with svw({svw})")
        elif s["MIOutputVectorWidth"] % svw:
            run.stop(
                f"MFMA non-SourceSwap mode doesn't support miovw({s['MIOutputVectorWidth']}) with svw({svw})"
            )
    if vw * run.bpe > 16:
        run.stop("VWA * DataType.numBytes() > 16")
    if vw_b * run.bpe > 16:
        run.stop("VWB * DataType.numBytes() > 16")
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
        if run.a_char == "I8" and not run.mi:
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
            or run.mi
        )
        if not supported:
            run.stop(
                "GlobalSplitU only compatible with single, or asm and (half or mixed) precision, "
                "or EnableMatrixInstruction"
            )
        if s["GlobalSplitUAtomicAdd"]:
            if not run.caps.has_atomic_add:
                run.reject("GlobalSplitUAtomicAdd is not supported by this arch")
            if s["GlobalSplitUAlgorithm"] != "SingleBuffer":
                run.reject("GlobalSplitUAtomicAdd only compatible with SingleBuffer aloghrithm")
            if run.compute_char != "S":
                run.reject("GlobalSplitUAtomicAdd only compatible with single precision ComputeDataType")
            if not s["BufferStore"]:
                run.reject("GlobalSplitUAtomicAdd only compatible with BufferStore")
            if s["VectorAtomicWidth"] != 1:  # read before Tensile resolves -1
                run.reject("GlobalSplitUAtomicAdd only compatible with VectorAtomicWidth=1")
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
        if not run.mi and s["VectorWidth"] < 2:
            run.reject("Assembly half requires VectorWidth >= 2 for non-MFMA mode")
        if gsu > 1 and ga is None:
            if vaw < 2:
                run.reject("Assembly GSU half requires VectorWidth >= 2 (for 32-bit CAS)")
            if s["AssertFree0ElementMultiple"] < 2:
                run.reject("Assembly GSU half requires AF0EM>=2 (for atomics on edge tiles)")
            if run.mi and run.caps.has_wmma:
                run.stop("Half WMMA doesn't support single buffer GSU")


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


def fractional_load(
    threads: int, par: int, perp: int, glvw: int, min_glvw: int = 1
) -> tuple[int, int, int] | None:
    """setGlobalLoadTileDimFractional for one tensor: (GlobalLoadVectorWidth, LSC, LSP) of a load tile of
    ``par`` x ``perp`` elements whose rows may be partial (buffer loads clip the rest), or None. ``min_glvw``
    is 2 for half on an ISA with ECC-half rules."""
    grvw = glvw
    while grvw >= min_glvw:
        per_inst = threads * grvw
        lsc, lsp = (per_inst, 1) if par >= per_inst else (par, min(perp, per_inst // par))
        if lsc % grvw == 0:  # a vector must not wrap into the next row
            best, valid = grvw, lsc * lsp
            narrower = grvw // 2
            while narrower >= min_glvw and threads * narrower >= valid:  # the narrowest covering the row
                if lsc % narrower == 0:
                    best = narrower
                narrower //= 2
            return best, lsc, lsp
        grvw //= 2
    return None


def _glvw_fractional(run: _Run, tc: str, depth_u: int, glvw: int) -> bool:
    s = run.s
    par, perp = _load_shape(run, tc, depth_u)
    min_glvw = 2 if run.a_char == "H" and run.caps.has_ecc_half else 1
    found = fractional_load(s["NumThreads"], par, perp, glvw, min_glvw)
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
    if user < 0:
        depth_u, max_depth_u = 2, _MAX_DEPTHU
        waves = s["NumThreads"] // s["WavefrontSize"]
        for tc in "AB":  # wave-separate reads along the tile start at one row per wave
            if run.tlu[tc] and s[f"WaveSeparateGlobalRead{tc}"]:
                depth_u = max(depth_u, waves)
    else:
        depth_u, max_depth_u = user, user
    # The LDS depth used by the prefetch checks; Tensile resets it to 2 (not 2*DepthU/div) after a doubling.
    depth_lds = 2 if user < 0 else user // div
    if s["LocalReadVectorWidth"] == -1:
        s["LocalReadVectorWidth"] = s["MIInputPerThread"] if run.mi else s["VectorWidth"]
    if s["FractionalLoad"] and depth_u & (depth_u - 1):
        run.reject("FractionalLoad requires DepthU = power of 2")
    orig = {tc: s[f"GlobalLoadVectorWidth{tc}"] for tc in "AB"}
    while True:
        why: list[str] = []
        if s["InnerUnroll"] == 0:  # ScheduleIterAlg 2 with DepthU < 16: Tensile divides by zero
            run.stop("InnerUnroll 0 (DepthU / MatrixInstK with ScheduleIterAlg 2): LoopIters undefined")
        loop_iters = depth_lds // s["LocalSplitU"] // s["InnerUnroll"]
        if run.mi:
            loop_iters //= s["MatrixInstK"]
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
        ecc = not why and run.asm and run.a_char in ("H", "B") and run.caps.has_ecc_half
        if ecc and (s["GlobalLoadVectorWidthA"] <= 1 or s["GlobalLoadVectorWidthB"] <= 1):
            run.reject("HalfEcc requires GLVWA > 1")
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
    waves = s["NumThreads"] // s["WavefrontSize"]
    wave_separate = s[f"WaveSeparateGlobalRead{tc}"]
    if wave_separate:  # each wave reads its own share of the perpendicular rows
        perp = -(-perp // waves)
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
    if wave_separate:
        s[f"LSP{tc}"] = -(-s[f"LSP{tc}"] // waves)


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
    """getLdsNumElements[Aligned]: the tile plus one pad per padding interval (the block size per pad, else
    one unroll-major row, else one MacroTile-long row), aligned to 256 bytes."""
    s = run.s
    mt = s["MacroTile0" if tc == "A" else "MacroTile1"]
    n = mt * s["_DepthULds"]
    if s[f"LdsBlockSizePerPad{tc}"]:
        interval = s[f"LdsBlockSizePerPad{tc}"] // run.bpe
    else:
        interval = s["_DepthULds"] if s[f"UnrollMajorLDS{tc}"] else mt
    n += (n // interval) * s[f"LdsPad{tc}"]
    if aligned:
        align = 256 // run.bpe
        n = -(-n // align) * align
    return n


def _lds(run: _Run) -> None:
    s, lds_max, caps = run.s, run.limits.lds_bytes, run.caps
    for tc in "AB":
        s[f"UnrollMajorLDS{tc}"] = bool((s["TransposeLDS"] and not run.tlu[tc]) or s[f"UnrollMajorLDS{tc}"])
    if not run.asm:
        for tc in "AB":
            s[f"LdsPad{tc}"] = max(s[f"LdsPad{tc}"], 0)
            s[f"LdsBlockSizePerPad{tc}"] = max(s[f"LdsBlockSizePerPad{tc}"], 0)
        if s["LdsPadA"] != s["LdsPadB"]:
            run.stop("Source KernelLanguage only supports LdsPadA == LdsPadB")
    lrvw = s["LocalReadVectorWidth"]
    if run.mi:
        per_thread = s["MIInputPerThread"]
        if lrvw < per_thread:
            run.reject(f"LocalReadVectorWidth < {per_thread}")
        if lrvw > per_thread and not (s["UnrollMajorLDSA"] or s["UnrollMajorLDSB"]):
            run.reject("LocalReadVectorWidth require Transpose LDS")
    elif lrvw != s["VectorWidth"]:
        run.reject("LocalReadVectorWidth must equal VectorWidth for non MI kernels")
    _lds_padding(run)
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
    if s["SourceSwap"] and not run.mi:
        run.stop("SourceSwap only applies to MatrixInstruction kernels")
    if run.mi and caps.has_wmma:
        s["MIArchVgpr"] = True  # WMMA accumulates in architected VGPRs
    if s["MIArchVgpr"]:
        if not run.mi:
            run.stop("MIArchVgpr only support for MatrixInstruction")
        if not caps.has_wmma:  # no MFMA ISA is modelled, so no HasMFMA_vgpr either
            run.stop("MIArchVgpr is not supported by this arch")
    if lds * run.bpe > lds_max:
        run.stop(f"Kernel Uses {lds * run.bpe} > {lds_max} bytes of LDS")


def _lds_padding(run: _Run) -> None:
    """ldsPaddingAuto: resolve LdsPad and LdsBlockSizePerPad -1, then drop an automatic pad that would
    overflow LDS."""
    s, nbytes = run.s, run.bpe
    lrvw = s["LocalReadVectorWidth"]
    read_regs = lrvw * nbytes // 4
    if not run.caps.has_wmma and read_regs > 4:
        # Tensile's message leaves its %u unformatted
        run.reject("LocalReadVectorWidth=%u results in attemping to read LDS larger than b128, reject")
    auto: dict[str, bool] = {}
    for tc, mn in (("A", "M"), ("B", "N")):
        vw = s["VectorWidth"] if tc == "A" else s["VectorWidthB"]
        auto_block = s[f"LdsBlockSizePerPad{tc}"] == -1
        if auto_block:
            s[f"LdsBlockSizePerPad{tc}"] = 0
        auto[tc] = s[f"LdsPad{tc}"] == -1
        if auto[tc]:  # pad reads along the tile dimension only when they are not already contiguous
            s[f"LdsPad{tc}"] = 0 if run.tlu[tc] and not s[f"UnrollMajorLDS{tc}"] else vw
        if run.mi:
            _mi_lds_padding(run, tc, mn, vw, auto_block, auto[tc], read_regs)
        else:
            if s[f"UnrollMajorLDS{tc}"]:
                run.reject("didn't support UnrollMajorLDS in VALU mode yet")
            if s[f"LdsBlockSizePerPad{tc}"] != 0:
                run.reject("didn't support LdsBlockSizePerPad in VALU mode yet")
        if s[f"LdsPad{tc}"] < 0:
            run.stop(f"LdsPad{tc} {s[f'LdsPad{tc}']} < 0 (Tensile asserts)")
        if s[f"LdsPad{tc}"] == 0:
            s[f"LdsBlockSizePerPad{tc}"] = 0
    for unroll_major in (False, True):  # the tile-major tensors give up their pad first
        for tc in "AB":
            ab = _lds_elements(run, "A", True) + _lds_elements(run, "B", False)
            if s["1LDSBuffer"] != 1:
                ab *= 2
            if auto[tc] and ab * nbytes > run.limits.lds_bytes and s[f"UnrollMajorLDS{tc}"] == unroll_major:
                s[f"LdsPad{tc}"] = 0
                s[f"LdsBlockSizePerPad{tc}"] = 0


def _mi_lds_padding(
    run: _Run, tc: str, mn: str, vw: int, auto_block: bool, auto_pad: bool, read_regs: int
) -> None:
    """ldsPaddingAuto's matrix-instruction branch: pads and pad blocks against LDS bank conflicts."""
    s, nbytes, banks = run.s, run.bpe, 32
    depth = s["_DepthULds"]
    stride = 0
    if s[f"UnrollMajorLDS{tc}"]:
        line, comment = depth, "DepthULds"
        stride = line * vw
    else:
        line, comment = s["MacroTile0" if tc == "A" else "MacroTile1"], "MT0"
        if s["MIInputPerThread"] > 1:  # still padded against bank conflicts
            stride = line * s["LocalReadVectorWidth"]
    if line <= 0 or line & (line - 1):  # a line that is not a power of two pads every line instead
        stride = 0
        s[f"LdsBlockSizePerPad{tc}"] = 0
    if auto_block and stride > 0:
        s[f"LdsBlockSizePerPad{tc}"] = max(1 << (stride * nbytes - 1).bit_length(), 128)
    if s[f"LdsBlockSizePerPad{tc}"] and s[f"LdsBlockSizePerPad{tc}"] < line:
        run.reject(f"reject: {comment} {line} x bpe > LdsBlockSizePerPad{tc} {s[f'LdsBlockSizePerPad{tc}']}")
    if not auto_pad:
        return
    width = s[f"MatrixInst{mn}"] * s[f"MatrixInstB{mn}"]
    if tc == "B" and s["MatrixInstBM"] > 1:
        width = s["MatrixInstN"]
    line_bytes = 128 // nbytes
    if not s[f"UnrollMajorLDS{tc}"]:
        extra = (width * vw) % line_bytes if width < banks and width * vw < line_bytes else 0
        if extra:
            s[f"LdsPad{tc}"] = (line_bytes + extra - stride % line_bytes) % line_bytes
        return
    pad = s["LocalReadVectorWidth"]
    if width < banks and read_regs in (1, 4):  # the next M/N row must start on another bank
        pad *= banks // width
    pad = max(s[f"GlobalLoadVectorWidth{tc}"], pad)
    if depth > 0 and depth & (depth - 1):  # keep the unroll part of a row a multiple of 128 bytes
        extra = (-(-line_bytes // depth) * depth) % line_bytes
        pad = min((extra + pad) % line_bytes, (extra - pad) % line_bytes)
    s[f"LdsPad{tc}"] = pad


def _loop_iters(run: _Run) -> None:
    s = run.s
    lsu, du = s["LocalSplitU"], s["_DepthULds"]
    unroll = du // lsu
    if unroll * lsu != du:
        run.reject(f"DepthU {du} is not a multiple of LocalSplitU {lsu}")
    if not run.asm and s["InnerUnroll"] != 1:
        run.reject("InnerUnroll only supported on assembly")
    unroll //= s["InnerUnroll"]
    _local_dot_layout(run)
    loop_iters = unroll // s["MatrixInstK"] if run.mi else unroll
    run.derived.update(LoopUnroll=unroll, LoopIters=loop_iters)
    if loop_iters < 1:
        run.stop("LoopIters need to greater than 0")
    plr = s["PrefetchLocalRead"]
    if plr >= 2 * loop_iters:
        run.reject(f"Reject since PrefetchLocalRead {plr} >= 2x LoopIters {loop_iters}")
    if plr % loop_iters > 1:
        run.reject(f"PrefetchLocalRead: {plr}, LoopIters: {loop_iters} performance is low")
    lrvw, per_thread = s["LocalReadVectorWidth"], s.get("MIInputPerThread", 0)
    if run.mi and plr > 0:
        # a wide local read covers several iterations: they must divide the loop and leave some to prefetch
        multiple = lrvw // per_thread
        if multiple == 0:
            run.stop(f"LocalReadVectorWidth {lrvw} is less than MIInput")
        if loop_iters % multiple:
            run.reject(
                f"LocalReadVectorWidth {lrvw} cannot be distributed evenly, LoopIters {loop_iters} should be "
                f"divisible by WLR-Multiple {multiple}"
            )
        ahead = plr % loop_iters
        if ahead != 0 and loop_iters - ahead * multiple <= 0:
            run.reject(
                f"with PrefetchLocalRead {plr} LoopIters {loop_iters} LocalReadVectorWidth {lrvw}, not "
                f"enough LoopIters to prefetch {ahead}x{multiple} iterations, "
            )
        if plr > 1 and ahead == 0:
            run.reject(f"not good performance with PrefetchLocalRead {plr} LoopIters {loop_iters}")
    if s["TransposeLDS"] == 1:
        if not run.mi:
            run.reject("TransposeLds Supports only in MatrixInstruction=1")
        if run.tlu["A"] and run.tlu["B"]:
            run.reject("TransposeLds requires TLUA=0 or TLUB=0")
    if run.mi and lrvw > per_thread:
        iu = s["InnerUnroll"]
        if not (plr >= loop_iters and iu == 1) and not iu >= lrvw // per_thread:
            run.reject(
                f"wider localRead only support (PrefetchLocalRead {plr} >= LoopIters {loop_iters}) or "
                f"(InnerUnroll {iu} > LocalReadxN)"
            )
    if s["DepthULdsDivisor"] > 1:
        _split_lds(run)


def _local_dot_layout(run: _Run) -> None:
    """LocalDotLayout > 1: the VALU dot-product kernels (v_dot2 for half HPA, v_dot4 for int8 HPA)."""
    s = run.s
    ldl = s["LocalDotLayout"]
    if ldl <= 1 or not run.asm:
        return
    if run.mi:
        run.reject("doesn't support LocalDotLayout > 1 in MFMA mode")
        return
    if run.a_char == "I8":
        if ldl != 4 or not run.hpa:
            run.stop("Only support Int8 HPA and LocalDotLayout 4")
    elif run.a_char == "H":
        if ldl > 2:
            run.stop("doesn't support FP16 with LocalDotLayout > 2")
        if ldl == 2 and not run.hpa:
            run.stop("doesn't support non HPA FP16 with LocalDotLayout == 2")
    else:
        run.stop(f"doesn't support LocalDotLayout with type {run.a_char}")
    if ldl != s["InnerUnroll"]:
        run.stop("only support LocalDotLayout = InnerUnroll when LocalDotLayout > 1")
    if s["LSPA"] % ldl or s["LSPB"] % ldl:
        run.stop("LSPA/B should be multiple of LocalDotLayout")


def _split_lds(run: _Run) -> None:
    """DepthULdsDivisor > 1 (split LDS)."""
    s = run.s
    if s["PrefetchGlobalRead"] == 2:
        run.reject("DepthULdsDivisor > 1 does not support PrefetchGlobalRead=2")
    if s["ScheduleIterAlg"] != 3:
        run.reject("DepthULdsDivisor > 1 does not support ScheduleIterAlg other than 3")
    if run.tlu["A"] or run.tlu["B"] or not (s["UnrollMajorLDSA"] and s["UnrollMajorLDSB"]):
        run.reject("DepthULdsDivisor > 1: Only works with TN problem layout and UnrollMajorLDS")
    if s["PrefetchGlobalRead"] == 1 and s["PrefetchLocalRead"] == 0:
        run.reject("PGR1 + PLR0 in SplitLDS requires double G2L buffer which is yet to be implemented")
    for tc in "AB":
        glvw = s[f"GlobalLoadVectorWidth{tc}"]
        if run.regs * glvw < s["DepthULdsDivisor"]:
            run.reject(
                f"SplitLDS requires wider GlobalLoadVectorWidth{tc}; needs RegisterPerElem ({run.regs:f}) * "
                f"GLVW{tc} ({glvw}) >= DepthULdsDivisor ({s['DepthULdsDivisor']})"
            )


def _partial_tile_loads(run: _Run) -> None:
    s = run.s
    buffer_load = run.asm and s["BufferLoad"]
    no_partial = {}
    for tc, af in (("A", "AssertFree0ElementMultiple"), ("B", "AssertFree1ElementMultiple")):
        # A tile edge can split a vector along the free dim only when the free dim is the coalesced one.
        no_partial[tc] = not run.tlu[tc] or s[af] % s[f"GlobalLoadVectorWidth{tc}"] == 0
    if run.mi:
        glvw_b = s["GlobalLoadVectorWidthB"]
        if not no_partial["B"] and s["MatrixInstN"] % glvw_b:
            run.reject(f"MatrixInstN {s['MatrixInstN']} % GlobalLoadVectorWidthB {glvw_b} must be 0")
    else:
        for tc in "AB":
            glvw = s[f"GlobalLoadVectorWidth{tc}"]
            # The shift-pointer edge handling needs vectors of VW or single elements.
            if (not buffer_load or not no_partial[tc]) and glvw > 1 and glvw != s["VectorWidth"]:
                run.reject(
                    f"GlobalLoadVectorWidth{tc} {glvw} must be == VectorWidth {s['VectorWidth']} or == 1"
                )
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
    if not run.asm or run.mi or run.a_char not in ("H", "B") or s.get("_GlobalAccumulation") is not None:
        return
    vectors = run.derived["NumElementsPerThread"] // run.derived["GlobalWriteVectorWidth"]
    if vectors < 2:
        run.reject(
            f"{vectors} store vector(s) per thread: half requires at least two elements per batch "
            "(KernelWriterAssembly overflowedResources 3)"
        )


def _vgpr_bound(run: _Run) -> None:
    """KernelWriterAssembly allocates at least accumulators + PLR+1 A/B fragments + global-read buffers;
    more than the VGPR limit (error 1) or than one workgroup per CU can hold (error 4) fails generation.
    VALU kernels and WMMA kernels (``MIArchVgpr``: the accumulators are architected VGPRs, 4 bytes an element
    whatever the compute type, KernelWriterAssembly's ``bpeCinternal``; a fragment is ``MIWaveTile`` x
    ``MIInputPerThread`` elements). An MFMA kernel accumulates in AccVGPRs and is not bounded here."""
    s = run.s
    if not run.asm:
        return  # the HIP compiler spills instead of failing
    if run.mi and not s.get("MIArchVgpr"):
        return
    plr = min(s["PrefetchLocalRead"], run.derived["LoopIters"] - 1)
    blocks = (1 + plr) * s["InnerUnroll"]
    acc = s["ThreadTile0"] * s["ThreadTile1"] * (4 if run.mi else run.compute_bytes) // 4
    frag = g2l = 0
    for i, (tc, tt) in enumerate((("A", s["ThreadTile0"]), ("B", s["ThreadTile1"]))):
        if run.mi:
            frag += s["MIWaveTile"][i] * s["MIInputPerThread"] * run.bpe // 4 * blocks
        else:  # bf16 HPA unpacks fragments to one element per register
            frag += (tt if run.a_char == "B" and run.hpa else tt * run.bpe // 4) * blocks
        loads = s[f"NumLoadsCoalesced{tc}"] * s[f"NumLoadsPerpendicular{tc}"]
        g2l += -(-loads * s[f"GlobalLoadVectorWidth{tc}"] * run.bpe // 4)  # ceil: registers hold whole dwords
    need = acc + frag + g2l
    run.derived["vgpr_lower_bound"] = need
    limit = min(run.limits.vgprs_max, _VGPRS_PER_CU // s["NumThreads"])
    if need > limit:
        run.reject(f"needs at least {need} VGPRs > {limit} (KernelWriterAssembly overflowedResources)")
