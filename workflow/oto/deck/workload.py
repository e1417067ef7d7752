"""Workload decks: the GEMMs an application runs, read from the files its own tools already record, as the
Tensile library (problem type) and size each one runs at, with a weight.

Formats, and the upstream source each parser follows:

* **PyTorch TunableOp**, the untuned file (``PYTORCH_TUNABLEOP_RECORD_UNTUNED=1`` writes
  ``tunableop_untuned<device>.csv``: ``op_signature,params_signature[,BLAS_PARAMS: ...]``) and the results
  file (``tunableop_results<device>.csv``: ``Validator,KEY,VALUE`` lines, then
  ``op_sig,param_sig,solution[,time_ms][,BLAS_PARAMS: ...]``). pytorch/pytorch
  ``aten/src/ATen/cuda/tunable/Tunable.cpp`` (``TuningResultsManager::RecordUntuned`` writes each unique
  GEMM once per process to a file opened for appending; ``TuningContext::ReadFile``; the validators
  ``PT_VERSION``, ``ROCM_VERSION`` in older files, ``HIP_VERSION`` in newer ones, ``GCN_ARCH_NAME``,
  ``ROCBLAS_VERSION``, ``HIPBLASLT_VERSION``), ``aten/src/ATen/cuda/tunable/GemmCommon.h`` at 004157a20fdb
  (``GemmParams::Signature`` ``%c%c_%ld_%ld_%ld_ld_%ld_%ld_%ld``, ``GemmStridedBatchedParams``
  ``..._B_%ld_ld_...``, ``ScaledGemmParams`` ``..._rw_%d_bias_%s``, ``BLASSignature``), the older
  ``GemmCommon.h`` without leading dimensions (``%c%c_%ld_%ld_%ld`` and ``..._B_%ld``, the form of the
  docstring example ``GemmTunableOp_float_NT,nt_25088_4096_64`` under ``Validator,PT_VERSION,2.2.0``),
  ``TunableGemm.h`` at 01ef48ec0d68 (``GemmTunableOp_<type>_<AB>``, ``TypeName``) and the offline-tuning
  reader ``torch/cuda/tunable.py`` ``_process_single_offline_gemm`` at 021dc49c119c. The signatures are the
  BLAS call (column-major): ``transa transb m n k lda ldb ldc`` exactly as ``rocblas_gemm_ex`` receives them
  (``tunable.py`` swaps them back to torch's row-major view, oto does not). PyTorch calls rocBLAS with the
  compute types of ``ComputeTypeFor``: f32 for Half and BFloat16.
* **rocBLAS logs**: ``ROCBLAS_LAYER=2`` bench lines (``./rocblas-bench -f gemm -r f32_r --transposeA N ...``,
  ``-f gemm_ex --a_type ... --compute_type ...``, the batched and strided-batched forms, ``--api 1`` for the
  64-bit API, ``--atomics_not_allowed``, and the ``# ...`` comment the kernel-selection layer appends) and
  ``ROCBLAS_LAYER=4`` profile YAML (``- { rocblas_function: "rocblas_sgemm", atomics_mode: 0, transA: 'N',
  ..., call_count: 3 }``, one entry per unique call; alpha and beta as Tensile's value categories; the input
  ``rocblas-gemm-tune --yaml`` takes). ROCm/rocBLAS at b520bc83fa67:
  ``library/src/blas3/rocblas_gemm_imp.hpp``, ``rocblas_gemm_batched_imp.hpp``,
  ``rocblas_gemm_strided_batched_imp.hpp``,
  ``library/src/blas_ex/rocblas_gemm_ex_imp.hpp``, ``rocblas_gemm_strided_batched_ex_imp.hpp`` (what each
  ``log_bench``/``log_profile`` call writes), ``library/src/include/logging.hpp`` (``argument_profile``,
  ``log_bench_scalar_value``: ``--alpha 1 --alphai 2``), ``library/src/include/utility.hpp``
  (``value_category``: 0, 1, -1 or 2).

How rocBLAS picks the Tensile problem (ROCm/rocBLAS b520bc83 ``library/src/tensile_host.cpp``
``ConstructTensileProblem``, ``library/src/blas_ex/rocblas_gemm_ex_kernels.cpp`` ``gemm_ex_typecasting``
dispatch): A's and B's transposes give the index pattern (``Ailk``/``Alik``, ``Bljk``/``Bjlk``); a conjugate
transpose conjugates only complex types (``AlikC``), for real types it is a transpose; the data types give the
family, high-precision accumulation exactly when the compute type is wider than the input (f16 in and out
with f32 compute: ``HHS_BH``; f16 in, f32 out: ``HSS_BH``; bf16: ``BBS_BH``/``BSS_BH``; int8 with int32:
``I8II_BH``); the pointer-array batched calls set ``StridedBatched: false`` (Tensile's general-batched
``_GB`` libraries), every other call is strided batched. The size is Tensile's FreeSizeA = m, FreeSizeB = n,
batch = batch_count, BoundSize = k, with no swap; ``alpha == 0`` makes rocBLAS run the call as K = 0 (only C
is scaled, so no GEMM kernel to tune). Strides, leading dimensions and beta do not change the library: they
are kept for the override file (:mod:`oto.deck.override`), which matches them exactly.

Weights: a TunableOp untuned line counts once per recorded occurrence (PyTorch writes a GEMM once per
process, and appends across runs, so the count is how many recordings saw it); a results line counts once;
a bench line is one call; a profile entry counts its ``call_count``.

Nothing is dropped silently: a GEMM with no Tensile library is ``uncovered`` with the reason, other BLAS calls
are ``skipped`` and counted by function, and every line that could not be read is a ``problem`` naming the
file and line (and the PyTorch version the file's validators give).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oto.gemm import FamilyCodeError, Library
from oto.tensile.logic_reader import size_problem

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Size = tuple[int, int, int, int]  # M, N, batch, K: Tensile's FreeSizeA, FreeSizeB, batch, BoundSize

FORMATS = ("auto", "tunableop", "rocblas-log")
# Where a run's jobs keep parsed workload files (oto.run.context.stage sets it): every deck job of a run reads
# the same file, and a 50,000-line rocBLAS log took 16 s to parse in each of them. None: parse every time.
CACHE: Path | None = None


class WorkloadError(ValueError):
    """A workload file cannot be read at all; the message names the file."""


# ---- the common record -----------------------------------------------------------------------------------

# rocBLAS's supported (input, output, compute) types and the Tensile family each runs on
# (rocblas_gemm_ex_kernels.cpp's dispatch; tensile_host.cpp: HPA iff the compute type is wider).
ROCBLAS_FAMILIES = {
    ("f64_r", "f64_r", "f64_r"): "DB",
    ("f32_r", "f32_r", "f32_r"): "SB",
    ("f16_r", "f16_r", "f16_r"): "HB",
    ("f16_r", "f16_r", "f32_r"): "HHS_BH",
    ("f16_r", "f32_r", "f32_r"): "HSS_BH",
    ("bf16_r", "bf16_r", "f32_r"): "BBS_BH",
    ("bf16_r", "f32_r", "f32_r"): "BSS_BH",
    ("i8_r", "i32_r", "i32_r"): "I8II_BH",
    ("f32_c", "f32_c", "f32_c"): "CB",
    ("f64_c", "f64_c", "f64_c"): "ZB",
}
# rocblas-bench and rocBLAS's own override parser also take the one-letter precisions.
_PRECISION_ALIASES = {"s": "f32_r", "d": "f64_r", "h": "f16_r", "c": "f32_c", "z": "f64_c", "bf16": "bf16_r"}
F8_REASON = "8-bit float GEMMs run on hipBLASLt; rocBLAS's Tensile libraries have none"


def rocblas_type(name: str) -> str:
    return _PRECISION_ALIASES.get(name.strip().lower(), name.strip().lower())


def value_category(real: float, imag: float = 0.0) -> float:
    """rocBLAS's ``value_category``: how Tensile sees alpha and beta (0, 1, -1, or 2 for any other value)."""
    if imag == 0.0 and real in (0.0, 1.0, -1.0):
        return float(real)
    return 2.0


@dataclass(frozen=True)
class GemmCall:
    """One GEMM as rocBLAS receives it (BLAS column-major terms). A field the recorder does not write is None
    (TunableOp names neither the rocBLAS function nor, before BLAS_PARAMS, beta and the strides)."""

    function: str | None  # gemm, gemm_ex, gemm_batched(_ex), gemm_strided_batched(_ex); None: not recorded
    batching: str  # none | strided | pointers (pointer arrays: Tensile's general-batched _GB libraries)
    trans_a: str  # N, T or C
    trans_b: str
    m: int
    n: int
    k: int
    batch: int
    a_type: str  # rocBLAS datatype names: f32_r, f16_r, bf16_r, f32_c...
    c_type: str
    compute_type: str
    lda: int | None = None
    ldb: int | None = None
    ldc: int | None = None
    stride_a: int | None = None
    stride_b: int | None = None
    stride_c: int | None = None
    alpha: float | None = None  # value category (0, 1, -1, 2)
    beta: float | None = None

    @property
    def size(self) -> Size:
        return (self.m, self.n, self.batch, self.k)

    def describe(self) -> str:
        batch = f" batch {self.batch}" if self.batching != "none" else ""
        fn = self.function or {"none": "gemm", "strided": "strided batched gemm"}.get(self.batching, "gemm")
        return (
            f"{fn} {self.trans_a}{self.trans_b} {self.a_type}/{self.c_type}/{self.compute_type} "
            f"M {self.m} N {self.n} K {self.k}{batch}"
        )


def tensile_library(call: GemmCall) -> tuple[str | None, str]:
    """(Tensile problem-type name, '') of the library rocBLAS runs a call on, or (None, why there is none)."""
    types = (call.a_type, call.c_type, call.compute_type)
    family = ROCBLAS_FAMILIES.get(types)
    if family is None:
        if call.compute_type.startswith("xf32"):
            why = "xf32 (TF32) compute selects F32XdlMathOp kernels, which only MI300-class GPUs have"
        elif any(t.startswith(("f8", "bf8")) for t in types):
            why = F8_REASON
        else:
            why = f"rocBLAS has no GEMM for input {types[0]}, output {types[1]}, compute {types[2]}"
        return None, why
    complex_ = call.a_type.endswith("_c")
    a = ("Alik" if call.trans_a in "TC" else "Ailk") + ("C" if complex_ and call.trans_a == "C" else "")
    b = ("Bjlk" if call.trans_b in "TC" else "Bljk") + ("C" if complex_ and call.trans_b == "C" else "")
    name = f"Cijk_{a}_{b}_{family}{'_GB' if call.batching == 'pointers' else ''}"
    try:
        return Library.parse(name).name, ""
    except FamilyCodeError as exc:  # a table entry gemm.py cannot name: a bug here, said plainly
        return None, str(exc)


@dataclass
class WorkloadGemm:
    """A GEMM of the workload: the call, its library and its weight (the first line it was read from)."""

    call: GemmCall
    library: str
    weight: int
    where: str

    @property
    def size(self) -> Size:
        return self.call.size


@dataclass
class Uncovered:
    """A GEMM of the workload no library serves, and why; ``library`` when it has one the deck lacks."""

    what: str
    reason: str
    weight: int
    where: str
    library: str | None = None


@dataclass
class Workload:
    path: Path
    format: str  # tunableop-untuned | tunableop-results | rocblas-bench | rocblas-profile
    gemms: list[WorkloadGemm] = field(default_factory=list)
    uncovered: list[Uncovered] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # other calls (or lines), by function: how many
    problems: list[str] = field(default_factory=list)  # "file:line: why" for every line not read
    validators: dict[str, str] = field(default_factory=dict)  # TunableOp results: key -> value
    notes: list[str] = field(default_factory=list)

    @property
    def weight(self) -> int:
        return sum(g.weight for g in self.gemms)

    def library_weights(self) -> dict[str, dict[Size, int]]:
        """``{library: {(M, N, B, K): weight}}``: calls that differ only in strides or beta share a size."""
        out: dict[str, dict[Size, int]] = {}
        for g in self.gemms:
            sizes = out.setdefault(g.library, {})
            sizes[g.size] = sizes.get(g.size, 0) + g.weight
        return {lib: dict(sorted(sizes.items())) for lib, sizes in sorted(out.items())}

    def covered_by(self, libraries: Iterable[str]) -> tuple[dict[str, dict[Size, int]], list[Uncovered]]:
        """The library weights a set of libraries serves, and every other GEMM as uncovered (with the reason):
        this workload's own uncovered ones plus those whose library is not in the set."""
        have = set(libraries)
        families = sorted({Library.parse(n).family.code for n in have}) if have else []
        covered = {lib: w for lib, w in self.library_weights().items() if lib in have}
        missing = list(self.uncovered)
        for g in self.gemms:
            if g.library not in have:
                missing.append(
                    Uncovered(
                        g.call.describe(),
                        f"no library {g.library} (these libraries have family codes {', '.join(families)})",
                        g.weight,
                        g.where,
                        g.library,
                    )
                )
        return covered, missing

    def summary(self, uncovered: bool = True) -> str:
        lines = [
            f"{self.path.name}: {self.format}, {len(self.gemms)} GEMMs ({self.weight} weight) in "
            f"{len(self.library_weights())} libraries"
        ]
        if self.validators.get("PT_VERSION"):
            lines[0] += f" (PyTorch {self.validators['PT_VERSION']})"
        lines += [f"  note: {n}" for n in self.notes]
        for u in self.uncovered if uncovered else []:
            lines.append(f"  uncovered: {u.where}: {u.what} (weight {u.weight}): {u.reason}")
        if self.skipped:
            other = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items()))
            lines.append(f"  skipped (not a GEMM): {other}")
        lines += [f"  not read: {p}" for p in self.problems]
        return "\n".join(lines)


class _Collector:
    """Accumulates one file's GEMMs (same call: weights add up), uncovered calls, skips and problems."""

    def __init__(self, path: Path, fmt: str):
        self.workload = Workload(path, fmt)
        self._index: dict[GemmCall, WorkloadGemm] = {}
        self._uncovered: dict[tuple[str, str], Uncovered] = {}
        self.skipped: Counter[str] = Counter()

    def where(self, lineno: int) -> str:
        return f"{self.workload.path.name}:{lineno}"

    def problem(self, lineno: int, why: str) -> None:
        self.workload.problems.append(f"{self.where(lineno)}: {why}")

    def uncovered(self, lineno: int, what: str, reason: str, weight: int) -> None:
        key = (what, reason)
        if key in self._uncovered:
            self._uncovered[key].weight += weight
        else:
            self._uncovered[key] = Uncovered(what, reason, weight, self.where(lineno))

    def add(self, lineno: int, call: GemmCall, weight: int) -> None:
        zero = _zero_size(call)
        why = "" if zero else _call_problem(call)
        if why:
            self.problem(lineno, f"{call.describe()}: {why}")
            return
        if zero or call.alpha == 0.0:
            alpha = "alpha = 0: rocBLAS runs it as K = 0 (C is only scaled by beta; no GEMM kernel runs)"
            self.uncovered(lineno, call.describe(), zero or alpha, weight)
            return
        library, why = tensile_library(call)
        if library is None:
            self.uncovered(lineno, call.describe(), why, weight)
        elif call in self._index:
            self._index[call].weight += weight
        else:
            self._index[call] = WorkloadGemm(call, library, weight, self.where(lineno))

    def done(self) -> Workload:
        w = self.workload
        w.gemms = list(self._index.values())
        w.uncovered = list(self._uncovered.values())
        w.skipped = dict(sorted(self.skipped.items()))
        return w


def _zero_size(call: GemmCall) -> str:
    """Why rocBLAS runs no GEMM kernel for a call with a zero size ('' if it has none, or a negative one,
    which rocBLAS rejects): its logs hold such calls, made before it returns."""
    sizes = (("M", call.m), ("N", call.n), ("batch_count", call.batch), ("K", call.k))
    if any(v < 0 for _, v in sizes):
        return ""
    for name, v in sizes[:3]:
        if v == 0:
            return f"{name} = 0: rocBLAS returns at once (nothing to compute; no kernel runs)"
    return "K = 0: C is only scaled by beta (no GEMM kernel runs)" if call.k == 0 else ""


def _call_problem(call: GemmCall) -> str:
    """Why rocBLAS would not run this call as a GEMM ('' if it would): sizes, leading dimensions, types."""
    for name, v in (("M", call.m), ("N", call.n), ("batch_count", call.batch), ("K", call.k)):
        if v < 0:
            return f"{name} = {v}: a GEMM size is not negative (rocBLAS rejects the call)"
    why = size_problem([call.m, call.n, call.batch, call.k])
    if why:
        return why
    if call.trans_a not in ("N", "T", "C") or call.trans_b not in ("N", "T", "C"):
        return f"transposes {call.trans_a!r}, {call.trans_b!r} are not N, T or C"
    rows_a = call.m if call.trans_a == "N" else call.k
    rows_b = call.k if call.trans_b == "N" else call.n
    for name, ld, rows in (("lda", call.lda, rows_a), ("ldb", call.ldb, rows_b), ("ldc", call.ldc, call.m)):
        if ld is not None and ld < rows:
            return f"{name} = {ld} < {rows} rows: rocBLAS rejects the call (rocblas_status_invalid_size)"
    for name, s in (("stride_a", call.stride_a), ("stride_b", call.stride_b), ("stride_c", call.stride_c)):
        if s is not None and s < 0:
            return f"{name} = {s} is negative"
    return ""


def _lines(text: str) -> tuple[list[str], int | None]:
    """The file's lines and the number of a last line the writer never finished (None when it ends with a
    newline). PyTorch and rocBLAS end every line they write with one, so a last line without it was cut off
    by a crash or a full disk and is never read, even where what is left happens to parse."""
    lines = text.splitlines()
    cut = len(lines) if lines and not text.endswith(("\n", "\r")) else None
    return lines, cut


TRUNCATED = "truncated: the file ends in the middle of this line (the writer stopped), so it is not read"


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror}") from exc
    if b"\0" in raw[:65536]:
        raise WorkloadError(f"{path}: not a text file (a workload is a CSV, log or YAML text file)")
    return raw.decode("utf-8", errors="replace")


# ---- PyTorch TunableOp -----------------------------------------------------------------------------------

# TypeName<T> (TunableGemm.h) and tunable.py's dtype_dict -> rocBLAS (input, output, compute) types.
TUNABLEOP_TYPES = {
    "float": ("f32_r", "f32_r", "f32_r"),
    "double": ("f64_r", "f64_r", "f64_r"),
    "Half": ("f16_r", "f16_r", "f32_r"),
    "BFloat16": ("bf16_r", "bf16_r", "f32_r"),
    "c10::complex<float>": ("f32_c", "f32_c", "f32_c"),
    "c10::complex<double>": ("f64_c", "f64_c", "f64_c"),
    "tf32": ("f32_r", "f32_r", "xf32_r"),
}
TUNABLEOP_OPS = (
    "GemmTunableOp",
    "GemmStridedBatchedTunableOp",
    "GemmAndBiasTunableOp",
    "ScaledGemmTunableOp",
)
_OP_SIG = re.compile(r"^(?P<op>[A-Za-z]+TunableOp)_(?P<types>.+)_(?P<layout>[NT]{2})$")
_PARAM_SIG = re.compile(
    r"^(?P<ta>[ntcNTC])(?P<tb>[ntcNTC])_(?P<m>-?\d+)_(?P<n>-?\d+)_(?P<k>-?\d+)"
    r"(?:_B_(?P<b>-?\d+))?(?:_ld_(?P<lda>-?\d+)_(?P<ldb>-?\d+)_(?P<ldc>-?\d+))?(?P<rest>_.*)?$"
)
_SCALED_REST = re.compile(r"^(?:_rw_[01])?(?:_bias_\w+)?$")
_BLAS_PAIR = re.compile(r"(\w+):\s*(\([^)]*\)|[^,{}]+)")
_PARAM_FORMS = "tt_M_N_K, tt_M_N_K_ld_LDA_LDB_LDC, tt_M_N_K_B_BATCH or tt_M_N_K_B_BATCH_ld_LDA_LDB_LDC"
BLAS_MARK = ",BLAS_PARAMS: "


def _blas_params(text: str) -> dict[str, str]:
    """``- { function: matmul, M: 512, ..., alpha: 1.0000, ... }`` (GemmCommon.h ``BLASSignature``) as
    strings; a regex, not YAML: a complex alpha ``(1.0000, 0.0000)`` holds a comma."""
    return {k: v.strip() for k, v in _BLAS_PAIR.findall(text)}


def _number(value: str) -> tuple[float, float]:
    """A BLAS_PARAMS scalar: ``1.0000`` or the complex ``(1.0000, 0.0000)``."""
    value = value.strip()
    if value.startswith("("):
        re_, im = value.strip("()").split(",")
        return float(re_), float(im)
    return float(value), 0.0


def read_tunableop(path: str | Path) -> Workload:
    """A TunableOp untuned or results file (both forms, every PyTorch version's signatures, see above)."""
    path = Path(path)
    lines, cut = _lines(_read_text(path))
    col = _Collector(path, "tunableop-untuned")
    n_results = n_untuned = 0
    entries = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if lineno == cut:
            col.problem(lineno, TRUNCATED)
            continue
        head, mark, blas = line.partition(BLAS_MARK)
        fields = head.split(",")
        if fields[0] == "Validator":
            if len(fields) < 3 or mark:
                col.problem(lineno, f"validator line {line!r:.80} is not Validator,KEY,VALUE")
            else:
                col.workload.validators[fields[1]] = ",".join(fields[2:])
            continue
        entries.append((lineno, fields, blas if mark else None))
    if not entries and not col.workload.validators:
        raise WorkloadError(f"{path}: no TunableOp line (op_signature,params_signature...)")
    version = col.workload.validators.get("PT_VERSION")
    from_version = f" (the file's validators say PyTorch {version})" if version else ""
    for lineno, fields, blas in entries:
        if len(fields) == 2:
            n_untuned += 1
        elif len(fields) in (3, 4):
            n_results += 1
            if len(fields) == 4 and fields[3].strip() and not _NUMBER.match(fields[3].strip()):
                col.problem(lineno, f"time {fields[3]!r:.40} is not a number{from_version}")
                continue
        else:
            col.problem(
                lineno,
                f"{len(fields)} fields; TunableOp writes op,params (untuned) or op,params,solution[,time] "
                f"(results){from_version}",
            )
            continue
        why = _tunableop_entry(col, lineno, fields[0], fields[1], blas)
        if why:
            col.problem(lineno, why + from_version)
    results = n_results > n_untuned or (bool(col.workload.validators) and not n_untuned)
    col.workload.format = "tunableop-results" if results else "tunableop-untuned"
    if n_results and n_untuned:
        col.workload.notes.append(f"{n_untuned} untuned and {n_results} results lines in one file")
    return col.done()


def _tunableop_entry(col: _Collector, lineno: int, op_sig: str, param_sig: str, blas: str | None) -> str:
    """Add one TunableOp GEMM; returns why it could not be read ('' when read)."""
    m_op = _OP_SIG.match(op_sig.strip())
    if not m_op or m_op["op"] not in TUNABLEOP_OPS:
        return f"op signature {op_sig!r:.80} is not one oto reads ({', '.join(TUNABLEOP_OPS)})"
    op, types, layout = m_op["op"], m_op["types"], m_op["layout"]
    m_par = _PARAM_SIG.match(param_sig.strip())
    if not m_par:
        return f"params signature {param_sig!r:.80} is not {_PARAM_FORMS}"
    rest = m_par["rest"] or ""
    if (op == "ScaledGemmTunableOp" and not _SCALED_REST.match(rest)) or (
        op != "ScaledGemmTunableOp" and rest
    ):
        return (
            f"params signature {param_sig!r:.80}: unknown suffix {rest!r} (forms oto reads: {_PARAM_FORMS})"
        )
    strided = op == "GemmStridedBatchedTunableOp"
    if strided != (m_par["b"] is not None):
        return f"params signature {param_sig!r:.80}: {op} {'needs' if strided else 'has no'} _B_<batch>"
    ta, tb = m_par["ta"].upper(), m_par["tb"].upper()
    if (ta != "N") != (layout[0] == "T") or (tb != "N") != (layout[1] == "T"):
        return f"params {param_sig!r:.80} transposes {ta}{tb} disagree with the op's layout {layout}"
    what = f"{op_sig},{param_sig}"
    if op == "ScaledGemmTunableOp":
        col.uncovered(lineno, what, "FP8 scaled GEMM (torch._scaled_mm) runs on hipBLASLt, not rocBLAS", 1)
        return ""
    if op == "GemmAndBiasTunableOp":
        col.uncovered(lineno, what, "GEMM with a bias epilogue runs on hipBLASLt, not rocBLAS", 1)
        return ""
    if types not in TUNABLEOP_TYPES:
        return f"data type {types!r} is not one TunableOp names ({', '.join(TUNABLEOP_TYPES)})"
    a, c, compute = TUNABLEOP_TYPES[types]
    ints = {
        k: int(v) for k, v in m_par.groupdict().items() if v is not None and k not in ("ta", "tb", "rest")
    }
    call = dict(
        function=None,
        batching="strided" if strided else "none",
        trans_a=ta,
        trans_b=tb,
        m=ints["m"],
        n=ints["n"],
        k=ints["k"],
        batch=ints.get("b", 1),
        a_type=a,
        c_type=c,
        compute_type=compute,
        lda=ints.get("lda"),
        ldb=ints.get("ldb"),
        ldc=ints.get("ldc"),
    )
    if blas is not None:
        why = _apply_blas_params(call, _blas_params(blas))
        if why:
            return f"BLAS_PARAMS: {why}"
    col.add(lineno, GemmCall(**call), 1)
    return ""


def _apply_blas_params(call: dict[str, Any], bp: Mapping[str, str]) -> str:
    """Fill beta, alpha, strides and the compute type from BLAS_PARAMS; '' or why it disagrees."""
    try:
        for key, name in (("M", "m"), ("N", "n"), ("K", "k"), ("lda", "lda"), ("ldb", "ldb"), ("ldc", "ldc")):
            if key in bp and call[name] is not None and int(bp[key]) != call[name]:
                return f"{key} = {bp[key]} but the params signature says {call[name]}"
            if key in bp:
                call[name] = int(bp[key])
        if call["batching"] == "strided":
            for key in ("stride_a", "stride_b", "stride_c"):
                if key in bp:
                    call[key] = int(bp[key])
        if "batch_count" in bp and int(bp["batch_count"]) != call["batch"]:
            return f"batch_count = {bp['batch_count']} but the params signature says {call['batch']}"
        if "alpha" in bp:
            call["alpha"] = value_category(*_number(bp["alpha"]))
        if "beta" in bp:
            call["beta"] = value_category(*_number(bp["beta"]))
        if "compute_type" in bp:
            call["compute_type"] = rocblas_type(bp["compute_type"])
    except ValueError as exc:
        return f"a value is not a number ({exc})"
    return ""


# ---- rocBLAS logs ----------------------------------------------------------------------------------------

_GEMM_FUNCTIONS = {
    "gemm": "none",
    "gemm_ex": "none",
    "gemm_batched": "pointers",
    "gemm_batched_ex": "pointers",
    "gemm_strided_batched": "strided",
    "gemm_strided_batched_ex": "strided",
}
_F8_FUNCTIONS = ("gemm_ex3", "gemm_batched_ex3", "gemm_strided_batched_ex3")
_BLAS_PRECISION = {"s": "f32_r", "d": "f64_r", "h": "f16_r", "c": "f32_c", "z": "f64_c"}
_PROFILE_NAME = re.compile(r"^(?:rocblas_)?(?P<p>[sdhcz]?)(?P<f>gemm\w*?)(?:_64)?$")
_TRACE_LINE = re.compile(r"^\s*rocblas_\w+,")  # ROCBLAS_LAYER=1: "rocblas_sgemm,N,N,..." (no call count)
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _bench_options(tokens: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and not _NUMBER.match(tok):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is not None and (not nxt.startswith("-") or _NUMBER.match(nxt)):
                opts[tok.lstrip("-")] = nxt
                i += 2
                continue
            opts[tok.lstrip("-")] = ""
        i += 1
    return opts


def _bench_call(opts: Mapping[str, str], function: str) -> GemmCall:
    """A GemmCall from rocblas-bench's options (its defaults where a line leaves one out)."""

    def flag(name: str) -> str:
        return f"-{name}" if len(name) == 1 else f"--{name}"

    def integer(name: str, default: int | None = None) -> int | None:
        if name not in opts:
            return default
        try:
            return int(opts[name])
        except ValueError:
            raise ValueError(f"{flag(name)} {opts[name]!r:.40} is not an integer") from None

    def number(name: str, default: float) -> float:
        try:
            return float(opts[name]) if name in opts else default
        except ValueError:
            raise ValueError(f"{flag(name)} {opts[name]!r:.40} is not a number") from None

    precision = rocblas_type(opts.get("r") or opts.get("precision") or "f32_r")
    if function.endswith("_ex"):
        a = rocblas_type(opts.get("a_type", precision))
        c = rocblas_type(opts.get("c_type", a))
        compute = rocblas_type(opts.get("compute_type", c))
        for other, same in (("b_type", a), ("d_type", c)):
            if other in opts and rocblas_type(opts[other]) != same:
                raise ValueError(f"--{other} {opts[other]} differs from {same}: rocBLAS has no such GEMM")
    else:
        a = c = compute = precision
    batching = _GEMM_FUNCTIONS[function]
    for required in ("m", "n", "k"):
        if required not in opts:
            raise ValueError(f"no -{required}")
    return GemmCall(
        function=function,
        batching=batching,
        trans_a=opts.get("transposeA", "N").upper(),
        trans_b=opts.get("transposeB", "N").upper(),
        m=integer("m"),
        n=integer("n"),
        k=integer("k"),
        batch=integer("batch_count", 1) if batching != "none" else 1,
        a_type=a,
        c_type=c,
        compute_type=compute,
        **_layout(integer, batching),
        alpha=value_category(number("alpha", 1.0), number("alphai", 0.0)),
        beta=value_category(number("beta", 0.0), number("betai", 0.0)),
    )


def _layout(integer: Callable[[str], int | None], batching: str) -> dict[str, int | None]:
    """A call's leading dimensions and, for a strided batch, its strides, read by the format's ``integer``."""
    strided = batching == "strided"
    return {
        **{ld: integer(ld) for ld in ("lda", "ldb", "ldc")},
        **{st: integer(st) if strided else None for st in ("stride_a", "stride_b", "stride_c")},
    }


def _profile_call(entry: Mapping[str, Any], function: str, precision: str) -> GemmCall:
    def integer(name: str) -> int | None:
        if name not in entry:
            return None
        value = entry[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} = {value!r} is not an integer")
        return value

    if precision:  # rocblas_sgemm...: the precision is in the name
        a = c = compute = _BLAS_PRECISION[precision]
    else:  # rocblas_gemm_ex... (and rocblas-gemm-tune's plain "gemm" entries with their types)
        a = rocblas_type(str(entry.get("a_type", "f32_r")))
        c = rocblas_type(str(entry.get("c_type", a)))
        compute = rocblas_type(str(entry.get("compute_type", c)))
    batching = _GEMM_FUNCTIONS[function]
    for required in ("M", "N", "K"):
        if integer(required) is None:
            raise ValueError(f"no {required}")

    def category(name: str) -> float | None:
        if name not in entry:
            return None
        value = entry[name]
        if isinstance(value, str):  # the YAML of a complex value: '(1,0)'
            return value_category(*_number(value))
        return value_category(float(value))

    return GemmCall(
        function=function,
        batching=batching,
        trans_a=str(entry.get("transA", "N")).upper(),
        trans_b=str(entry.get("transB", "N")).upper(),
        m=integer("M"),
        n=integer("N"),
        k=integer("K"),
        batch=(integer("batch_count") or 1) if batching != "none" else 1,
        a_type=a,
        c_type=c,
        compute_type=compute,
        **_layout(integer, batching),
        alpha=category("alpha"),
        beta=category("beta"),
    )


def _bench_line(col: _Collector, lineno: int, line: str) -> str:
    command = line.split("#", 1)[0]
    try:  # rocBLAS writes no quotes: a plain split is shlex's answer there, at a fraction of its time
        tokens = shlex.split(command) if any(c in command for c in "'\"\\") else command.split()
    except ValueError as exc:
        return f"not a shell command line ({exc})"
    start = next((i for i, t in enumerate(tokens) if t.endswith("rocblas-bench")), None)
    if start is None:
        return "rocblas-bench is not the command of this line"
    opts = _bench_options(tokens[start + 1 :])
    function = opts.get("f") or opts.get("function")
    if not function:
        return "a rocblas-bench line without -f FUNCTION"
    if function in _F8_FUNCTIONS:
        col.uncovered(lineno, f"{function} {command.strip()[:80]}", F8_REASON, 1)
        return ""
    if function not in _GEMM_FUNCTIONS:
        col.skipped[function] += 1
        return ""
    try:
        call = _bench_call(opts, function)
    except ValueError as exc:
        return f"-f {function}: {exc}"
    col.add(lineno, call, 1)
    return ""


def _profile_line(col: _Collector, lineno: int, line: str) -> str:
    try:
        doc = yaml.load(line, Loader=_Loader)
    except yaml.YAMLError as exc:
        return f"not a YAML profile entry ({str(exc).splitlines()[0]})"
    if not (isinstance(doc, list) and len(doc) == 1 and isinstance(doc[0], dict)):
        return "not a YAML profile entry (- { rocblas_function: ..., call_count: N })"
    entry = doc[0]
    name = str(entry.get("rocblas_function", ""))
    count = entry.get("call_count", 1)  # rocblas-gemm-tune's own input may leave it out
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return f"call_count {count!r} is not a positive integer"
    m = _PROFILE_NAME.match(name)
    function = m["f"] if m else None
    if function in _F8_FUNCTIONS:
        col.uncovered(lineno, name, F8_REASON, count)
        return ""
    if m is None or function not in _GEMM_FUNCTIONS or (m["p"] and function.endswith("_ex")):
        col.skipped[name.removeprefix("rocblas_") or "(no rocblas_function)"] += count
        return ""
    try:
        call = _profile_call(entry, function, m["p"])
    except (ValueError, TypeError) as exc:
        return f"{name}: {exc}"
    col.add(lineno, call, count)
    return ""


def read_rocblas_log(path: str | Path) -> Workload:
    """A rocBLAS log: ``ROCBLAS_LAYER=2`` bench lines and/or a ``ROCBLAS_LAYER=4`` profile (see above).

    A file with both (``ROCBLAS_LOG_PATH`` sends every layer to one file) is read from its profile, which
    counts the same calls; trace lines (``ROCBLAS_LAYER=1``) are counted as skipped."""
    path = Path(path)
    lines, cut = _lines(_read_text(path))
    bench = {i for i, ln in enumerate(lines, 1) if "rocblas-bench" in ln.split("#", 1)[0]}
    profile = {i for i, ln in enumerate(lines, 1) if ln.lstrip().startswith(("- {", "-{"))}
    if not bench and not profile:
        raise WorkloadError(
            f"{path}: no rocBLAS bench line (./rocblas-bench -f gemm ...) or profile entry "
            "(- { rocblas_function: ... }); set ROCBLAS_LAYER=2 or 4 when recording"
        )
    col = _Collector(path, "rocblas-profile" if profile else "rocblas-bench")
    if profile and bench:
        col.workload.notes.append(
            f"{len(bench)} bench lines not counted: the profile in the same file counts the same calls"
        )
    parse = {i: _profile_line for i in profile} if profile else {i: _bench_line for i in bench}
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or (lineno in bench and profile):
            continue
        if lineno == cut:
            col.problem(lineno, TRUNCATED)
        elif lineno in parse:
            why = parse[lineno](col, lineno, line)
            if why:
                col.problem(lineno, why)
        elif _TRACE_LINE.match(line):  # a trace line (ROCBLAS_LAYER=1): no call count to weigh
            col.skipped["trace lines"] += 1
        else:
            col.problem(lineno, f"not a rocBLAS bench, profile or trace line: {line.strip()!r:.80}")
    return col.done()


def read_workload(path: str | Path, fmt: str = "auto") -> Workload:
    """A workload file in any format oto reads; ``fmt`` ``auto`` tells them apart by their lines. Within a
    run (``CACHE`` set) a file parsed once is read back from the cache, keyed by its path, its bytes, the
    format and this parser's own source (a parser changed by an update parses again)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise WorkloadError(f"{path}: workload format {fmt!r} is not one of {', '.join(FORMATS)}")
    if CACHE is None:
        return _parse(path, fmt)
    try:
        key = hashlib.sha256(b"\0".join([str(path).encode(), fmt.encode(), _PARSER, path.read_bytes()]))
    except OSError:
        return _parse(path, fmt)  # named as a read error by the parse
    kept = Path(CACHE) / f"{key.hexdigest()}.pickle"
    try:
        workload = pickle.loads(kept.read_bytes())
        if isinstance(workload, Workload):
            return workload
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        pass
    workload = _parse(path, fmt)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f".{kept.name}.{os.getpid()}")
        partial.write_bytes(pickle.dumps(workload))
        partial.replace(kept)  # whole or not at all: two jobs may write it at once
    except OSError:
        pass  # a cache that cannot be written costs time, not the run
    return workload


_PARSER = hashlib.sha256(Path(__file__).read_bytes()).digest()


def _parse(path: Path, fmt: str) -> Workload:
    if fmt == "auto":
        head = [ln for ln in _read_text(path).splitlines() if ln.strip()][:200]
        if any(ln.startswith(("Validator,", "Gemm", "ScaledGemm")) for ln in head):
            fmt = "tunableop"
        elif any("rocblas-bench" in ln or ln.lstrip().startswith(("- {", "-{")) for ln in head) or any(
            _TRACE_LINE.match(ln) for ln in head
        ):  # a trace (ROCBLAS_LAYER=1) comes first in a log every layer wrote to: its profile is further down
            fmt = "rocblas-log"
        elif not head:
            raise WorkloadError(f"{path}: empty file")
        else:
            raise WorkloadError(
                f"{path}: not a workload oto reads (TunableOp untuned or results CSV, rocBLAS bench log or "
                f"profile YAML); line 1 is {head[0]!r:.80}"
            )
    return read_tunableop(path) if fmt == "tunableop" else read_rocblas_log(path)
