"""Write Tensile library logic files in the rocBLAS list format (what Tensile's LibraryLogic step writes).

The list layout is the one ROCm/Tensile:Tensile/LibraryIO.py ``createLibraryLogicList`` writes and
``parseLibraryLogicList`` reads: version, schedule, architecture, device names, problem type, solutions,
index order, exact rows, range logic (retired, null), tile selection (null), performance metric, and
optionally [11] Fp16AltImpl marker and [12] distance. Solutions carry only independent parameters: TCL
re-derives everything else on load (``AssignedDerivedParameters`` is forced off).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oto.files import NoAliasDumper, atomic_write_text
from oto.gemm import Library
from oto.numbers import finite
from oto.tensile import legality
from oto.tensile import solution_fields as sf
from oto.tensile.labels import logic_label
from oto.tensile.params import CandidateError, canonical, macro_tile
from oto.tensile.provenance import logic_header

# The logic format version we emit. TCL only warns when the file's version is newer than itself
# (Common.versionIsCompatible: same major, minor.patch <= installed); 4.33.0 is the Tensile of ROCm 5.2, the
# oldest toolchain we target, and this layout has been readable since well before it.
MINIMUM_REQUIRED_VERSION = "4.33.0"

# Fixed Tensile parameters of every oto solution: what shipped gfx9 VALU kernels use, and what TCL needs to
# derive a kernel that loads (asm kernels need ShiftPtr edges; VALU means no matrix instruction).
FIXED_PARAMETERS: dict[str, Any] = {
    "EdgeType": "ShiftPtr",
    "LoopTail": True,
    "BufferLoad": True,
    "BufferStore": True,
    "MatrixInstruction": [],
    "LdcEqualsLdd": False,
    "PreloadKernelArguments": 0,
    "AssignedDerivedParameters": False,
    "AssignedProblemIndependentDerivedParameters": False,
}


def problem_type(library: str | Library) -> dict[str, Any]:
    """Tensile ProblemType dict of a GEMM library such as ``Cijk_Ailk_Bljk_HHS_BH``.

    Independent fields plus the index layout ProblemType.initGEMM / assignDerivedParameters derive (a
    TensorContraction reads them), so that readers of the file need not re-derive it.
    """
    lib = Library.parse(library) if isinstance(library, str) else library
    fam = lib.family
    ia = [3, 0, 2] if lib.transpose_a else [0, 3, 2]
    ib = [1, 3, 2] if lib.transpose_b else [3, 1, 2]
    # rocBLAS ships the initial-stride families (SBIc, SBIIc) as TensorContractions: GEMM does not take them
    contraction = fam.initial_strides_ab or fam.initial_strides_cd
    return {
        "OperationType": "TensorContraction" if contraction else "GEMM",
        "DataType": fam.a.enum,
        "DestDataType": fam.dest.enum,
        "ComputeDataType": fam.compute.enum,
        "HighPrecisionAccumulate": fam.hpa,
        "TransposeA": lib.transpose_a,
        "TransposeB": lib.transpose_b,
        "ComplexConjugateA": lib.conjugate_a,
        "ComplexConjugateB": lib.conjugate_b,
        "UseBeta": True,
        "Batched": True,
        "StridedBatched": fam.strided_batched,
        "UseInitialStridesAB": fam.initial_strides_ab,
        "UseInitialStridesCD": fam.initial_strides_cd,
        "IndexAssignmentsA": ia,
        "IndexAssignmentsB": ib,
        "IndicesFree": [0, 1],
        "IndicesBatch": [2],
        "IndicesSummation": [3],
        "NumIndicesC": 3,
        "TotalIndices": 4,
        "TLUA": not lib.transpose_a,
        "TLUB": lib.transpose_b,
    }


def solution_entry(pt: Mapping[str, Any], params: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One logic solution from a kernel's parameters (``oto.tensile.params`` names, extras included).

    ``params`` are canonicalised (defaults filled, illegal values rejected); the rest is
    :data:`FIXED_PARAMETERS` (unless the kernel sets one itself), the problem type and the solution index
    the exact rows refer to. A few derived
    values (macro tile, thread count) are added for readers; TCL recomputes them.
    """
    p = canonical(params)
    mt0, mt1 = macro_tile(p)
    wg = p["WorkGroup"]
    entry: dict[str, Any] = dict(FIXED_PARAMETERS)
    entry.update(p)  # a kernel's own extras (BufferLoad: false, ...) win over the fixed values
    entry.update(
        {
            "ProblemType": dict(pt),
            "SolutionIndex": index,
            "MacroTile0": mt0,
            "MacroTile1": mt1,
            "LocalSplitU": wg[2],
            "NumThreads": wg[0] * wg[1] * wg[2],
            "LoopUnroll": p["DepthU"] // wg[2],
            "Valid": True,
        }
    )
    return entry


@dataclass
class LogicPlan:
    """What a library's logic file holds: solutions (kernel id → parameters, in index order), exact rows
    ``(sizes, solution index, gflops)``, and the kernels that could not be written, with where their sizes
    went (``{kernel, reason, sizes, to}``)."""

    solutions: dict[str, dict[str, Any]]
    rows: list[tuple[list[int], int, float]]
    handed_over: list[dict[str, Any]]

    def notes(self) -> list[str]:
        """One line per kernel that could not be written, for the logic file's header comment."""
        return [
            f"oto: dropped {h['kernel']} ({h['reason']}); its {len(h['sizes'])} size(s) went to "
            f"{h['to'] or 'the nearest size (no row)'}"
            for h in self.handed_over
        ]


def plan_logic(
    library: Library,
    per_size: Sequence[Mapping[str, Any]],
    kernels: Mapping[str, Mapping[str, Any]],
    sizes: Sequence[Sequence[int]],
    references: Mapping[int, Mapping[str, Any]],
    limits: legality.Limits | None = None,
) -> LogicPlan:
    """The logic of a library's final winners, checked before anything is written.

    Every winner is judged as Tensile will judge the solution (:func:`oto.tensile.legality.check`, extras
    included). A winner that cannot be written is dropped and each of its sizes handed to the next best
    kernel measured there: the size's spoof-floor reference (``references[size_index]``: ``{id, params}``;
    its GFLOPS follow from the winner's score, which is the winner's speed-up over it), or no row when that
    cannot be written either (Tensile then serves the size from the nearest row, as for a size without a
    winner)."""
    judged: dict[str, tuple[str, ...]] = {}

    def reasons(kid: str, params: Mapping[str, Any]) -> tuple[str, ...]:
        if kid not in judged:
            try:
                verdict = legality.check(library, params, limits)
                judged[kid] = () if verdict.valid else verdict.reasons
            except CandidateError as exc:
                judged[kid] = (str(exc),)
        return judged[kid]

    solutions: dict[str, dict[str, Any]] = {}
    rows: list[tuple[list[int], int, float]] = []
    handed: dict[str, dict[str, Any]] = {}
    for r in per_size:
        kid = r.get("winner")
        if not kid:
            continue  # no valid kernel at this size: Tensile falls back to the nearest size's solution
        i = int(r["size_index"])
        # a winner whose GFLOPS were not measured (a size whose race timed out on it) still holds its size:
        # the logic file's number is informational, and Tensile's reader wants it finite
        params, gflops = kernels[kid], finite(r.get("gflops")) or 0.0
        why = reasons(kid, params)
        if why:
            ref = references.get(i) or {}
            to = ref.get("id")
            if to and not reasons(to, ref["params"]) and r.get("score"):
                params, gflops = ref["params"], gflops / float(r["score"])
            else:
                to = None
            h = handed.setdefault(kid, {"kernel": kid, "reason": "; ".join(why), "sizes": [], "to": set()})
            h["sizes"].append(list(sizes[i]))
            if to:
                h["to"].add(to)
            if not to:
                continue
            kid = to
        solutions.setdefault(kid, dict(params))
        rows.append((list(sizes[i]), list(solutions).index(kid), gflops))
    out = [dict(h, to=", ".join(sorted(h["to"])) or None) for h in handed.values()]
    return LogicPlan(solutions, rows, out)


def logic_file_name(schedule: str, library: str) -> str:
    """``<schedule>_<problem type>.yaml``: TCL picks files whose stem contains the schedule name."""
    return f"{schedule}_{library}.yaml"


def logic_data(
    *,
    problem_type: Mapping[str, Any],
    solutions: Sequence[Mapping[str, Any]],
    exact_rows: Sequence[tuple[Sequence[int], int, float]],
    schedule: str,
    architecture: str | Mapping[str, Any],
    device_names: Sequence[str],
    minimum_required_version: str = MINIMUM_REQUIRED_VERSION,
    index_order: Sequence[int] = (2, 3, 0, 1),
    perf_metric: str = "DeviceEfficiency",
    distance: str = "Euclidean",
) -> list[Any]:
    """The logic file's list. Solutions without ``SolutionNameMin`` get Tensile's minimal kernel name."""
    rows = []
    for sizes, position, gflops in exact_rows:
        if not 0 <= int(position) < len(solutions):
            raise ValueError(f"exact row {list(sizes)} names solution {position}, have {len(solutions)}")
        if len(sizes) not in (4, 8):
            raise ValueError(f"exact row sizes must be [M,N,B,K] or 8 long, got {list(sizes)}")
        rows.append([[int(v) for v in sizes], [int(position), float(gflops)]])
    data: list[Any] = [
        {"MinimumRequiredVersion": minimum_required_version},
        schedule,
        dict(architecture) if isinstance(architecture, Mapping) else architecture,
        list(device_names),
        dict(problem_type),
        _named(problem_type, solutions, architecture),
        list(index_order),
        rows,
        None,
        None,
        perf_metric,
    ]
    if distance != "Euclidean":
        data += [None, distance]
    return data


def _named(
    pt: Mapping[str, Any], solutions: Sequence[Mapping[str, Any]], architecture: str | Mapping[str, Any]
) -> list[dict[str, Any]]:
    out = [dict(s) for s in solutions]
    if all("SolutionNameMin" in s for s in out):
        return out
    arch = architecture["Architecture"] if isinstance(architecture, Mapping) else architecture
    info = sf.ProblemTypeInfo.from_dict(pt)
    isa = (0, 0, 0) if arch == "fallback" else sf.isa_tuple(arch)
    states = [sf.derive(s, info, isa) for s in out]
    naming = sf.min_naming(states)
    for s, st in zip(out, states, strict=True):
        s.setdefault("SolutionNameMin", sf.kernel_name(st, info, naming))
    return out


def write_logic_file(path: str | Path, notes: Sequence[str] = (), **fields: Any) -> Path:
    """Write ``logic_data(**fields)`` as YAML the way Tensile does (sorted keys, flow-style leaves);
    ``notes`` become comment lines at the top (Tensile ignores them)."""
    data = logic_data(**fields)
    path = Path(path)
    text = "".join(f"# {n}\n" for n in notes)
    # no anchors: rocBLAS's files have none, and a problem type's shared lists made 14 (&id001 ...)
    text += yaml.dump(data, Dumper=NoAliasDumper, default_flow_style=None)
    atomic_write_text(path, text)  # an interrupted job never leaves half a logic file for package to read
    return path


def write_library_logic(
    final: Mapping[str, Any],
    deck: Any,
    profile: Mapping,
    label: str,
    out: str | Path,
    source: str = "final",
    model_check: str | None = None,
) -> tuple[int, int, list[str]]:
    """One library's final winners (a ``final.yaml`` document; ``deck`` its LibraryDeck) → its logic file.
    Validates before writing: a winner Tensile would not build hands its sizes to the size's reference (see
    plan_logic). The file starts with comment lines saying where its numbers came from
    (:func:`oto.tensile.provenance.logic_header`; ``model_check``: how well the model behind simulated numbers
    was checked on the chip). Returns (solutions, exact rows, notes on such hand-overs).
    Shared by the logic rule and the merge of many testers' bundles."""
    if final["library"] != deck.name:
        raise ValueError(
            f"{source}: field 'library' is {final['library']!r}, the deck slice is {deck.name!r}"
        )
    library = Library.parse(deck.name)
    limits = legality.Limits.from_profile(profile)
    winners = {int(r["size_index"]) for r in final["per_size"] if r.get("winner")}
    plan = plan_logic(
        library,
        final["per_size"],
        final["kernels"],
        deck.sizes,
        deck.references(sorted(winners), limits),
        limits,
    )
    notes = plan.notes()
    solutions = [solution_entry(deck.problem_type, p, i) for i, p in enumerate(plan.solutions.values())]
    schedule, arch, devices = logic_label(profile, label)
    write_logic_file(
        out,
        problem_type=deck.problem_type,
        solutions=solutions,
        exact_rows=plan.rows,
        schedule=schedule,
        architecture=arch,
        device_names=devices,
        notes=[*logic_header(final, model_check), *notes],  # the file alone says what its numbers are
    )
    return len(solutions), len(plan.rows), notes
