"""Tensile's benchmark client run directly, one sweep per call, in an order oto chooses.

Tensile's ``BenchmarkProblems`` step writes, next to the kernels it built, the client's parameters
(``1_BenchmarkProblems/<PT>_00/00_Final/source/ClientParameters.ini``) and the benchmark library
(``source/library/TensileLibrary.dat``, msgpack, or ``.yaml``), then runs ``tensile_client --config-file
ClientParameters.ini``. The client (Tensile/Source/client/main.cpp) times benchmark run after run, problem
after problem (the ``problem-size=`` blocks of the ini, in order), and at each problem every solution of the
library in index order; it writes one results row per (run, problem) when the problem is done
(ResultFileReporter::postProblem).

So oto controls the order by writing, per call, a copy of the ini whose problem blocks come in the sweep's
order and a copy of the library whose solutions are renumbered in the sweep's order (solutions of several
build batches may share one call: their code objects are all listed). Nothing is rebuilt: Tensile's own
files are read, never changed.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import yaml

from oto.tensile.results_csv import TensileCsvError, read_results

# Keys of one problem's block in ClientParameters.ini (Tensile/ClientWriter.py problemSizeParams).
PROBLEM_KEYS = (
    "problem-size",
    "a-strides",
    "b-strides",
    "c-strides",
    "d-strides",
    "a-zero-pads",
    "b-zero-pads",
    "convolution-problem",
)


class ClientFilesError(ValueError):
    """Tensile's client files are missing or not in the layout the client reads; names the file."""


@dataclass(frozen=True)
class ProblemBlock:
    size: tuple[int, ...]  # problem-size: M, N, batch, K for batched GEMM
    lines: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ClientIni:
    path: Path
    lines: tuple[tuple[str, str], ...]  # (key, value) in file order

    @classmethod
    def read(cls, path: Path) -> ClientIni:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ClientFilesError(f"{path}: unreadable ({exc.strerror or exc})") from None
        lines = []
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            if "=" not in raw:
                raise ClientFilesError(f"{path}:{n}: not a key=value line: {raw!r:.80}")
            key, value = raw.split("=", 1)
            lines.append((key.strip(), value.strip()))
        return cls(Path(path), tuple(lines))

    def value(self, key: str) -> str | None:
        return next((v for k, v in self.lines if k == key), None)

    def values(self, key: str) -> list[str]:
        return [v for k, v in self.lines if k == key]

    def problems(self) -> list[ProblemBlock]:
        blocks: list[ProblemBlock] = []
        current: list[tuple[str, str]] | None = None
        for k, v in self.lines:
            if k == "problem-size":
                if current:
                    blocks.append(_block(current, self.path))
                current = [(k, v)]
            elif k in PROBLEM_KEYS and current is not None:
                current.append((k, v))
            elif current:
                blocks.append(_block(current, self.path))
                current = None
        if current:
            blocks.append(_block(current, self.path))
        return blocks


def _block(lines: list[tuple[str, str]], path: Path) -> ProblemBlock:
    try:
        size = tuple(int(x) for x in lines[0][1].split(","))
    except ValueError:
        raise ClientFilesError(f"{path}: problem-size={lines[0][1]!r} is not a list of integers") from None
    return ProblemBlock(size, tuple(lines))


def client_files(out: Path) -> tuple[Path, Path]:
    """(ClientParameters.ini, benchmark library) of a Tensile benchmark run's output folder."""
    inis = sorted(Path(out).glob("1_BenchmarkProblems/*_00/00_Final/source/ClientParameters.ini"))
    if not inis:
        raise ClientFilesError(
            f"{out}: Tensile wrote no 1_BenchmarkProblems/*_00/00_Final/source/ClientParameters.ini"
        )
    ini = ClientIni.read(inis[0])
    lib = ini.value("library-file")
    if not lib:
        raise ClientFilesError(f"{inis[0]}: no library-file= line")
    path = Path(lib)
    if not path.is_absolute():
        path = inis[0].parent / path
    return inis[0], path


def compose_ini(
    base: ClientIni,
    library: Path,
    code_objects: Sequence[str],
    results: Path,
    problems: Sequence[ProblemBlock],
    benchmarks: int,
) -> str:
    """The ini of one call: ``base`` with its library, code objects, results file, run count and problem
    blocks replaced (the blocks in the given order, where the base had its own)."""
    out: list[str] = []
    placed = {"problems": False, "code": False}
    replaced = {"library-file": str(library), "results-file": str(results), "num-benchmarks": str(benchmarks)}
    seen: set[str] = set()
    for k, v in base.lines:
        if k in PROBLEM_KEYS:
            if not placed["problems"]:
                out += [f"{pk}={pv}" for block in problems for pk, pv in block.lines]
                placed["problems"] = True
        elif k == "code-object":
            if not placed["code"]:
                out += [f"code-object={c}" for c in code_objects]
                placed["code"] = True
        elif k in replaced:
            out.append(f"{k}={replaced[k]}")
            seen.add(k)
        else:
            out.append(f"{k}={v}")
    for k, v in replaced.items():  # a key the base lacked (num-benchmarks has a default in the client)
        if k not in seen:
            out.append(f"{k}={v}")
    if not placed["problems"]:
        out += [f"{pk}={pv}" for block in problems for pk, pv in block.lines]
    if not placed["code"]:
        out += [f"code-object={c}" for c in code_objects]
    return "\n".join(out) + "\n"


# ---- the benchmark library ----


def load_library(path: Path) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ClientFilesError(f"{path}: benchmark library unreadable ({exc.strerror or exc})") from None
    try:
        if Path(path).suffix == ".yaml":
            doc = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        else:
            doc = msgpack.unpackb(raw, strict_map_key=False)
    except (yaml.YAMLError, ValueError, msgpack.UnpackException) as exc:
        raise ClientFilesError(f"{path}: not a Tensile library ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("solutions"), list):
        raise ClientFilesError(f"{path}: no 'solutions' list")
    return doc


def write_library(doc: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".yaml":
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    else:
        path.write_bytes(msgpack.packb(doc))


def _rows_by_solution(doc: dict[str, Any], where: Path) -> dict[int, dict[str, Any]]:
    """A benchmark library's Problem map: solution index -> its row (predicate -> Single solution)."""
    lib = doc.get("library")
    if not isinstance(lib, dict) or lib.get("type") != "Problem" or not isinstance(lib.get("rows"), list):
        raise ClientFilesError(f"{where}: library is not a Problem map of Single solutions")
    out = {}
    for row in lib["rows"]:
        single = row.get("library") if isinstance(row, dict) else None
        if not isinstance(single, dict) or single.get("type") != "Single":
            raise ClientFilesError(f"{where}: a row of the Problem map is not a Single solution")
        out[int(single["index"])] = row
    return out


def compose_library(parts: Sequence[tuple[dict[str, Any], int, Path]]) -> tuple[dict[str, Any], list[str]]:
    """A benchmark library holding the given solutions ((library, index, its file)) renumbered 0..n-1 in that
    order — the order the client times them in — and their names, the CSV's column headers."""
    solutions, rows, names = [], [], []
    for new, (doc, index, where) in enumerate(parts):
        by_index = {int(s["index"]): s for s in doc["solutions"]}
        if index not in by_index:
            raise ClientFilesError(f"{where}: no solution with index {index}")
        sol = copy.deepcopy(by_index[index])
        sol["index"] = new
        row = copy.deepcopy(_rows_by_solution(doc, where).get(index))
        if row is None:
            raise ClientFilesError(f"{where}: solution {index} has no row in the Problem map")
        row["library"]["index"] = new
        solutions.append(sol)
        rows.append(row)
        names.append(str(sol.get("name", "")))
    return {"solutions": solutions, "library": {"type": "Problem", "rows": rows}}, names


# ---- one call ----


@dataclass
class CallRun:
    folder: Path
    ini: Path
    results: Path
    log: Path
    rc: int | None  # None: killed at the timeout
    timed_out: bool
    started: float  # time.monotonic()
    ended: float

    def tail(self, lines: int = 4) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        keep = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return " | ".join(keep[-lines:])


def run_call(client: str, ini: Path, results: Path, timeout_s: float, sampler=None) -> CallRun:
    """``client --config-file ini`` in the ini's folder, killed with its process group at the timeout; the
    sampler (oto.hardware.telemetry.Sampler) reads telemetry while it runs. ``started``..``ended`` spans the
    sampler's first and last reading, so even a call shorter than its period gets two."""
    folder = ini.parent
    log = folder / "client.log"
    cmd = [client, "--config-file", str(ini)]
    with open(log, "w") as fh:
        fh.write("$ " + shlex.join(cmd) + "\n")
        fh.flush()
        started = time.monotonic()
        if sampler is not None:
            sampler.start()
        try:
            proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
            )
        except OSError as exc:
            fh.write(f"# oto: could not start the client: {exc}\n")
            if sampler is not None:
                sampler.stop()
            ended = time.monotonic()
            return CallRun(folder, ini, results, log, 127, False, started, ended)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc, timed_out = None, True
        if sampler is not None:
            sampler.stop()
        ended = time.monotonic()
        fh.write(f"\n# oto: rc={rc} timed_out={timed_out} seconds={ended - started:.1f}\n")
    return CallRun(folder, ini, results, log, rc, timed_out, started, ended)


@dataclass(frozen=True)
class CallCells:
    """What one call measured: (run, problem position, solution position) -> (status, time_us, reason)."""

    cells: dict[tuple[int, int, int], tuple[str, float, str]]
    finished: bool  # the client exited 0 (what its file lacks then is recorded, not re-run)
    problem: str  # what went wrong with the results file ("" when nothing)


def read_call(
    run: CallRun, names: Sequence[str], sizes: Sequence[tuple[int, ...]], benchmarks: int
) -> CallCells:
    """The call's results CSV mapped to its cells by column name and row (run, problem). A file with fewer
    rows or solution columns than planned keeps every cell it has; what it lacks is said, never filled."""
    try:
        table = read_results(run.results, expected_indices=len(sizes[0]) if sizes else None)
    except FileNotFoundError:
        return CallCells({}, run.rc == 0, f"the client wrote no results file {run.results}")
    except TensileCsvError as exc:
        return CallCells({}, run.rc == 0 and not run.timed_out, str(exc))
    column = {n: j for j, n in enumerate(table.solutions)}
    missing_cols = [n for n in names if n not in column]
    cells: dict[tuple[int, int, int], tuple[str, float, str]] = {}
    problems: list[str] = []
    for row in table.rows:
        if row.problem >= len(sizes) or row.run >= benchmarks:
            problems.append(f"row for problem {row.problem} run {row.run} the call did not plan")
            continue
        if tuple(row.sizes) != tuple(sizes[row.problem]):
            problems.append(
                f"row for problem {row.problem} has sizes {list(row.sizes)}, "
                f"the call planned {list(sizes[row.problem])}"
            )
            continue
        for j, name in enumerate(names):
            col = column.get(name)
            if col is None:
                continue
            g = row.gflops[col]
            key = (row.run, row.problem, j)
            if g > 0 and math.isfinite(g):
                cells[key] = ("ok", row.time_us(col), "")
            elif g == -1:
                cells[key] = (
                    "validation_failed",
                    math.nan,
                    "client reported -1 GFlops: wrong results or failed predicates",
                )
            else:
                cells[key] = ("crash", math.nan, f"client reported {g} GFlops (kernel skipped)")
    planned = benchmarks * len(sizes)
    got = len({(r.run, r.problem) for r in table.rows})
    if missing_cols:
        problems.append(
            f"{len(table.solutions)} solution column(s), the call planned {len(names)}: no column for "
            + ", ".join(missing_cols[:3])
            + (" …" if len(missing_cols) > 3 else "")
        )
    if got < planned:
        problems.append(
            f"{got} of {planned} planned row(s)" + (f"; {table.truncated}" if table.truncated else "")
        )
    finished = run.rc == 0 and not run.timed_out
    return CallCells(cells, finished, f"{run.results}: " + "; ".join(problems) if problems else "")
