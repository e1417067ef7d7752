"""Build and write a Tensile MasterSolutionLibrary (``TensileLibrary*.dat`` / ``.yaml``) without Tensile.

Reproduces what TensileCreateLibrary (TCL, ROCm/Tensile 4.44) writes for logic files in the rocBLAS list
format: the tree ``MasterSolutionLibrary.FromOriginalState`` builds (ROCm/Tensile:Tensile/SolutionLibrary.py)
with hardware -> operation -> performance metric -> fp16 alt impl (round) -> type predicates -> [lazy
placeholder] -> Matching table; the merging and index remapping of
``TensileCreateLibrary.makeMasterLibraries``; and every solution's fields (derived in
:mod:`oto.tensile.solution_fields`). Dict key order follows Tensile's ``state()``, so the msgpack bytes
match TCL's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import yaml

from oto.gemm import datatype
from oto.tensile import solution_fields as sf

_PROPERTY_KEYS = {2: "FreeSizeA", 3: "FreeSizeB", 1: "BoundSize"}


def read_logic(path: str | Path) -> Any:
    """A logic file's raw YAML (list or dict form)."""
    with open(path) as f:
        return yaml.load(f, Loader=yaml.CSafeLoader)


def _logic_dict(data: Any) -> dict[str, Any]:
    """LibraryIO.parseLibraryLogicList / parseLibraryLogicData: the list form as the dict form."""
    if isinstance(data, dict):
        out = dict(data)
    else:
        if len(data) < 9:
            raise ValueError(f"logic list has {len(data)} elements, TCL needs at least 9")
        arch = data[2]
        out = {
            "MinimumRequiredVersion": data[0]["MinimumRequiredVersion"],
            "ScheduleName": data[1],
            "DeviceNames": data[3],
            "ProblemType": data[4],
            "Solutions": data[5],
            "ArchitectureName": arch["Architecture"] if isinstance(arch, dict) else arch,
            "LibraryType": "Matching",
            "Library": {
                "indexOrder": data[6],
                "table": data[7],
                "distance": data[12] if len(data) > 12 and data[12] else "Euclidean",
            },
        }
        if isinstance(arch, dict):
            out.update({k: arch[k] for k in ("CUCount", "IsAPU") if k in arch})
        if len(data) > 10 and data[10]:
            out["PerfMetric"] = data[10]
        out["Fp16AltImpl"] = len(data) > 11 and data[11] == "Fp16AltImpl"
        out["Fp16AltImplRound"] = len(data) > 13 and data[13] == "Fp16AltImplRound"
    out.setdefault("CUCount", None)
    out.setdefault("IsAPU", None)
    out.setdefault("Fp16AltImpl", False)
    out.setdefault("Fp16AltImplRound", False)
    if out.get("LibraryType", "Matching") != "Matching":
        raise ValueError(f"library type {out['LibraryType']!r} is not supported (only Matching)")
    return out


@dataclass(eq=False)
class _Solution:
    """One solution; table rows point at it so re-indexing updates them (IndexSolutionLibrary)."""

    index: int | None
    state: dict[str, Any]
    pt: sf.ProblemTypeInfo
    fields: dict[str, Any] = field(default_factory=dict)

    def to_state(self, name: str) -> dict[str, Any]:
        s = self.state
        return {
            "name": name,
            "problemType": self.pt.state(),
            "hardwarePredicate": {"type": "TruePred"},
            "problemPredicate": sf.problem_predicate(s, self.pt),
            "taskPredicate": sf.task_predicate(s),
            "sizeMapping": sf.size_mapping(s),
            "debugKernel": s.get("DebugKernel", False),
            # ReadOriginalInfo goes through str(); a missing SolutionIndex gives -1.
            "libraryLogicIndex": int(str(s["SolutionIndex"])) if "SolutionIndex" in s else -1,
            "index": self.index,
            "ideals": s.get("Ideals", {}),
            "linearModel": s.get("LinearModel", {}),
        }


# Library nodes are plain dicts in state() order; Matching rows hold _Solution objects until serialised.


def _row(predicate: dict[str, Any], library: dict[str, Any]) -> dict[str, Any]:
    return {"predicate": predicate, "library": library}


def _problem(predicate: dict[str, Any], library: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Problem", "rows": [_row(predicate, library)]}


def _matching(lib: Mapping[str, Any], solutions: Sequence[_Solution]) -> dict[str, Any]:
    """MatchingLibrary.FromOriginalState: rows name solutions by list position; keys follow indexOrder."""
    order, distance = lib["indexOrder"], lib["distance"]
    keys = dict(_PROPERTY_KEYS, **({0: "BatchSize"} if distance == "Equality" else {}))
    positions = [i for i, j in enumerate(order) if j in keys]
    table = []
    for sizes, (position, speed, *_) in lib["table"]:
        entry = {"key": [sizes[i] for i in positions], "index": solutions[position]}
        if distance != "GridBased":
            entry["speed"] = speed
        table.append(entry)
    table.sort(key=lambda r: r["key"])
    return {
        "type": "Matching",
        "properties": [{"type": keys[i], "index": 0} for i in order if i in keys],
        "table": table,
        "distance": distance,
    }


@dataclass
class _Master:
    solutions: list[_Solution]
    library: dict[str, Any]
    lazy: dict[str, _Master] = field(default_factory=dict)


def _library_from_logic(d: Mapping[str, Any], lazy: bool) -> _Master:
    """MasterSolutionLibrary.FromOriginalState for one parsed logic file."""
    pt = sf.ProblemTypeInfo.from_dict(
        dict(d["ProblemType"], Fp16AltImpl=d["Fp16AltImpl"], Fp16AltImplRound=d["Fp16AltImplRound"])
    )
    arch = d["ArchitectureName"]
    isa = (0, 0, 0) if arch == "fallback" else sf.isa_tuple(arch)
    sols = [_Solution(sol.get("SolutionIndex"), sf.derive(sol, pt, isa), pt) for sol in d["Solutions"]]
    _fix_indices(sols)

    predicate = (
        {"type": "EqualityMatching"} if d["Library"]["distance"] == "Equality" else {"type": "TruePred"}
    )
    selection = _problem(predicate, _matching(d["Library"], sols))
    name = "TensileLibrary" + pt.placeholder_suffix()
    inner = {"type": "Placeholder", "value": None} if lazy else selection

    lib = _problem(sf.and_predicate(pt.type_predicates()), inner)
    rnd = d["Fp16AltImplRound"]
    lib = _problem({"type": "Fp16AltImplRound"} if rnd else {"type": "TruePred"}, lib)
    name += "_Fp16AltRnz" if rnd else ""
    alt = d["Fp16AltImpl"]
    lib = _problem({"type": "Fp16AltImpl"} if alt else {"type": "TruePred"}, lib)
    name += "_Fp16Alt" if alt and not d.get("Fp16AltImplRnz") else ""
    metric = d.get("PerfMetric", "DeviceEfficiency")
    lib = _problem({"type": metric} if metric != "DeviceEfficiency" else {"type": "TruePred"}, lib)
    name += f"_{metric}" if metric != "DeviceEfficiency" else ""
    op = pt.operation_identifier
    lib = {"type": "ProblemMap", "property": {"type": "OperationIdentifier"}, "map": {op: lib}}
    name += f"_{op}"
    hw = {"type": "Hardware", "rows": [_row(_hardware_predicate(arch, d["CUCount"], d["IsAPU"]), lib)]}
    if d["CUCount"]:
        name += f"_CU{d['CUCount']}"
    if d["IsAPU"] is not None:
        name += "_APU" if d["IsAPU"] == 1 else "_XPU"
    name += f"_{arch}"
    if not lazy:
        return _Master(sols, hw)
    inner["value"] = name
    return _Master([], hw, {name: _Master(sols, selection)})


def _hardware_predicate(arch: str, cu_count: int | None, is_apu: Any) -> dict[str, Any]:
    """Hardware.HardwarePredicate.FromHardware; ``fallback`` matches any device."""
    if arch == "fallback":
        return {"type": "TruePred"}
    proc = {"type": "Processor", "value": arch}
    extra = ([{"type": "CUCount", "value": cu_count}] if cu_count is not None else []) + (
        [{"type": "IsAPU", "value": is_apu}] if is_apu is not None else []
    )
    return {"type": "AMDGPU", "value": {"type": "And", "value": [proc, *extra]} if extra else proc}


def _fix_indices(sols: list[_Solution]) -> None:
    """MasterSolutionLibrary.FixSolutionIndices: missing or repeated indices continue after the maximum."""
    top = max((s.index for s in sols if s.index is not None), default=-1)
    seen: set[int] = set()
    for s in sols:
        if s.index is None or s.index in seen:
            top += 1
            s.index = top
        else:
            seen.add(s.index)


def arch_index_base(arch: str) -> int:
    """MasterSolutionLibrary.ArchitectureIndexMap: hex digits after ``gfx`` shifted left by 18."""
    if arch == "fallback":
        return 0
    m = re.match(r"gfx([0-9a-f]*)", arch)
    if not m:
        raise ValueError(f"cannot map architecture {arch!r} to a solution index base")
    return int(m.group(1), 16) << 18


def _renumber(master: _Master, start: int) -> int:
    """remapSolutionIndicesStartingFrom: lazy children first, then the master's own solutions."""
    for child in master.lazy.values():
        for s in child.solutions:
            s.index, start = start, start + 1
    for s in master.solutions:
        s.index, start = start, start + 1
    return start


def _next_index(master: _Master, start: int) -> int:
    own = [s.index for s in master.solutions]
    lazy = [s.index for c in master.lazy.values() for s in c.solutions]
    return max([start] + [i + 1 for i in own + lazy])


def _merge(into: _Master, other: _Master, start: int = 0) -> int:
    """MasterSolutionLibrary.merge: renumber the other library after ours and merge the trees."""
    cur = _next_index(into, start)
    for name, child in other.lazy.items():
        if name in into.lazy:
            cur = _merge(into.lazy[name], child, cur)
        else:
            for s in child.solutions:
                s.index, cur = cur, cur + 1
            into.lazy[name] = child
    for s in other.solutions:
        s.index, cur = cur, cur + 1
    into.solutions.extend(other.solutions)
    _merge_tree(into.library, other.library)
    return cur


def _merge_tree(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The merge() of ProblemMapLibrary, PredicateLibrary and MatchingLibrary."""
    if a["type"] == "ProblemMap":
        for key, value in b["map"].items():
            if key in a["map"]:
                _merge_tree(a["map"][key], value)
            else:
                a["map"][key] = value
    elif a["type"] == "Matching":
        a["table"] = sorted(a["table"] + b["table"], key=lambda r: r["key"])
    elif a["type"] == "Placeholder":
        pass
    else:
        for row in b["rows"]:
            same = [r for r in a["rows"] if r["predicate"] == row["predicate"]]
            if same:
                _merge_tree(same[0]["library"], row["library"])
            else:
                a["rows"].append(row)
        a["rows"].sort(key=lambda r: _predicate_key(r["predicate"]))


def _predicate_key(p: Any) -> tuple:
    """Properties.Predicate.__lt__: TruePred last, otherwise (tag, index, value)."""
    if isinstance(p, dict):
        if p.get("type") == "TruePred":
            return (1,)
        value = p.get("value")
        if isinstance(value, dict) and "type" not in value:
            value = sorted(value.values())
        if p["type"] in ("TypesEqual", "F32XdlMathOp"):  # DataType objects order by enum value
            value = (
                [datatype(v, bool_is_int=True).enum for v in value]
                if isinstance(value, list)
                else datatype(value, bool_is_int=True).enum
            )
        return (0, p["type"], p.get("index", -(2**63)), _predicate_key(value))
    if isinstance(p, list | tuple):
        return tuple(_predicate_key(v) for v in p)
    return (str(type(p).__name__), p)


def _serialise(node: Any) -> Any:
    if isinstance(node, _Solution):
        return node.index
    if isinstance(node, dict):
        return {k: _serialise(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_serialise(v) for v in node]
    return node


def _master_state(master: _Master, naming: set[str]) -> dict[str, Any]:
    """MasterSolutionLibrary.state after applyNaming(kernelMinNaming)."""
    sols = [s.to_state(sf.kernel_name(s.state, s.pt, naming)) for s in master.solutions]
    return {"solutions": sols, "library": _serialise(master.library)}


def build_master_library(
    logic_files: Sequence[str | Path | Mapping[str, Any] | Sequence[Any]],
    *,
    arch: str,
    lazy: bool = False,
    separate_architectures: bool = False,
) -> dict[str, Any] | tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The library TCL writes for ``logic_files`` with ``--architecture=<arch> --merge-files``.

    Returns the ``TensileLibrary`` state, or with ``lazy`` (which implies separate architectures, as in TCL)
    the parent ``TensileLibrary_lazy_<arch>`` state and ``{child file stem: child state}``. With separate
    architectures solution indices start at :func:`arch_index_base`; merged they start at 0. Every logic file
    must be for ``arch`` (or ``fallback``). Files are merged in name order, whatever order they are given.
    """
    if lazy:
        separate_architectures = True
    # One order whatever order the files come in (TCL walks its logic folder in file-system order;
    # oto.tensile.runtime makes it walk it sorted by path, which for one folder is this order).
    ordered = sorted(logic_files, key=_logic_sort_key)
    parsed = [_logic_dict(read_logic(f) if isinstance(f, str | Path) else f) for f in ordered]
    if not parsed:
        raise ValueError("no logic files")
    for d in parsed:
        if d["ArchitectureName"] not in (arch, "fallback"):
            raise ValueError(f"logic file for {d['ArchitectureName']} given for --architecture={arch}")
    libs = [_library_from_logic(d, lazy) for d in parsed]
    master = libs[0]
    if separate_architectures:
        nxt = _renumber(master, arch_index_base(arch))
        for other in libs[1:]:
            nxt = _merge(master, other, nxt)
    else:
        for other in libs[1:]:
            _merge(master, other)
    # Kernel minimal naming is computed once over every kernel of the run (TCL getKernelWriters).
    every = master.solutions + [s for c in master.lazy.values() for s in c.solutions]
    naming = sf.min_naming([s.state for s in every])
    state = _master_state(master, naming)
    if not lazy:
        return state
    return state, {name: _master_state(child, naming) for name, child in master.lazy.items()}


def _logic_sort_key(f: Any) -> tuple:
    """Files by name; logic given as data by its problem type's name (after the files)."""
    if isinstance(f, str | Path):
        return (0, Path(f).name)
    data = _logic_dict(f)
    return (1, sf.ProblemTypeInfo.from_dict(data["ProblemType"]).name, str(data["ArchitectureName"]))


def write_library(obj: Mapping[str, Any], path: str | Path) -> Path:
    """Write a library state as msgpack (``.dat``) or YAML (``.yaml``), as LibraryIO.write does."""
    path = Path(path)
    if path.suffix == ".dat":
        path.write_bytes(msgpack.packb(obj, use_bin_type=True))
    elif path.suffix in (".yaml", ".yml"):
        with open(path, "w") as f:
            yaml.dump(
                obj,
                f,
                Dumper=yaml.CSafeDumper,
                explicit_start=True,
                explicit_end=True,
                default_flow_style=None,
            )
    else:
        raise ValueError(f"unknown library format for {path.name} (use .dat or .yaml)")
    return path
