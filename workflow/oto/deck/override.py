"""The override file for a stock install: for every workload GEMM, the fastest kernel the installed rocBLAS
already ships, written as rocBLAS's ``ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH`` file, so a user who cannot install
a new library still gets the better of the shipped kernels.

The format is Tensile's user-driven tuning parser (ROCm/Tensile a164ed70df55
``Tensile/Source/lib/source/UserDrivenTuningParser.cpp``, identical in ROCm/rocm-libraries
``shared/tensile``), which rocBLAS calls at start-up (ROCm/rocBLAS b520bc83fa67
``library/src/tensile_host.cpp``: ``m_library->setOverridesFromFile``; on failure it warns "One or more
problem overrides failed to load"):

* a line without a comma is ignored, and so is a line containing ``transA`` (the headers
  ``rocblas-gemm-tune`` writes); every other line is split at commas into 15 or 18 entries
  (``transA,transB,M,N,batch_count,K,alpha,beta,lda,ldb,ldc[,stride_a,stride_b,stride_c],input_type,
  output_type,compute_type,solution_index``); any other count, an unparsable number or an unknown type drops
  the line silently, and so does a solution index <= 0;
* the 15-entry form implies the strides (1 when batch_count is 1, else ``ld * (k or m)``); this module
  writes the 18-entry form, with the strides each rocBLAS entry point really passes (``rocblas_<t>gemm``
  and ``rocblas_<t>gemm_batched`` pass 0, ``rocblas_gemm_ex`` 1, ``rocblas_gemm_batched_ex``
  ``ld * (k or m)``, the strided-batched calls their own: rocblas_gemm_imp.hpp,
  rocblas_gemm_batched_imp.hpp, rocblas_gemm_ex_imp.hpp, rocblas_gemm_ex_kernels.cpp), because
  ``ProblemOverride`` matches transposes, types, high-precision accumulation, M, N, K, batch, beta
  (Tensile's value category) and every leading dimension and batch stride exactly
  (``UserDrivenTuningParser.hpp``: ``Comparison<ProblemOverride>``);
* the solution index is the ``.dat`` solution index plus one
  (``MasterSolutionLibrary::setOverridesFromFile`` looks up ``index - 1``; ``rocblas-gemm-tune`` and
  ``rocblas_gemm_ex_get_solutions`` number them the same way). In a rocBLAS built with separate
  architectures a ``.dat`` index is ``int('<arch hex>', 16) << 18`` plus the solution's place in that arch's
  build (gfx900: 603979776 + i; research/tensile.md §4.3), which only the installed library knows, so the
  deck must be read from the installed library (``deck.source: rocblas``,
  :func:`oto.deck.sources.deck_from_rocblas_dir`), never from logic files.

rocBLAS uses an override only where the solution can solve the problem (``CachingLibrary::findBestSolution``
checks ``canSolve``); otherwise it falls back to its own pick, so a line that does not apply costs nothing.
When a recorder does not say which entry point, beta or strides a GEMM had (TunableOp without
``BLAS_PARAMS``), the file holds a line for each value PyTorch can pass: beta 0 (``mm``) and 1 (``addmm``),
strides 0 (``rocblas_sgemm``) and 1 (``rocblas_gemm_ex``), tight leading dimensions for the oldest signatures.

Which shipped kernel is best at a size is decided by a scorer (:class:`Scorer`): measured times when there
are any (:class:`TableScorer`), else the simulated GPU's model
(:class:`oto.hardware.simulated.scorer.SimulatedScorer`); every choice says which numbers decided it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from oto.deck.model import Deck, DeckError, LibraryDeck
from oto.deck.workload import GemmCall, Size, Uncovered, Workload, WorkloadGemm
from oto.files import atomic_write_text
from oto.gemm import Library

COLUMNS = (
    "transA",
    "transB",
    "M",
    "N",
    "batch_count",
    "K",
    "alpha",
    "beta",
    "lda",
    "ldb",
    "ldc",
    "stride_a",
    "stride_b",
    "stride_c",
    "input_type",
    "output_type",
    "compute_type",
    "solution_index",
)
# UserDrivenTuningParser.cpp convertToDataType: the type names an override line may carry.
OVERRIDE_TYPES = {
    "f16_r": 2,
    "h": 2,
    "f32_r": 4,
    "s": 4,
    "f64_r": 8,
    "d": 8,
    "bf16_r": 2,
    "f32_c": 8,
    "c": 8,
    "f64_c": 18,
    "z": 18,
    "i8_r": 1,
    "i32_r": 4,
}  # fmt: skip  (the byte sizes its dataTypeSize gives, ComplexDouble's 18 included: HPA compares them)
INT_MAX = 2**31 - 1  # std::stoi


class Scorer(Protocol):
    """Times shipped kernels at sizes: ``times_us(library, solutions, sizes)`` is one row per solution
    (the deck's ``{index, name, params}``), one time in microseconds per size, None where it has none."""

    numbers: str  # simulated | measured | replayed: what kind of numbers it returns
    label: str  # what produced them, for the file's header and the summary

    def times_us(
        self, library: Library, solutions: Sequence[Mapping[str, Any]], sizes: Sequence[Size]
    ) -> list[list[float | None]]: ...


@dataclass
class TableScorer:
    """Recorded times: ``{(library, (M, N, B, K), .dat solution index): time_us}``."""

    times: Mapping[tuple[str, Size, int], float]
    numbers: str = "measured"
    label: str = "measured times"

    def times_us(
        self, library: Library, solutions: Sequence[Mapping[str, Any]], sizes: Sequence[Size]
    ) -> list[list[float | None]]:
        return [
            [self.times.get((library.name, tuple(s), int(sol["index"]))) for s in sizes] for sol in solutions
        ]


MEASURED_COLUMNS = ("library", "M", "N", "B", "K", "solution_index", "time_us")


def read_measured_csv(path: str | Path, numbers: str = "measured") -> TableScorer:
    """A CSV of measured times (columns ``library,M,N,B,K,solution_index,time_us``; solution_index is the
    installed ``.dat`` index) as a scorer; a bad row is an error naming the file, line and column."""
    path = Path(path)
    times: dict[tuple[str, Size, int], float] = {}
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in MEASURED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DeckError(
                    f"{path}: missing column(s) {', '.join(missing)} (need {','.join(MEASURED_COLUMNS)})"
                )
            for row in reader:
                line = reader.line_num
                try:
                    size = tuple(int(row[c]) for c in ("M", "N", "B", "K"))
                    index, t = int(row["solution_index"]), float(row["time_us"])
                except (TypeError, ValueError):
                    why = "M, N, B, K and solution_index must be integers, time_us a number"
                    raise DeckError(f"{path}:{line}: {why}: {row}") from None
                if not (math.isfinite(t) and t > 0):
                    raise DeckError(f"{path}:{line}: time_us {t} is not a positive number")
                times[(str(row["library"]), size, index)] = t
    except OSError as exc:
        raise DeckError(f"{path}: cannot read: {exc.strerror}") from exc
    return TableScorer(times, numbers, f"{numbers} times from {path.name}")


def can_solve(params: Mapping[str, Any], size: Sequence[int]) -> bool:
    """Whether a shipped solution can run a size: its AssertFree0/Free1/SummationElementMultiple hold."""
    m, n, _, k = size[:4]
    return (
        m % int(params.get("AssertFree0ElementMultiple", 1)) == 0
        and n % int(params.get("AssertFree1ElementMultiple", 1)) == 0
        and k % int(params.get("AssertSummationElementMultiple", 1)) == 0
    )


def stock_pick(library: LibraryDeck, size: Sequence[int]) -> int | None:
    """The solution position rocBLAS picks without an override: the winner of the nearest shipped size in
    (M, N, K) (Tensile's Euclidean Matching table; batch is not in its key) that can solve the size."""
    m, n, _, k = size[:4]
    order = sorted(
        range(len(library.sizes)),
        key=lambda j: ((library.sizes[j][0] - m) ** 2 + (library.sizes[j][1] - n) ** 2
                       + (library.sizes[j][3] - k) ** 2, j),
    )  # fmt: skip
    for j in order:
        pos = int(library.shipped[j][0])
        if can_solve(library.solutions[pos]["params"], size):
            return pos
    return None


@dataclass
class Choice:
    """The shipped kernel chosen for one library and size, and the numbers behind the choice."""

    library: str
    size: Size
    position: int  # in the deck's solutions of the library
    index: int  # the installed .dat solution index (the override file writes index + 1)
    name: str
    time_us: float
    numbers: str
    label: str
    candidates: int  # shipped solutions that can solve the size
    timed: int  # of those, how many the deciding scorer timed
    stock_position: int | None
    stock_time_us: float | None

    @property
    def changes_pick(self) -> bool:
        return self.stock_position != self.position


def choose_shipped(
    library: LibraryDeck, sizes: Sequence[Size], scorers: Sequence[Scorer]
) -> dict[Size, Choice | str]:
    """Per size, the fastest shipped solution that can solve it, or why there is none.

    Scorers are asked in order; a size is decided by the first that times at least one of its candidates,
    among the candidates it timed (measured times are never mixed with simulated ones)."""
    lib = Library.parse(library.name)
    sizes = [tuple(int(v) for v in s) for s in sizes]
    sols = library.solutions
    valid = [[can_solve(sol["params"], s) for s in sizes] for sol in sols]
    tables = [scorer.times_us(lib, sols, sizes) for scorer in scorers]
    out: dict[Size, Choice | str] = {}
    for j, size in enumerate(sizes):
        cands = [p for p in range(len(sols)) if valid[p][j]]
        if not cands:
            out[size] = "no shipped solution can solve this size (AssertElementMultiple)"
            continue
        stock = stock_pick(library, size)
        for scorer, table in zip(scorers, tables, strict=True):
            timed = {p: table[p][j] for p in cands if table[p][j] is not None and math.isfinite(table[p][j])}
            if timed:
                best = min(timed, key=lambda p: (timed[p], p))
                out[size] = Choice(
                    library.name,
                    size,
                    best,
                    int(sols[best]["index"]),
                    str(sols[best].get("name") or ""),
                    float(timed[best]),
                    scorer.numbers,
                    scorer.label,
                    len(cands),
                    len(timed),
                    stock,
                    None if stock is None else timed.get(stock),
                )
                break
        else:
            out[size] = f"no scorer timed any of its {len(cands)} candidate solutions"
    return out


# ---- override lines --------------------------------------------------------------------------------------


def _tight_ld(call: GemmCall) -> tuple[int, int, int]:
    return (
        call.m if call.trans_a == "N" else call.k,
        call.k if call.trans_b == "N" else call.n,
        call.m,
    )


def _packed_strides(call: GemmCall, lda: int, ldb: int, ldc: int) -> tuple[int, int, int]:
    """The strides rocBLAS derives for pointer-array batched gemm_ex, and Tensile's 15-entry form implies."""
    return (
        lda * (call.k if call.trans_a == "N" else call.m),
        ldb * (call.n if call.trans_b == "N" else call.k),
        ldc * call.n,
    )


def call_variants(call: GemmCall) -> list[tuple[float, int, int, int, int, int, int]]:
    """(beta, lda, ldb, ldc, stride_a, stride_b, stride_c) of every problem rocBLAS may build for a call."""
    tight = _tight_ld(call)
    lda = call.lda if call.lda is not None else tight[0]
    ldb = call.ldb if call.ldb is not None else tight[1]
    ldc = call.ldc if call.ldc is not None else tight[2]
    packed = _packed_strides(call, lda, ldb, ldc)
    if call.batching == "strided":
        given = (call.stride_a, call.stride_b, call.stride_c)
        strides = [given if None not in given else packed]
    elif call.batching == "pointers":
        strides = [(0, 0, 0) if call.function == "gemm_batched" else packed]
    elif call.function == "gemm":
        strides = [(0, 0, 0)]
    elif call.function == "gemm_ex" or call.compute_type != call.a_type:  # only gemm_ex widens the compute
        strides = [(1, 1, 1)]
    else:  # not recorded (TunableOp): rocblas_<t>gemm passes 0, rocblas_gemm_ex 1
        strides = [(0, 0, 0), (1, 1, 1)]
    betas = [call.beta] if call.beta is not None else [0.0, 1.0]
    return [(b, lda, ldb, ldc, *s) for b in betas for s in strides]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def override_lines(call: GemmCall, solution_index: int) -> list[str]:
    """The 18-entry override lines of one call run by the solution with this ``.dat`` index."""
    out = []
    for beta, lda, ldb, ldc, sa, sb, sc in call_variants(call):
        entries = [
            call.trans_a, call.trans_b, call.m, call.n, call.batch, call.k, 1, _num(beta), lda, ldb, ldc,
            sa, sb, sc, call.a_type, call.c_type, call.compute_type, solution_index + 1,
        ]  # fmt: skip
        out.append(",".join(str(e) for e in entries))
    return out


@dataclass
class OverridePlan:
    """What an override file holds and what it leaves out, with the numbers behind each choice."""

    deck: Mapping[str, Any]  # the deck's source record
    arch: str
    choices: dict[tuple[str, Size], Choice] = field(default_factory=dict)
    weights: dict[tuple[str, Size], int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    uncovered: list[Uncovered] = field(default_factory=list)
    unsolved: list[tuple[str, Size, int, str]] = field(default_factory=list)  # library, size, weight, why

    @property
    def numbers(self) -> list[str]:
        return sorted({c.numbers for c in self.choices.values()})

    def saved(self) -> dict[str, tuple[float, float]]:
        """Per library: (weighted time of the stock picks, weighted time of the chosen kernels) in
        microseconds, over the sizes where the deciding scorer timed both."""
        out: dict[str, tuple[float, float]] = {}
        for key, c in self.choices.items():
            if c.stock_time_us is None:
                continue
            w = self.weights[key]
            stock, chosen = out.get(c.library, (0.0, 0.0))
            out[c.library] = (stock + w * c.stock_time_us, chosen + w * c.time_us)
        return out


def plan_override(
    gemms: Iterable[WorkloadGemm], deck: Deck, scorers: Sequence[Scorer], uncovered: Iterable[Uncovered] = ()
) -> OverridePlan:
    """The override lines for workload GEMMs from a deck read from the installed rocBLAS library."""
    if deck.source.get("kind") != "rocblas":
        raise DeckError(
            f"the override file needs the solution indices of the installed rocBLAS library, but this deck "
            f"comes from {deck.source.get('kind')!r} ({deck.source.get('path')}): read the deck from the "
            "installed library folder (/opt/rocm/lib/rocblas/library)"
        )
    if not scorers:
        raise ValueError("no scorer: give measured times or the simulated GPU")
    gemms = list(gemms)
    plan = OverridePlan(dict(deck.source), deck.arch_source, uncovered=list(uncovered))
    by_library: dict[str, list[WorkloadGemm]] = {}
    for g in gemms:
        if g.library in deck.libraries:
            by_library.setdefault(g.library, []).append(g)
            key = (g.library, g.size)
            plan.weights[key] = plan.weights.get(key, 0) + g.weight
        else:
            plan.uncovered.append(
                Uncovered(g.call.describe(), f"the installed library has no {g.library}", g.weight, g.where,
                          g.library)
            )  # fmt: skip
    seen: set[str] = set()
    for name, group in sorted(by_library.items()):
        sizes = sorted({g.size for g in group})
        picks = choose_shipped(deck.libraries[name], sizes, scorers)
        for size in sizes:
            pick = picks[size]
            if isinstance(pick, str):
                plan.unsolved.append((name, size, plan.weights[(name, size)], pick))
            else:
                plan.choices[(name, size)] = pick
        for g in group:
            pick = picks[g.size]
            if isinstance(pick, Choice):
                for line in override_lines(g.call, pick.index):
                    if line not in seen:
                        seen.add(line)
                        plan.lines.append(line)
    return plan


def write_override(path: str | Path, plan: OverridePlan, notes: Sequence[str] = ()) -> None:
    """Write the override file: comment lines (no comma, so rocBLAS skips them), the header rocBLAS's
    parser skips, then one line per problem."""
    kinds = ", ".join(plan.numbers) or "none"
    head = [
        "oto override file for ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH",
        f"kernels: the installed rocBLAS library {plan.deck.get('path')} ({plan.arch})",
        f"numbers that chose them: {kinds}",
        *notes,
        "undo: unset ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH",
    ]
    text = "".join(f"# {h.replace(',', ';')}\n" for h in head) + ",".join(COLUMNS) + "\n"
    atomic_write_text(path, text + "".join(f"{line}\n" for line in plan.lines))


@dataclass(frozen=True)
class OverrideEntry:
    """One line of an override file as Tensile reads it."""

    trans_a: bool
    trans_b: bool
    m: int
    n: int
    batch: int
    k: int
    beta: float
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    input_type: str
    output_type: str
    hpa: bool
    solution_index: int  # as written (the .dat index + 1)


def read_override(path: str | Path) -> tuple[list[OverrideEntry], list[str]]:
    """The entries rocBLAS would load from an override file, read as ``getContractionProblemsFromFile`` does,
    and for every other line with a comma why Tensile drops it (``file:line: why``)."""
    path = Path(path)
    entries, dropped = [], []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if "," not in line or "transA" in line:
            continue
        e = line.split(",")
        where = f"{path.name}:{lineno}"
        if len(e) not in (15, 18):
            dropped.append(f"{where}: {len(e)} entries, Tensile reads 15 or 18")
            continue
        try:
            m, n, b, k = (int(x) for x in e[2:6])
            beta = float(e[7])
            lda, ldb, ldc = (int(x) for x in e[8:11])
            if len(e) == 18:
                sa, sb, sc = (int(x) for x in e[11:14])
            elif b > 1:
                sa = lda * (m if e[0] != "N" else k)
                sb = ldb * (k if e[1] != "N" else n)
                sc = ldc * n
            else:
                sa = sb = sc = 1
            types = e[-4:-1]
            index = int(e[-1])
        except ValueError:
            dropped.append(f"{where}: a number does not parse")
            continue
        if any(t not in OVERRIDE_TYPES for t in types):
            dropped.append(f"{where}: unknown type among {', '.join(types)}")
            continue
        if not 0 < index <= INT_MAX:
            dropped.append(f"{where}: solution index {index} is not in [1, {INT_MAX}]")
            continue
        hpa = OVERRIDE_TYPES[types[2]] > OVERRIDE_TYPES[types[0]]
        entries.append(
            OverrideEntry(e[0] != "N", e[1] != "N", m, n, b, k, beta, lda, ldb, ldc, sa, sb, sc, types[0],
                          types[1], hpa, index)
        )  # fmt: skip
    return entries, dropped


def workload_gemms(workloads: Iterable[Workload]) -> tuple[list[WorkloadGemm], list[Uncovered]]:
    gemms: list[WorkloadGemm] = []
    uncovered: list[Uncovered] = []
    for w in workloads:
        gemms += w.gemms
        uncovered += w.uncovered
    return gemms, uncovered
