"""Reader for the results CSV that Tensile's benchmark client writes (``1_BenchmarkProblems/<PT>_00/Data/
00_Final.csv``); layout in ../shared/reference/tensile-golden/csv-format.md.

Fields are separated by ``", "``. Columns: ``GFlops`` (or ``GFlopsPerCU``; the value is the problem index),
``SizeI..`` (one per tensor index: M, N, batch, K for batched GEMM), ``LDD, LDC, LDA, LDB``, ``WinnerFreq``,
optionally ``WinnerGFlops, WinnerTimeUS, WinnerIdx, WinnerName`` (CSVExportWinner), ``TotalFlops,
WinnerPower, WinnerTemperature``, then one GFlops column per solution in benchmark-library order (-1 = the
solution failed validation). With NumBenchmarks k, every problem appears k times (run 0, then run 1, ...).

A client that crashes leaves a truncated file: the last line may be cut or missing. That is data, not an
error: the complete rows are returned and ``truncated`` says what was cut. A header that does not match the
expected layout (missing or extra columns, other solutions than expected) is an error naming file and column.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

LEADING = ("LDD", "LDC", "LDA", "LDB", "WinnerFreq")
WINNER = ("WinnerGFlops", "WinnerTimeUS", "WinnerIdx", "WinnerName")
TRAILING = ("TotalFlops", "WinnerPower", "WinnerTemperature")
METRICS = {"GFlops": "DeviceEfficiency", "GFlopsPerCU": "CUEfficiency"}


class TensileCsvError(ValueError):
    """The file does not have the results layout; the message names the file and the column."""


@dataclass(frozen=True)
class ResultRow:
    problem: int  # problem index (order of problem-size= lines in ClientParameters.ini)
    run: int  # benchmark repetition: k-th occurrence of this problem index in the file
    sizes: tuple[int, ...]  # SizeI.. : M, N, batch, K for batched GEMM
    lds: tuple[int, int, int, int]  # LDD, LDC, LDA, LDB
    total_flops: int
    gflops: tuple[float, ...]  # one per solution column; -1 = validation failed, nan = skipped

    def time_us(self, solution: int) -> float:
        """Time per launch in µs (flops / GFlops / 1000); NaN when the solution has no valid number."""
        g = self.gflops[solution]
        return self.total_flops / (g * 1e3) if g > 0 and math.isfinite(g) else math.nan


@dataclass(frozen=True)
class ResultsTable:
    path: Path
    metric: str  # DeviceEfficiency | CUEfficiency
    winner_columns: bool
    size_columns: tuple[str, ...]
    solutions: tuple[str, ...]  # solution names, column order
    rows: tuple[ResultRow, ...]
    truncated: str = ""  # why the file ends early ("" when complete)
    notes: tuple[str, ...] = field(default_factory=tuple)


def read_results(
    path: Path | str,
    expected_solutions: Sequence[str] | None = None,
    expected_indices: int | None = None,
    expected_count: int | None = None,
) -> ResultsTable:
    """Parse a results CSV. ``expected_solutions`` (names, in order) checks the solution columns,
    ``expected_count`` only their number (the solutions YAML of Tensile 4.44 does not carry the names);
    ``expected_indices`` (4 for batched GEMM) checks the number of ``Size`` columns."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: results CSV not found (the client did not write it)")
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if not raw.strip():
        return ResultsTable(
            path, "DeviceEfficiency", False, (), tuple(expected_solutions or ()), (), "empty file"
        )
    complete_last = raw.endswith("\n")
    lines = raw.splitlines()
    header = _fields(lines[0])
    if len(lines) == 1 and not complete_last:
        raise TensileCsvError(f"{path}: header line is cut off (client crashed while writing it)")
    size_cols, winner, solutions = _layout(path, header, expected_solutions, expected_indices)
    if expected_count is not None and len(solutions) != expected_count:
        what = "missing" if len(solutions) < expected_count else "extra"
        raise TensileCsvError(
            f"{path}: {len(solutions)} solution columns, the solutions file lists {expected_count} "
            f"({what} column(s))"
        )
    n_fixed = 1 + len(size_cols) + len(LEADING) + (len(WINNER) if winner else 0) + len(TRAILING)
    rows: list[ResultRow] = []
    runs: dict[int, int] = {}
    truncated = ""
    for lineno, line in enumerate(lines[1:], start=2):
        last = lineno == len(lines)
        if not line.strip():
            if last:
                continue
            raise TensileCsvError(f"{path}:{lineno}: empty line inside the data")
        values = _fields(line)
        if len(values) != len(header) or (last and not complete_last):
            if last:  # the client died while writing this line
                truncated = f"line {lineno} is incomplete ({len(values)} of {len(header)} fields)"
                break
            raise TensileCsvError(f"{path}:{lineno}: {len(values)} fields, the header has {len(header)}")
        try:
            problem = int(values[0])
            sizes = tuple(int(v) for v in values[1 : 1 + len(size_cols)])
            o = 1 + len(size_cols)
            lds = tuple(int(v) for v in values[o : o + 4])
            total = int(values[n_fixed - 3])
            gflops = tuple(_float(v) for v in values[n_fixed:])
        except ValueError as exc:
            raise TensileCsvError(f"{path}:{lineno}: {exc}") from None
        run = runs.get(problem, 0)
        runs[problem] = run + 1
        rows.append(ResultRow(problem, run, sizes, lds, total, gflops))  # type: ignore[arg-type]
    return ResultsTable(
        path, METRICS[header[0]], winner, tuple(size_cols), tuple(solutions), tuple(rows), truncated
    )


def _fields(line: str) -> list[str]:
    row = next(csv.reader(io.StringIO(line), skipinitialspace=True), [])
    return [v.strip() for v in row]


def _float(v: str) -> float:
    if v in ("", "nan", "-nan"):
        return math.nan
    return float(v)


def _layout(
    path: Path, header: list[str], expected: Sequence[str] | None, expected_indices: int | None
) -> tuple[list[str], bool, list[str]]:
    if not header or header[0] not in METRICS:
        raise TensileCsvError(
            f"{path}: column 1 is {header[0] if header else ''!r}, expected one of {sorted(METRICS)}"
        )
    i = 1
    size_cols = []
    while i < len(header) and header[i].startswith("Size"):
        size_cols.append(header[i])
        i += 1
    if not size_cols:
        raise TensileCsvError(f"{path}: missing column 'SizeI' after {header[0]!r}")
    if expected_indices is not None and len(size_cols) != expected_indices:
        raise TensileCsvError(
            f"{path}: {len(size_cols)} Size columns ({', '.join(size_cols)}), expected {expected_indices}"
        )
    winner = len(header) > i + len(LEADING) and header[i + len(LEADING)] == WINNER[0]
    fixed = list(LEADING) + (list(WINNER) if winner else []) + list(TRAILING)
    for j, name in enumerate(fixed):
        got = header[i + j] if i + j < len(header) else None
        if got != name:
            raise TensileCsvError(
                f"{path}: missing column {name!r} (column {i + j + 1} is {got!r})"
                if name not in header
                else f"{path}: column {i + j + 1} is {got!r}, expected {name!r}"
            )
    solutions = header[i + len(fixed) :]
    if expected is not None:
        missing = [s for s in expected if s not in solutions]
        extra = [s for s in solutions if s not in expected]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing solution column(s) {missing}")
            if extra:
                parts.append(f"extra column(s) {extra}")
            raise TensileCsvError(f"{path}: {'; '.join(parts)} (expected {len(expected)} solution columns)")
        if list(solutions) != list(expected):
            raise TensileCsvError(f"{path}: solution columns are not in benchmark-library order")
    elif not solutions:
        raise TensileCsvError(f"{path}: no solution columns after {fixed[-1]!r}")
    return size_cols, winner, solutions
