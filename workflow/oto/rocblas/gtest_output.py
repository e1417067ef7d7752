"""What ``rocblas-test`` (Google Test) prints for GEMM tests, read per test and per size.

Format followed: rocBLAS 4.4.0 (ROCm/rocBLAS commit b520bc83) with Google Test's console printer.

- Test names: ``clients/gtest/blas3/gemm_gtest.cpp`` ``name_suffix`` (and ``blas_ex/gemm_ex_gtest.cpp``),
  normalised by ``clients/gtest/rocblas_test.cpp`` ``RocBLAS_TestName_to_string`` (``-`` -> ``n``, ``.`` ->
  ``p``): ``<suite>/<test>.blas3_tensile/<yaml name>_<a_type>[b c d compute types]_<TA><TB>_<M>_<N>_<K>_
  <alpha>_<lda>_<ldb>_<beta>_<ldc>[_<ldd>][_<batch_count>][_<stride_a>_<stride_b>_<stride_c>]``, e.g.
  ``_/gemm.blas3_tensile/nightly_blas3_f32_r_NT_512_512_512_1_512_512_0_512``; a repeated name gets a
  ``_<n>`` suffix.
- Results: ``[ RUN      ] <name>``, then ``[       OK ] <name> (<ms> ms)``, ``[  FAILED  ] <name>, where
  GetParam() = ... (<ms> ms)`` or ``[  SKIPPED ] <name> (<ms> ms)``. A failed check prints
  ``<file>:<line>: Failure`` and its message first (``unit.hpp``/``near.hpp`` comparisons: "Expected
  equality of these values", "The difference between ... exceeds ..."). ``clients/common/gtest_helpers.cpp``
  turns a signal into a failure ("Received Segmentation fault signal") and aborts the whole run on its
  per-test alarm (``ROCBLAS_TEST_TIMEOUT``, default 600 s: "Aborting tests due to an alarm timeout").
- A test that started and has no result line is one the process died in (a crash, the alarm, a GPU reset)
  or was killed in by oto's timeout: ``crash`` or ``timeout`` (the caller knows which).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_RUN = re.compile(r"^\[ RUN      \] (\S+)")
_END = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+?)(?:,| \(|$)")
_TIME = re.compile(r"\((\d+) ms\)\s*$")
TYPES = ("f16_r", "bf16_r", "f32_r", "f64_r", "f32_c", "f64_c", "i8_r", "i32_r")
_TYPE = "(?:" + "|".join(TYPES) + ")"
# name_suffix of gemm (one type) and gemm_ex (a, b, c, d and compute types, concatenated).
_GEMM_NAME = re.compile(
    rf"_(?P<types>{_TYPE}(?:{_TYPE}){{0,4}})_(?P<ta>[NTC])(?P<tb>[NTC])_(?P<m>\d+)_(?P<n>\d+)_(?P<k>\d+)_"
    r"(?P<alpha>[0-9a-z]+)_(?P<lda>\d+)_(?P<ldb>\d+)_(?P<beta>[0-9a-z]+)_(?P<ldc>\d+)(?P<rest>(?:_\d+)*)"
    r"(?:_xf32)?(?:_out)?(?:_I64)?(?:_F)?$"
)


@dataclass(frozen=True)
class GemmTestName:
    function: str  # gemm, gemm_batched, gemm_strided_batched, gemm_ex, ...
    types: str  # the a_type (gemm) or a..compute types (gemm_ex) spelled as in the name
    transA: str
    transB: str
    m: int
    n: int
    k: int
    batch: int

    @property
    def size(self) -> tuple[int, int, int, int]:
        return self.m, self.n, self.batch, self.k


def gemm_test_name(name: str) -> GemmTestName | None:
    """The GEMM a rocblas-test test name describes, None for any other test (bad-arg tests included)."""
    parts = name.split("/")
    suite = parts[1].split(".")[0] if len(parts) >= 3 else ""
    if not suite.startswith("gemm") or suite.startswith("gemmt"):
        return None
    m = _GEMM_NAME.search(parts[-1])
    if not m:
        return None
    extra = [int(x) for x in m["rest"].split("_") if x]
    ex = "_ex" in suite
    batched = "batched" in suite
    # after ldc: ldd (_ex), batch_count (batched), stride_a/b/c (strided), a repeat counter at the end
    batch = 1
    if batched:
        at = 1 if ex else 0
        if len(extra) > at:
            batch = extra[at]
    return GemmTestName(suite, m["types"], m["ta"], m["tb"], int(m["m"]), int(m["n"]), int(m["k"]), batch)


@dataclass
class TestOutcome:
    name: str
    status: str  # passed | failed | skipped | died (started, no result line)
    messages: list[str] = field(default_factory=list)
    ms: int | None = None
    gemm: GemmTestName | None = None


@dataclass
class GtestRun:
    tests: list[TestOutcome] = field(default_factory=list)
    aborted: str = ""  # why the run stopped before its end ("" when it finished)

    def by_name(self) -> dict[str, TestOutcome]:
        return {t.name: t for t in self.tests}


def parse_gtest_output(text: str) -> GtestRun:
    """Every test the run started, in order, with its result and the failure messages printed while it ran.
    A test left without a result line (the process died or was killed in it) is ``died``; a line matching
    rocBLAS's alarm abort says why."""
    run = GtestRun()
    current: TestOutcome | None = None
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if m := _RUN.match(line):
            if current is not None:  # a new test started without the last one ending: cannot happen in
                current.status = "died"  # one process; a concatenated log of several runs does this
                run.tests.append(current)
            current = TestOutcome(m.group(1), "running", gemm=gemm_test_name(m.group(1)))
            pending = []
            continue
        if m := _END.match(line):
            status = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
            name = m.group(2)
            if current is not None and current.name == name:
                current.status = status
                current.messages = [p for p in pending if p]
                t = _TIME.search(line)
                current.ms = int(t.group(1)) if t else None
                run.tests.append(current)
                current, pending = None, []
            continue  # the summary repeats [  FAILED  ] lines after the run: not results
        if current is not None:
            if "Aborting tests due to an alarm timeout" in line:
                run.aborted = "rocblas-test's per-test alarm (ROCBLAS_TEST_TIMEOUT) aborted the run"
            pending.append(line.strip())
    if current is not None:
        current.status = "died"
        current.messages = [p for p in pending if p]
        run.tests.append(current)
        run.aborted = run.aborted or f"the process stopped during {current.name}"
    return run


def failure_summary(outcome: TestOutcome, limit: int = 3) -> str:
    """The first lines of what a failed test printed, joined: the check that failed and its values."""
    keep = [m for m in outcome.messages if m and not m.startswith("[")]
    return " | ".join(keep[:limit])
