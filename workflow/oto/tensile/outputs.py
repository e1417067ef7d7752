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


# Tensile's abbreviations (Solution.getParameterNameAbbreviation) of the scalar parameters a kernel name may
# carry; which ones it carries depends on the set named together (Solution.getMinNaming: only the keys that
# differ in the set, so a lone kernel's name, or a batch sharing a ThreadTile, has no ``_TT``).
_NAME_TOKENS = {
    "DU": "DepthU",
    "VW": "VectorWidth",
    "GRVW": "GlobalReadVectorWidth",
    "GSU": "GlobalSplitU",
    "PGR": "PrefetchGlobalRead",
    "PLR": "PrefetchLocalRead",
    "WGM": "WorkGroupMapping",
    "IU": "InnerUnroll",
    "LPA": "LdsPadA",
    "LPB": "LdsPadB",
    "SU": "StaggerU",
    "1LDSB": "1LDSBuffer",
}
_SCALAR_TOKEN = re.compile(r"_(" + "|".join(sorted(_NAME_TOKENS, key=len, reverse=True)) + r")(n?\d+)(?=_)")


def name_tokens(name: str) -> dict[str, Any]:
    """The parameters a Tensile kernel/solution name spells out: {parameter: value}, plus ``MacroTile``
    (MT0, MT1) from the ``_MT<a>x<b>x<depth>_`` prefix Tensile always writes."""
    n = f"_{name}_"
    out: dict[str, Any] = {}
    if m := re.search(r"_MT(\d+)x(\d+)x(\d+)_", n):
        out["MacroTile"] = (int(m.group(1)), int(m.group(2)))
        out["DepthU"] = int(m.group(3))
    if m := re.search(r"_TT(\d+)_(\d+)_", n):
        out["ThreadTile"] = (int(m.group(1)), int(m.group(2)))
    if m := re.search(r"_WG(\d+)_(\d+)_(\d+)_", n):
        out["WorkGroup"] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := re.search(r"_KL([AS])_", n):
        out["KernelLanguage"] = "Assembly" if m.group(1) == "A" else "Source"
    for m in _SCALAR_TOKEN.finditer(n):
        raw = m.group(2)
        out[_NAME_TOKENS[m.group(1)]] = -int(raw[1:]) if raw.startswith("n") else int(raw)
    return out


def name_matches(name: str, params: Mapping[str, Any]) -> bool:
    """Could a Tensile kernel/solution name be the kernel built from ``params``? Every parameter the name
    spells out agrees with ``params`` where they set it (values Tensile resolves, -1, are not compared).

    Tensile names kernels by the parameters that differ within the set it names together, so a name carries
    only some of them; the ones it carries tell apart the kernels of that set."""
    tokens = name_tokens(name)
    tt, wg = params.get("ThreadTile"), params.get("WorkGroup")
    if tt and wg and tokens.get("MacroTile", (0, 0)) not in ((0, 0), (tt[0] * wg[0], tt[1] * wg[1])):
        return False
    if tt and "ThreadTile" in tokens and tokens["ThreadTile"] != tuple(int(x) for x in tt):
        return False
    if wg and "WorkGroup" in tokens:
        want = (int(wg[0]), int(wg[1]), int(wg[2]) if len(wg) > 2 else 1)
        if tokens["WorkGroup"] != want:
            return False
    if tokens.get("KernelLanguage", params.get("KernelLanguage")) != params.get("KernelLanguage"):
        return False
    for key in _NAME_TOKENS.values():
        if key in tokens and key in params and not isinstance(params[key], list | tuple):
            value = int(params[key])
            if key == "StaggerU" and tokens[key] == 0:
                continue  # Tensile forces StaggerU 0 on asm kernels without buffer loads
            if value >= 0 and tokens[key] != value:
                return False
    return True


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


# The kernel writer's own RuntimeErrors, printed (PrintSolutionRejectionReason) with the kernel's name before
# Tensile filters the kernel out of the build (KernelWriter.getSourceFileString -> error -2;
# TensileCreateLibrary.filterBuildErrors): KernelWriterAssembly.defineAndResources' VGPR budget check
# ("Generating asm kernel error: total vgpr: 259 not in [0, 256]. kernel=...") and its other checks
# ("Could not find valid memory instruction for operation=..., kernel=...").
_WRITER_ERROR = re.compile(r"^(?P<msg>[^\n]*?)[.,]?\s*kernel=(?P<name>Cijk_[A-Za-z0-9_]+)\s*$", re.M)
# processKernelSource, for any other RuntimeError of a kernel writer.
_UNKNOWN_ERROR = re.compile(
    r"Gracefully handling unknown runtime error when generating kernel: (Cijk_[A-Za-z0-9_]+)"
)


def writer_failures(text: str) -> list[tuple[str, str, str]]:
    """(kernel name, outcome class, Tensile's message) for every kernel whose generation the kernel writer
    refused with a named error: ``register_overflow`` for its VGPR/SGPR budget checks, ``compile_error`` for
    the rest."""
    out = []
    for m in _WRITER_ERROR.finditer(text):
        msg = m.group("msg").strip()
        low = msg.lower()
        overflow = "total vgpr" in low or "total sgpr" in low or "overflowed resources" in low
        out.append((m.group("name"), "register_overflow" if overflow else "compile_error", msg))
    for m in _UNKNOWN_ERROR.finditer(text):
        out.append((m.group(1), "compile_error", "the kernel writer raised a runtime error generating it"))
    return out


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
