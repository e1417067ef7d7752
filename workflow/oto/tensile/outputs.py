"""What a Tensile run leaves behind, read: rejection and resource-overflow lines of its console log, the
solutions YAML of a benchmark step, and which solution a candidate's parameters became."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

_OVERFLOW = re.compile(r"(Cijk_[A-Za-z0-9_]+?) overflowed resources\. errorCode=(\d+), msg='([^']*)'")
# KernelWriter.getKernelSource when KernelWriterAssembly set overflowedResources. For VALU kernels Tensile
# 4.44's warning with the kernel name comes out empty (an operator-precedence slip in
# KernelWriterAssembly.functionSuffix), so this line, without a name, is all the log says.
_GENERATION_ERROR = re.compile(r"Generating kernel source resulted in error (\d+)")
# KernelWriterAssembly.functionSuffix's messages for the overflowedResources codes.
RESOURCE_ERRORS = {
    1: "too many vgprs",
    2: "too many sgprs",
    3: "half store requires at least two elements per batch",
    4: "Occupancy limit",
    5: "cannot schedule local reads/writes",
    6: "SIA2 better with occupancy 2",
    7: "too many accvgprs",
}


def name_matches(name: str, params: Mapping[str, Any]) -> bool:
    """Does a Tensile kernel/solution name encode these parameters? (tokens of the full name)"""
    n = f"_{name}_"
    tt, wg = params.get("ThreadTile"), params.get("WorkGroup")
    checks = []
    if tt:
        checks.append(f"_TT{tt[0]}_{tt[1]}_")
    if wg:
        checks.append(f"_WG{wg[0]}_{wg[1]}_{wg[2] if len(wg) > 2 else 1}_")
    for key, tok in (
        ("DepthU", "DU"),
        ("VectorWidth", "VW"),
        ("GlobalSplitU", "GSU"),
        ("PrefetchGlobalRead", "PGR"),
        ("PrefetchLocalRead", "PLR"),
        ("WorkGroupMapping", "WGM"),
        ("InnerUnroll", "IU"),
    ):
        if key in params and int(params[key]) >= 0:
            checks.append(f"_{tok}{int(params[key])}_")
    if "KernelLanguage" in params:
        checks.append("_KLA_" if params["KernelLanguage"] == "Assembly" else "_KLS_")
    return all(c in n for c in checks)


def parse_log(text: str) -> tuple[list[tuple[str, list[str]]], list[tuple[str, int, str]]]:
    """(rejections, overflows) from a Tensile console log.

    rejections: (solution name, its ``reject:`` reasons); overflows: (kernel name, error code, message).
    Tensile wraps long names at 80 columns; continuation lines are joined."""
    rejections: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("reject:"):
            pending.append(line[len("reject:") :].strip())
        elif line.startswith("rejecting solution"):
            name = line[len("rejecting solution") :].strip()
            while i + 1 < len(lines) and re.fullmatch(r"[A-Za-z0-9_]+", lines[i + 1].strip() or "#"):
                i += 1
                name += lines[i].strip()
            rejections.append((name, pending))
            pending = []
        i += 1
    flat = text.replace("\n", "")
    overflows = [(m.group(1), int(m.group(2)), m.group(3)) for m in _OVERFLOW.finditer(flat)]
    return rejections, overflows


def generation_errors(text: str) -> list[int]:
    """The overflowedResources codes of the kernels whose generation failed, one per failed kernel, from
    Tensile's ``Generating kernel source resulted in error N`` lines (they name no kernel)."""
    return [int(m.group(1)) for m in _GENERATION_ERROR.finditer(text)]


def resource_reason(codes: list[int]) -> str:
    """A register_overflow reason for the codes of :func:`generation_errors`."""
    parts = sorted({f"errorCode={c}: {RESOURCE_ERRORS.get(c, 'overflowed resources')}" for c in codes})
    return "Tensile's kernel writer overflowed resources (" + "; ".join(parts) + ")"


_MATCH_KEYS = (
    "KernelLanguage",
    "ThreadTile",
    "WorkGroup",
    "GlobalSplitU",
    "PrefetchGlobalRead",
    "PrefetchLocalRead",
    "WorkGroupMapping",
    "InnerUnroll",
)
# Keys Tensile may resolve (-1 = auto, or forced by another setting); compared only when explicit.
_SOFT_KEYS = (
    "DepthU",
    "VectorWidth",
    "GlobalReadVectorWidth",
    "LdsPadA",
    "LdsPadB",
    "StaggerU",
    "1LDSBuffer",
)


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, list | tuple):
        return tuple(_norm(x) for x in v)
    return v


def solution_matches(solution: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    """Is this solution (a dict of Tensile's solutions YAML) the one built from ``params``?"""
    for key in _MATCH_KEYS:
        if key in params and key in solution and _norm(solution[key]) != _norm(params[key]):
            return False
    for key in _SOFT_KEYS:
        want = params.get(key)
        if want is None or (isinstance(want, int) and want < 0) or key not in solution:
            continue
        if key == "StaggerU" and int(solution[key]) == 0:
            continue  # Tensile forces StaggerU 0 on asm without buffer loads
        if _norm(solution[key]) != _norm(want):
            return False
    return True


def _agreement(solution: Mapping[str, Any], params: Mapping[str, Any]) -> int:
    """How many of the kernel's parameters the solution holds with the same value (after normalising)."""
    return sum(1 for k, v in params.items() if k in solution and _norm(solution[k]) == _norm(v))


def match_solutions(solutions: list[Mapping[str, Any]], kernels: Mapping[str, Mapping[str, Any]]) -> dict:
    """{kernel id: solution position} for the kernels Tensile built, one to one.

    Kernels are given in their fork order and take the solution that agrees with them on the most
    parameters among those :func:`solution_matches` accepts; a solution is never given to two kernels, so
    two ids can never share a results column (a kernel Tensile merged into another is left unmatched)."""
    taken: set[int] = set()
    out: dict[str, int] = {}
    for kid, params in kernels.items():
        fits = [j for j, s in enumerate(solutions) if j not in taken and solution_matches(s, params)]
        if fits:
            best = max(fits, key=lambda j: (_agreement(solutions[j], params), -j))
            out[kid] = best
            taken.add(best)
    return out


def read_solutions(path: Path) -> list[dict[str, Any]]:
    """The solution dicts of Tensile's ``Data/00_Final.yaml`` (elements [2:]), in CSV column order."""
    try:
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(doc, list) or len(doc) < 2:
        raise ValueError(f"{path}: expected Tensile's solutions list [version, sizes, solution...]")
    sols = doc[2:]
    for i, s in enumerate(sols):
        if not isinstance(s, dict) or "SolutionNameMin" not in s and "ThreadTile" not in s:
            raise ValueError(f"{path}: element {i + 2} is not a solution dict")
    return sols


def solution_name(sol: Mapping[str, Any]) -> str:
    return str(sol.get("SolutionNameMin") or sol.get("SolutionName") or "")
