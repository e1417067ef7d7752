"""Reading an installed rocBLAS Tensile library folder (``/opt/rocm/lib/rocblas/library``) into libraries.

A ``.dat`` is msgpack of Tensile's MasterSolutionLibrary state (research/tensile.md §4.3); the ``.yaml`` twin
holds the same tree. The tree is walked Hardware → ProblemMap(OperationIdentifier) → Problem predicates →
Matching (key [M, N, K], solution index, speed); a lazy parent has Placeholder leaves naming child files
that hold the solutions and the Matching table.

A .dat does not keep every tunable parameter. ``sizeMapping`` gives WorkGroup, ThreadTile, DepthU,
GlobalSplitU, StaggerU, WorkGroupMapping and KernelLanguage (``sourceKernel``); the minimal solution name
carries the parameters that vary within the library (``VW4``, ``PGR1``, ``LPB2``…). Whatever is in neither is
reported in ``defaulted`` and left for ``oto.tensile.params.canonical`` to default.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import yaml

from oto.gemm import DATATYPES, datatype
from oto.tensile.logic_reader import problem_type_name
from oto.tensile.params import PARAMS
from oto.tensile.provenance import DAT_KEY

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_SIZE_MAPPING = {
    "WorkGroup": "workGroup",
    "ThreadTile": "threadTile",
    "DepthU": "depthU",
    "GlobalSplitU": "globalSplitU",
    "StaggerU": "staggerU",
    "WorkGroupMapping": "workGroupMapping",
}
# Tensile abbreviates a parameter name by dropping its lower-case letters (Common.py getNameAbbreviation).
_NAME_KEYS = {
    "VW": "VectorWidth",
    "GRVW": "GlobalReadVectorWidth",
    "PGR": "PrefetchGlobalRead",
    "PLR": "PrefetchLocalRead",
    "LPA": "LdsPadA",
    "LPB": "LdsPadB",
    "1LDSB": "1LDSBuffer",
    "IU": "InnerUnroll",
}
_TOKEN = re.compile(r"^([0-9A-Z]*[A-Z])(n?\d+)$")
_NUMBER = re.compile(r"^n?\d+$")
_OPERATION = re.compile(
    r"^Contraction_l_A(?P<a>[a-zA-Z]+?)(?P<ca>C?)_B(?P<b>[a-zA-Z]+?)(?P<cb>C?)_Cijk_Dijk$"
)


class DatFileError(ValueError):
    """A rocBLAS library file is unreadable or not a Tensile master solution library; names the file."""


@dataclass
class DatLibrary:
    """One problem type found in a rocBLAS library folder."""

    path: Path  # file holding its solutions and Matching table
    library_name: str
    problem_type: dict  # Tensile ProblemType keys rebuilt from the .dat's problemType
    architecture: str
    solutions: list[dict] = field(default_factory=list)  # {index, name, knobs, defaulted}, file order
    rows: list[tuple[tuple[int, int, int], int, float]] = field(
        default_factory=list
    )  # (M,N,K), position, speed
    distance: str = "Euclidean"
    perf_metric: str = "DeviceEfficiency"


def read_dat_file(path: str | Path) -> Any:
    """Load a msgpack ``.dat`` (or its ``.yaml`` twin) as plain data."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatFileError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        if path.suffix == ".yaml":
            data = yaml.load(raw, Loader=_Loader)
        else:
            data = msgpack.unpackb(raw, strict_map_key=False, raw=False)
    except (yaml.YAMLError, ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError) as exc:
        raise DatFileError(
            f"{path.name}: not a {'YAML' if path.suffix == '.yaml' else 'msgpack'} file: {exc}"
        ) from exc
    if not isinstance(data, dict) or "library" not in data or not isinstance(data["library"], dict):
        raise DatFileError(
            f"{path.name}: not a Tensile solution library (no 'library' mapping at the top level)"
        )
    if not isinstance(data.get("solutions", []), list):
        raise DatFileError(f"{path.name}: 'solutions' is not a list")
    return data


def dat_provenance(path: str | Path) -> dict[str, Any] | None:
    """The provenance block oto writes into a ``TensileLibrary.dat`` (numbers, backends, per library the
    simulator's model or Tensile's version); None for a library oto did not write (a shipped one)."""
    block = read_dat_file(path).get(DAT_KEY)
    return dict(block) if isinstance(block, Mapping) else None


def name_params(name: str) -> dict[str, Any]:
    """Tunable knobs spelled in a minimal solution name, e.g. ``..._PGR1_TT4_4_VW2_...`` → VW 2, PGR 1."""
    found: dict[str, list[int]] = {}
    key = None
    for token in name.split("_"):
        m = _TOKEN.match(token)
        if m:
            key = m[1]
            found.setdefault(key, []).append(_int(m[2]))
        elif key is not None and _NUMBER.match(token):
            found[key].append(_int(token))  # a list value such as TT4_4
        else:
            key = None
    return {_NAME_KEYS[k]: v[0] for k, v in found.items() if k in _NAME_KEYS and len(v) == 1}


def _int(text: str) -> int:
    return -int(text[1:]) if text.startswith("n") else int(text)


def solution_knobs(sol: Mapping[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """Recoverable knobs of one .dat solution and the names of the knobs it does not record."""
    sm = sol.get("sizeMapping")
    if not isinstance(sm, dict):
        raise DatFileError(f"{where}: solution {sol.get('index')} has no sizeMapping")
    knobs: dict[str, Any] = {}
    for param, key in _SIZE_MAPPING.items():
        if key in sm:
            knobs[param] = list(sm[key]) if isinstance(sm[key], list) else sm[key]
    if "sourceKernel" in sm:
        knobs["KernelLanguage"] = "Source" if sm["sourceKernel"] else "Assembly"
    for param, value in name_params(str(sol.get("name", ""))).items():
        knobs.setdefault(param, value)
    knobs.update(size_asserts(sol.get("problemPredicate")))
    return knobs, [p for p in PARAMS if p not in knobs]


# The size-multiple predicates a solution's Assert*ElementMultiple become (solution_fields.problem_predicate).
_ASSERT_OF_PREDICATE = {
    "Free0SizeMultiple": "AssertFree0ElementMultiple",
    "Free1SizeMultiple": "AssertFree1ElementMultiple",
    "BoundSizeMultiple": "AssertSummationElementMultiple",
}


def size_asserts(pred: Any) -> dict[str, int]:
    """The Assert*ElementMultiple a solution's problem predicate holds (the sizes it can solve), > 1 only."""
    found: dict[str, int] = {}
    if not isinstance(pred, Mapping):
        return found
    if pred.get("type") == "And":
        for sub in pred.get("value") or []:
            found.update(size_asserts(sub))
    elif pred.get("type") in _ASSERT_OF_PREDICATE:
        value = pred.get("value")
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            found[_ASSERT_OF_PREDICATE[pred["type"]]] = value
    return found


def problem_type_of(pt: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Tensile ProblemType keys (as in a logic file) rebuilt from a .dat solution's ``problemType``."""
    m = _OPERATION.match(str(pt.get("operationIdentifier", "")))
    if not m:
        raise DatFileError(f"{where}: unsupported operationIdentifier {pt.get('operationIdentifier')!r}")
    try:
        a, dest = datatype(pt["aType"]), datatype(pt["dType"])
        compute = datatype(pt["computeType"]) if "computeType" in pt else None
    except KeyError as exc:
        raise DatFileError(f"{where}: problemType has unknown or missing data type {exc}") from None
    hpa = bool(pt.get("highPrecisionAccumulate", False))
    if compute is None:
        # 4.x .dat files do not store the compute type: HPA accumulates half/bf16 in float and int8 in int32.
        compute = (DATATYPES["I"] if a.char in ("I8", "4xi8") else DATATYPES["S"]) if hpa else dest
    return {
        "OperationType": "GEMM",
        "DataType": a.enum,
        "DestDataType": dest.enum,
        "ComputeDataType": compute.enum,
        "HighPrecisionAccumulate": hpa,
        "TransposeA": m["a"] == "lik",
        "TransposeB": m["b"] == "jlk",
        "ComplexConjugateA": bool(m["ca"]),
        "ComplexConjugateB": bool(m["cb"]),
        "UseBeta": bool(pt.get("useBeta", True)),
        "Batched": True,
        "StridedBatched": bool(pt.get("stridedBatched", True)),
        "UseInitialStridesAB": bool(pt.get("useInitialStridesAB", False)),
        "UseInitialStridesCD": bool(pt.get("useInitialStridesCD", False)),
    }


def _processor(pred: Any) -> str | None:
    """The gfx name an AMDGPU hardware predicate requires ('fallback' for TruePred)."""
    if not isinstance(pred, dict):
        return None
    kind = pred.get("type")
    if kind == "TruePred":
        return "fallback"
    if kind == "AMDGPU":
        return _processor(pred.get("value"))
    if kind == "Processor":
        return str(pred.get("value"))
    if kind == "And":
        for sub in pred.get("value") or []:
            found = _processor(sub)
            if found and found != "fallback":
                return found
    return None


def _leaves(lib: Any, where: str, perf: str) -> Iterator[tuple[dict, str]]:
    """Matching and Placeholder leaves under a Problem/ProblemMap subtree, with the perf-metric predicate."""
    if not isinstance(lib, dict) or "type" not in lib:
        raise DatFileError(f"{where}: library node is not a typed mapping: {str(lib):.80}")
    kind = lib["type"]
    if kind in ("Matching", "Placeholder"):
        yield lib, perf
    elif kind == "ProblemMap":
        for sub in (lib.get("map") or {}).values():
            yield from _leaves(sub, where, perf)
    elif kind == "Problem":
        for row in lib.get("rows") or []:
            tag = (row.get("predicate") or {}).get("type", "TruePred")
            sub_perf = tag if tag in ("CUEfficiency", "ExperimentalDTree", "ExperimentalGrid") else perf
            yield from _leaves(row.get("library"), where, sub_perf)
    else:
        raise DatFileError(f"{where}: library type {kind!r} is not supported (Matching tables only)")


def _child_path(folder: Path, prefix: str, where: str) -> Path:
    for ext in (".dat", ".yaml"):
        if (folder / f"{prefix}{ext}").is_file():
            return folder / f"{prefix}{ext}"
    raise DatFileError(f"{where}: placeholder names {prefix}, but {prefix}.dat is not in {folder}")


# Libraries found so far, by name, with each one's map from .dat solution index to list position.
_Found = dict[str, tuple[DatLibrary, dict[int, int]]]


def _add_matching(out: _Found, matching: dict, solutions: list, path: Path, arch: str, perf: str) -> None:
    where = path.name
    props = [p.get("type") for p in matching.get("properties") or []]
    if props != ["FreeSizeA", "FreeSizeB", "BoundSize"]:
        raise DatFileError(f"{where}: Matching properties {props} are not [FreeSizeA, FreeSizeB, BoundSize]")
    by_index = {}
    for sol in solutions:
        if not isinstance(sol, dict) or "index" not in sol or "problemType" not in sol:
            raise DatFileError(f"{where}: a solution lacks 'index' or 'problemType'")
        by_index[sol["index"]] = sol
    table = matching.get("table")
    if not isinstance(table, list):
        raise DatFileError(f"{where}: Matching table is not a list")
    found = None
    for r, row in enumerate(table):
        try:
            key, index = [int(v) for v in row["key"]], row["index"]
            speed = float(row.get("speed", 0.0))
        except (TypeError, KeyError, ValueError):
            raise DatFileError(f"{where}: Matching table row {r} is not {{key, index, speed}}") from None
        if len(key) != 3 or index not in by_index:
            raise DatFileError(f"{where}: Matching table row {r}: bad key {key} or unknown solution {index}")
        if found is None:
            found = _library_for(out, by_index[index], solutions, path, arch, perf, matching)
        lib, position = found
        if index not in position:
            raise DatFileError(f"{where}: Matching table row {r}: solution {index} has another problem type")
        lib.rows.append(((key[0], key[1], key[2]), position[index], speed))


def _library_for(
    out: _Found, first: dict, solutions: list, path: Path, arch: str, perf: str, matching: dict
) -> tuple[DatLibrary, dict[int, int]]:
    pt = problem_type_of(first["problemType"], path.name)
    name = problem_type_name(pt)
    if name in out:
        return out[name]  # Tensile merges Matching tables of one problem type the same way
    lib = DatLibrary(
        path, name, pt, arch, distance=str(matching.get("distance", "Euclidean")), perf_metric=perf
    )
    position: dict[int, int] = {}
    for sol in solutions:
        if sol["problemType"] != first["problemType"]:
            continue
        knobs, defaulted = solution_knobs(sol, path.name)
        position[sol["index"]] = len(lib.solutions)
        lib.solutions.append(
            {"index": sol["index"], "name": sol.get("name", ""), "knobs": knobs, "defaulted": defaulted}
        )
    out[name] = (lib, position)
    return out[name]


def master_file(folder: str | Path, arch: str) -> Path:
    """The file rocBLAS would load for ``arch`` (tensile_host.cpp: lazy, then per-arch, then merged)."""
    folder = Path(folder)
    if (folder / arch).is_dir():
        folder = folder / arch
    for stem in (f"TensileLibrary_lazy_{arch}", f"TensileLibrary_{arch}", "TensileLibrary"):
        for ext in (".dat", ".yaml"):
            if (folder / f"{stem}{ext}").is_file():
                return folder / f"{stem}{ext}"
    raise DatFileError(
        f"{folder}: no TensileLibrary_lazy_{arch}.dat, TensileLibrary_{arch}.dat or TensileLibrary.dat"
    )


def read_rocblas_dir(folder: str | Path, arch: str, fallback: bool = False) -> list[DatLibrary]:
    """Every Matching-table library of ``arch`` (and of the HIP fallback rows when ``fallback``), by name."""
    path = master_file(folder, arch)
    master = read_dat_file(path)
    out: _Found = {}
    top = master["library"]
    if top.get("type") != "Hardware":
        raise DatFileError(f"{path.name}: top library is {top.get('type')!r}, expected Hardware")
    for row in top.get("rows") or []:
        proc = _processor(row.get("predicate"))
        if proc != arch and not (fallback and proc == "fallback"):
            continue
        for leaf, perf in _leaves(row.get("library"), path.name, "DeviceEfficiency"):
            if leaf["type"] == "Matching":
                _add_matching(out, leaf, master.get("solutions") or [], path, proc, perf)
                continue
            child_path = _child_path(path.parent, str(leaf.get("value")), path.name)
            child = read_dat_file(child_path)
            for sub, sub_perf in _leaves(child["library"], child_path.name, perf):
                if sub["type"] != "Matching":
                    raise DatFileError(f"{child_path.name}: nested placeholder")
                _add_matching(out, sub, child.get("solutions") or [], child_path, proc, sub_perf)
    if not out:
        raise DatFileError(f"{path.name}: no library for {arch}{' or fallback' if fallback else ''}")
    return [out[k][0] for k in sorted(out)]
