"""What ``rocblas-bench`` prints for a GEMM, read.

Format followed: rocBLAS 4.4.0 (ROCm/rocBLAS commit b520bc83), ``clients/include/argument_model.hpp``
(``ArgumentModel::log_args`` and ``log_perf``) and ``clients/benchmarks/client.cpp``. After its banner
(``rocBLAS-commit-hash: ...``, ``Tensile-commit-hash: ...``, the device query, ``rocblas-bench INFO: ...``
notes), each timed call prints two lines: a header of the function's arguments then the performance
fields, and the values in the same order::

    transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,cold_iters,hot_iters,rocblas-Gflops,us,CPU-Gflops,CPU-us,norm_error_1
    N,T,512,512,512,1,512,0,512,512, 2, 10, 1234.56, 217.43,8.91,30122.3,1.20456e-07

The argument names are those of the call's ``ArgumentModel`` (``testing_gemm.hpp``: transA, transB, M, N,
K, alpha, lda, beta, ldb, ldc; ``_strided_batched`` adds stride_a/b/c and batch_count; ``_ex`` adds ldd; with
``--log_function_name``/``--log_datatype`` a ``function`` and the ``a_type``..``compute_type`` columns come
first). The performance fields follow: ``cold_iters``, ``hot_iters``, ``rocblas-Gflops`` (the mean over the
hot iterations), ``rocblas-GB/s`` where reported, ``us`` (the mean time of one call); with ``--verify 1``
(``-v 1``) also ``CPU-Gflops``, ``CPU-us`` and ``norm_error_1``: the relative Frobenius norm of the
difference between rocBLAS's result and the CPU reference (``clients/include/norm.hpp``
``norm_check_general('F', ...)``), the larger of host and device pointer modes. Older clients called the
norm column ``rocblas-error``; both are read. Values are ", " or "," separated (``log_perf`` writes both).
Complex alpha/beta print as ``(1: 0)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Columns whose values must be numbers for a row to be usable (sizes and the performance fields).
NUMERIC = ("M", "N", "K", "batch_count", "cold_iters", "hot_iters", "rocblas-Gflops", "us")
NORM_COLUMNS = ("norm_error_1", "rocblas-error")
_HEADER_START = re.compile(r"^(function,)?(a_type,.*?)?transA,transB,")


class BenchOutputError(ValueError):
    """rocblas-bench printed something that is not a result row; names the line."""


@dataclass(frozen=True)
class BenchRow:
    """One result of rocblas-bench: the printed fields by name, and what oto reads of them."""

    fields: dict[str, str]
    line: int  # 1-based line of the values in the output

    @property
    def size(self) -> tuple[int, int, int, int]:
        """(M, N, batch, K)."""
        f = self.fields
        return int(f["M"]), int(f["N"]), int(f.get("batch_count", "1") or 1), int(f["K"])

    @property
    def gflops(self) -> float:
        return float(self.fields["rocblas-Gflops"])

    @property
    def time_us(self) -> float:
        return float(self.fields["us"])

    @property
    def norm_error(self) -> float | None:
        """The verification's relative norm error, None when the run did not verify (no ``-v 1``)."""
        for col in NORM_COLUMNS:
            if col in self.fields:
                return float(self.fields[col])
        return None


@dataclass
class BenchOutput:
    rows: list[BenchRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # malformed lines, each naming its line number
    notes: list[str] = field(default_factory=list)  # rocblas-bench INFO lines (lda raised, ...)


def _split(line: str) -> list[str]:
    """A header or values line split into fields; a complex scalar ``(1: 0)`` is one field."""
    return [v.strip() for v in re.split(r",(?![^()]*\))", line.strip())]


def parse_bench_output(text: str, source: str = "rocblas-bench output") -> BenchOutput:
    """Every result row of a rocblas-bench run. A header without its values line, a values line with
    another number of fields than its header, or a non-number where a number must be is recorded as a
    problem naming ``source`` and the line, and the other rows are kept."""
    out = BenchOutput()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("rocblas-bench INFO"):
            out.notes.append(line)
        if not _HEADER_START.match(line):
            i += 1
            continue
        names = _split(line)
        if i + 1 >= len(lines) or not lines[i + 1].strip():
            out.problems.append(f"{source}:{i + 1}: a result header with no values line after it")
            i += 1
            continue
        values = _split(lines[i + 1])
        where = f"{source}:{i + 2}"
        if _HEADER_START.match(lines[i + 1].strip()):
            out.problems.append(f"{where}: a second header where the values of line {i + 1} should be")
            i += 1
            continue
        if len(values) != len(names):
            out.problems.append(f"{where}: {len(values)} values for the {len(names)} fields of line {i + 1}")
            i += 2
            continue
        fields = dict(zip(names, values, strict=True))
        bad = [c for c in (*NUMERIC, *NORM_COLUMNS) if c in fields and not _number(fields[c])]
        missing = [c for c in ("M", "N", "K", "rocblas-Gflops", "us") if c not in fields]
        if bad or missing:
            what = f"field {bad[0]!r} is {fields[bad[0]]!r}, not a number" if bad else f"no {missing[0]!r}"
            out.problems.append(f"{where}: {what}")
        else:
            out.rows.append(BenchRow(fields, i + 2))
        i += 2
    return out


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
