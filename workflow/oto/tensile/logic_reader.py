"""Reading Tensile library logic YAML (the list format rocBLAS ships, e.g. ``vega10_Cijk_Ailk_Bljk_SB.yaml``).

The semantics follow ROCm/Tensile:Tensile/LibraryIO.py ``parseLibraryLogicList`` and
SolutionLibrary.py ``MatchingLibrary.FromOriginalState``: an exact-logic row ``[[sizes], [i, gflops]]``
refers to the solution at *position* ``i`` of the solutions list, whatever ``SolutionIndex`` says. The
solutions' own indices are repaired like ``MasterSolutionLibrary.FixSolutionIndices`` (missing or repeated
indices are renumbered after the maximum), which matters for the vega10 HB files that restart at 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oto.gemm import DATATYPES, HPA_TYPES, datatype
from oto.tensile.defaults import subset
from oto.tensile.params import ISA_PARAMS

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SIZE_MAX = 2**31 - 1  # rocblas_int: no GEMM dimension or leading dimension can be larger
SIZE_NAMES = ("M", "N", "B", "K", "LDD", "LDC", "LDA", "LDB")
_INDEX_CHARS = "IJKLMNOPQRSTUVWXYZ"  # Tensile globalParameters["IndexChars"]

# Tensile's defaults for the knobs oto tunes: what a solution that leaves a knob out of the logic file gets
# (old files have no StaggerU or 1LDSBuffer).
TENSILE_KNOB_DEFAULTS: dict[str, Any] = subset(
    (
        "KernelLanguage",
        "ThreadTile",
        "WorkGroup",
        "DepthU",
        "VectorWidth",
        "GlobalReadVectorWidth",
        "GlobalSplitU",
        "PrefetchGlobalRead",
        "PrefetchLocalRead",
        "LdsPadA",
        "LdsPadB",
        "WorkGroupMapping",
        "StaggerU",
        "1LDSBuffer",
        "InnerUnroll",
    )
)


class LogicFileError(ValueError):
    """A logic file is not a Tensile list-format library logic; the message names the file and the field."""


@dataclass
class LogicFile:
    path: Path
    minimum_required_version: str
    schedule: str
    architecture: str | dict
    device_names: list
    problem_type: dict
    solutions: list[dict]  # raw solution dicts, in file order
    solution_indices: list[int]  # Tensile's repaired SolutionIndex of each solution (FixSolutionIndices)
    index_order: list[int]
    exact_rows: list[tuple[tuple[int, ...], int, float]]  # (sizes, solution position, gflops)
    distance: str
    perf_metric: str
    library_name: str

    @property
    def key_length(self) -> int:
        return len(self.exact_rows[0][0]) if self.exact_rows else 4


def solution_knobs(solution: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The tunable knobs of a raw solution dict, Tensile defaults filled in, and the names filled so; plus
    the ISA knobs (oto.tensile.params.ISA_PARAMS: wave32, WMMA, dot layouts) the solution sets, without
    which an RDNA kernel is not the one that shipped (canonical() drops those at Tensile's default)."""
    knobs, defaulted = {}, []
    for name, default in TENSILE_KNOB_DEFAULTS.items():
        if name in solution:
            knobs[name] = solution[name]
        else:
            knobs[name] = default
            defaulted.append(name)
    for name in ISA_PARAMS:
        if name in solution:
            value = solution[name]
            knobs[name] = int(value) if isinstance(value, bool) else value
    return knobs, defaulted


def fix_solution_indices(indices: list[int | None]) -> list[int]:
    """Tensile's MasterSolutionLibrary.FixSolutionIndices: missing/repeated indices continue after the max."""
    present = [i for i in indices if i is not None]
    top = max(present) if present else -1
    seen: set[int] = set()
    out = []
    for i in indices:
        if i is None or i in seen:
            top += 1
            out.append(top)
        else:
            seen.add(i)
            out.append(i)
    return out


def problem_type_name(pt: Mapping[str, Any]) -> str:
    """Tensile's ProblemType.__str__ (ROCm/Tensile:Tensile/SolutionStructs.py) for a GEMM-like problem type.

    Raises KeyError naming the offending field; the caller wraps it with the file name.
    """
    for field in ("DataType", "DestDataType", "ComputeDataType"):
        if field in pt:
            try:
                datatype(pt[field])
            except KeyError:
                raise KeyError(f"field {field}: unknown data type {pt[field]!r}") from None
    if "DataType" not in pt:
        raise KeyError("field DataType: missing")
    a = datatype(pt["DataType"])
    dest = datatype(pt.get("DestDataType", pt["DataType"]))
    compute = datatype(pt.get("ComputeDataType", pt.get("DestDataType", pt["DataType"])))
    hpa = bool(pt.get("HighPrecisionAccumulate", False))
    if hpa and a.char == compute.char and a.char in ("H", "B"):
        compute = DATATYPES["S"]  # Tensile converts HHH+HPA to HHS (and BBB+HPA to BBS)

    num_c = int(pt.get("NumIndicesC", 3))
    if pt.get("OperationType", "GEMM") == "GEMM":
        # initGEMM derives the index assignments from the transposes; the file's copies are ignored.
        ia = [3, 0, 2] if pt.get("TransposeA", False) else [0, 3, 2]
        ib = [1, 3, 2] if pt.get("TransposeB", True) else [3, 1, 2]
        num_c = 3
    else:
        try:
            ia, ib = list(pt["IndexAssignmentsA"]), list(pt["IndexAssignmentsB"])
        except KeyError:
            raise KeyError("field IndexAssignmentsA/B: missing for a TensorContraction") from None

    def tensor(letter: str, idx: list[int], mirror: list[int], conj: bool) -> str:
        return (
            letter
            + "".join(_INDEX_CHARS[i] if i in mirror else _INDEX_CHARS[i].lower() for i in idx)
            + ("C" if conj else "")
        )

    name = "C" + _INDEX_CHARS[:num_c].lower()
    name += "_" + tensor("A", ia, pt.get("MirrorDimsA") or [], bool(pt.get("ComplexConjugateA", False)))
    name += "_" + tensor("B", ib, pt.get("MirrorDimsB") or [], bool(pt.get("ComplexConjugateB", False)))
    name += "_" + a.char
    if (a.char, dest.char, compute.char) in HPA_TYPES:
        name += dest.char + compute.char + "_"
    if pt.get("UseBeta", True):
        name += "B"
    if hpa and not pt.get("SilentHighPrecisionAccumulate", False):
        name += "H"
    if pt.get("UseInitialStridesAB", False):
        name += "I"
    if pt.get("UseInitialStridesCD", False):
        name += "Ic"
    if not pt.get("StridedBatched", True):
        name += "_GB"
    return name


def _element(data: list, i: int, what: str, kind: type | tuple, where: str) -> Any:
    value = data[i]
    if not isinstance(value, kind):
        raise LogicFileError(f"{where}: element {i} ({what}) has type {type(value).__name__}")
    return value


def size_problem(sizes: list[int] | tuple[int, ...]) -> str:
    """Why a size row is not a GEMM problem ('' if it is): every dimension in [1, 2^31 - 1]."""
    for name, v in zip(SIZE_NAMES, sizes, strict=False):
        if not 1 <= v <= SIZE_MAX:
            return f"{name} = {v} is outside [1, {SIZE_MAX}] (a GEMM dimension is a positive rocblas_int)"
    return ""


def _exact_rows(rows: Any, n_solutions: int | None, where: str) -> list[tuple[tuple[int, ...], int, float]]:
    if not isinstance(rows, list):
        raise LogicFileError(f"{where}: element 7 (exact logic) is {type(rows).__name__}, expected a list")
    out = []
    key_len = None
    for r, row in enumerate(rows):
        ok = (
            isinstance(row, list)
            and len(row) == 2
            and isinstance(row[0], list)
            and len(row[0]) in (4, 8)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in row[0])
            and isinstance(row[1], list)
            and len(row[1]) == 2
            and isinstance(row[1][0], int)
            and not isinstance(row[1][0], bool)
            and isinstance(row[1][1], int | float)
            and not isinstance(row[1][1], bool)
        )
        if not ok:
            raise LogicFileError(
                f"{where}: element 7 (exact logic) row {r}: expected [[M, N, B, K(, LDD, LDC, LDA, LDB)], "
                f"[index, gflops]], got {row!r:.120}"
            )
        sizes, (index, gflops) = row
        if key_len is None:
            key_len = len(sizes)
        elif len(sizes) != key_len:
            raise LogicFileError(
                f"{where}: element 7 (exact logic) row {r}: {len(sizes)} sizes, earlier rows {key_len}"
            )
        why = size_problem(sizes)
        if not why and not (math.isfinite(gflops) and gflops >= 0):
            why = f"GFLOPS {gflops!r} is not a finite, non-negative number"
        if why:
            raise LogicFileError(f"{where}: element 7 (exact logic) row {r} {sizes}: {why}")
        if n_solutions is not None and not 0 <= index < n_solutions:
            raise LogicFileError(
                f"{where}: element 7 (exact logic) row {r}: solution index {index} out of range "
                f"(element 5 has {n_solutions} solutions)"
            )
        out.append((tuple(sizes), index, float(gflops)))
    return out


def parse_logic(data: Any, path: str | Path) -> LogicFile:
    """Validate and unpack the loaded YAML of one list-format logic file."""
    path = Path(path)
    where = path.name
    if isinstance(data, dict):
        if "Solutions" in data or "LibraryType" in data:
            raise LogicFileError(
                f"{where}: dict-format library logic (DictLibraryLogic) is not supported; "
                "oto reads the list format rocBLAS ships"
            )
        raise LogicFileError(f"{where}: top level is a mapping, expected the list-format library logic")
    if not isinstance(data, list):
        raise LogicFileError(f"{where}: top level is {type(data).__name__}, expected a list of >= 9 elements")
    if len(data) < 9:
        raise LogicFileError(f"{where}: list has {len(data)} elements, a library logic needs at least 9")

    head = _element(data, 0, "version", dict, where)
    if "MinimumRequiredVersion" not in head:
        raise LogicFileError(f"{where}: element 0 (version) has no MinimumRequiredVersion")
    schedule = _element(data, 1, "schedule name", str, where)
    arch = _element(data, 2, "architecture", (str, dict), where)
    architecture_name(arch, where)  # a mapping must name it
    devices = data[3] if data[3] is not None else []
    if not isinstance(devices, list):
        raise LogicFileError(f"{where}: element 3 (device names) has type {type(devices).__name__}")
    pt = _element(data, 4, "problem type", dict, where)
    try:
        name = problem_type_name(pt)
    except KeyError as exc:
        raise LogicFileError(f"{where}: element 4 (problem type) {exc.args[0]}") from None
    solutions = _element(data, 5, "solutions", list, where)
    for s, sol in enumerate(solutions):
        if not isinstance(sol, dict):
            raise LogicFileError(f"{where}: element 5 (solutions) entry {s} has type {type(sol).__name__}")
        raw = sol.get("SolutionIndex")
        if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool)):
            raise LogicFileError(
                f"{where}: element 5 (solutions) entry {s}: SolutionIndex {raw!r} is not an int"
            )
    index_order = _element(data, 6, "index order", list, where)
    rows = _exact_rows(data[7], len(solutions), where)

    stem = path.stem
    named = stem[len(schedule) + 1 :] if stem.startswith(f"{schedule}_") else None
    if named is not None and named != name:
        raise LogicFileError(
            f"{where}: element 4 (problem type) describes {name}, the file name says {named}"
        )
    perf = data[10] if len(data) > 10 and data[10] else "DeviceEfficiency"
    distance = data[12] if len(data) > 12 and data[12] else "Euclidean"
    return LogicFile(
        path=path,
        minimum_required_version=str(head["MinimumRequiredVersion"]),
        schedule=schedule,
        architecture=arch,
        device_names=list(devices),
        problem_type=pt,
        solutions=solutions,
        solution_indices=fix_solution_indices([s.get("SolutionIndex") for s in solutions]),
        index_order=list(index_order),
        exact_rows=rows,
        distance=str(distance),
        perf_metric=str(perf),
        library_name=name,
    )


def read_logic_file(path: str | Path) -> LogicFile:
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise LogicFileError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise LogicFileError(f"{path.name}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    return parse_logic(data, path)


_TOP_ITEM = re.compile(r"^-(?: |$)", re.M)


def _top_items(path: Path, limit: int = -1) -> tuple[str, list[int]]:
    """A logic file's text (its first ``limit`` characters when given) and where each of its top-level ``- ``
    items starts (block layout)."""
    try:
        with path.open() as f:
            text = f.read(limit)
    except OSError as exc:
        raise LogicFileError(f"{path}: cannot read: {exc.strerror}") from exc
    return text, [m.start() for m in _TOP_ITEM.finditer(text)]


# A logic file's first four elements (version, schedule, architecture, device names) fit in this many
# characters; a file whose head does not is read whole.
_HEAD_CHARS = 65536


def read_exact_rows(path: str | Path) -> list[tuple[tuple[int, ...], int, float]]:
    """Element 7 (exact logic) of a logic file, checked like :func:`read_logic_file` does, without parsing
    its solutions (most of the file), so a dry-run can check a whole deck's sizes in well under a second.
    Files not in block layout (one top-level item per ``- `` line) are parsed in full."""
    path = Path(path)
    text, starts = _top_items(path)
    if text.startswith("-") and len(starts) >= 9:
        rows = _flow_rows(text[starts[7] + 1 : starts[8]])
        if rows is not None:
            return _exact_rows(rows, None, path.name)
    return read_logic_file(path).exact_rows


_FLOW_LIST = re.compile(r"\[([^\[\]]*)\]")
_NUMBER = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*")


def read_architecture(path: str | Path) -> str:
    """Element 2 (the architecture the file is for, a name or an ``{Architecture: ...}`` mapping) of a logic
    file, from its first elements only when the file is in block layout, so a dry-run can check whose library
    a folder is without parsing its solutions."""
    path = Path(path)
    text, starts = _top_items(path, _HEAD_CHARS)  # the head only: the dry-run reads every file whole once
    head = None
    if text.startswith("-") and len(starts) >= 4:
        try:
            head = yaml.load(text[: starts[3]], Loader=_Loader)
        except yaml.YAMLError:
            head = None
    if not isinstance(head, list) or len(head) < 3:
        return architecture_name(read_logic_file(path).architecture, path.name)
    return architecture_name(_element(head, 2, "architecture", (str, dict), path.name), path.name)


def architecture_name(arch: str | Mapping[str, Any], where: str = "") -> str:
    """The GPU a logic file's element 2 names (a name, or a mapping with an ``Architecture`` field)."""
    if isinstance(arch, Mapping):
        if "Architecture" not in arch:
            raise LogicFileError(f"{where}: element 2 (architecture) dict has no 'Architecture' field")
        return str(arch["Architecture"])
    return str(arch)


def _flow_rows(chunk: str) -> list | None:
    """The rows of an exact-logic block written as ``- - [M, N, B, K]`` / ``  - [index, gflops]`` lines, or
    None when the block is written any other way (the caller then parses YAML)."""
    lists = _FLOW_LIST.findall(chunk)
    if len(lists) % 2 or _FLOW_LIST.sub("", chunk).strip("- \n"):
        return None
    values = []
    for text in lists:
        items = text.split(",")
        if not all(_NUMBER.fullmatch(x) for x in items):
            return None
        values.append([float(x) if any(c in x for c in ".eE") else int(x) for x in items])
    return [[values[i], values[i + 1]] for i in range(0, len(values), 2)]


def read_logic_dir(path: str | Path) -> list[LogicFile]:
    """Every ``*.yaml`` logic file of a folder, sorted by name."""
    path = Path(path)
    files = sorted(path.glob("*.yaml"))
    if not files:
        raise LogicFileError(f"{path}: no *.yaml logic files")
    return [read_logic_file(f) for f in files]


def check_logic_files(paths: list[str | Path], limits: Any = None) -> list[LogicFile]:
    """Read logic files and judge every solution as Tensile will (:func:`oto.tensile.legality.check_raw`);
    raise LogicFileError naming the file, the solution and Tensile's reasons for the first one it would not
    build. ``limits``: the arch's :class:`oto.tensile.legality.Limits`."""
    from oto.gemm import Library
    from oto.tensile import legality

    files = []
    for path in paths:
        lf = read_logic_file(path)
        library = Library.parse(lf.library_name)
        for pos, sol in enumerate(lf.solutions):
            params = {k: v for k, v in sol.items() if k in legality.TENSILE_DEFAULTS}
            verdict = legality.check_raw(library, params, limits)
            if not verdict.valid:
                raise LogicFileError(
                    f"{lf.path.name}: element 5 (solutions) entry {pos} "
                    f"({sol.get('SolutionNameMin') or 'unnamed'}): Tensile would not build it: "
                    + "; ".join(verdict.reasons)
                )
        files.append(lf)
    return files
