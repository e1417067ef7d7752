"""verify: rocBLAS's own client checks the installed library at every size; a kernel it fails is taken out.

Per size, one ``rocblas-bench -v 1`` call (:mod:`oto.rocblas.clients`) with the tuned library installed; the
call's norm error (the relative Frobenius norm of rocBLAS's result minus the CPU reference) is judged
against the bound rocBLAS's own GEMM tests put on each element when they compare with tolerance: K times
``sum_error_tolerance<T>`` of the output type (``clients/include/near.hpp``, rocBLAS 4.4.0: the type's
epsilon for float and double, 1/900 for half, 1/100 for bfloat16, 1e-4 and 1e-6 for single and double
complex; integers must be exact). A NaN or infinite norm fails.

Every size gets a row, whatever happens: ``pass``, ``fail`` (the norm is over the bound), ``crash``,
``timeout``, ``gpu_reset`` (quarantined by the GPU-reset journal), ``malformed`` (the client's output could
not be read: the size is unverified, not failed), ``unsupported`` (the client has no call for the problem
type). The run goes on after each.

A call that timed out is run once more when it is its kernel's only timeout of the library: one hang among
a kernel's calls can be the machine's (a busy desktop on the APU, a driver hiccup; the night had launched it
at that size many times), a hang that repeats is the kernel's. The row then says so (``retried``), and the
second call's result stands. A kernel that timed out at two or more sizes is not run again: a real hang
costs the client's whole timeout per call.

The decision (:func:`decide`): a kernel that fails, crashes, hangs or resets the GPU at any size is wrong,
so it is taken out at every size it wins; each of those sizes goes to the next candidate of its ranking
that passed verification at some size and failed at none, else to the size's shipped (spoof) kernel, unless
that kernel is known wrong there too (it failed in finalize's race at the size, or verification took it
out): then the size gets no row, and Tensile serves it from the nearest size's row, as any size without a
winner.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from oto.files import read_yaml
from oto.gemm import Library
from oto.rocblas.clients import Arm, ClientResult, ClientRunner

# clients/include/near.hpp sum_error_tolerance<T> by output type (Tensile data-type chars).
SUM_ERROR_TOLERANCE = {
    "S": 2.0**-23,  # std::numeric_limits<float>::epsilon()
    "D": 2.0**-52,
    "C": 1 / 10000.0,
    "Z": 1 / 1000000.0,
    "H": 1 / 900.0,
    "B": 1 / 100.0,
    "I": 0.0,
    "I8": 0.0,
}
KERNEL_FAILURES = ("fail", "crash", "timeout", "gpu_reset")  # the kernel at that size is wrong or unsafe
# how a size verification took a kernel out of is given away (Change.how)
NEXT_CANDIDATE, SPOOF_KERNEL, NEAREST_ROW = "next verified candidate", "spoof kernel", "nearest size's row"


def tolerance(library: str, k: int) -> float:
    """The norm error verification accepts for ``library`` at summation length ``k``."""
    return int(k) * SUM_ERROR_TOLERANCE.get(Library.parse(library).family.dest.char, 2.0**-23)


@dataclass(frozen=True)
class VerifyRow:
    library: str
    size_index: int
    size: tuple[int, int, int, int]
    kernel_id: str
    status: str  # pass | fail | crash | timeout | gpu_reset | malformed | unsupported | too_large
    norm_error: float | None
    tolerance: float
    time_us: float
    reason: str
    numbers: str
    retried: bool = False  # its first call timed out, and this is the second call's result

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["size"] = list(self.size)
        return d


def judge(result: ClientResult, size_index: int) -> VerifyRow:
    """One client result judged (see the module doc)."""
    tol = tolerance(result.library, result.size[3])
    status, reason = result.status, result.reason
    if status == "ok":
        norm = result.norm_error
        if norm is None:
            status, reason = "malformed", "the client reported no norm error"
        elif not math.isfinite(norm) or norm > tol:
            status = "fail"
            reason = f"norm error {norm:.3g} exceeds {tol:.3g} (K x rocBLAS's sum_error_tolerance)"
        else:
            status = "pass"
    return VerifyRow(
        result.library, size_index, tuple(result.size), result.kernel_id, status, result.norm_error, tol,
        result.time_us, reason, result.numbers,
    )  # fmt: skip


def run_verify(
    runner: ClientRunner, arm: Arm, library: str, sizes: Sequence[Sequence[int]]
) -> list[VerifyRow]:
    """Every size of ``library`` checked with the arm installed, one call each, and a kernel's only timeout
    run once more (see the module doc); nothing stops the run."""
    calls = [(arm, library, tuple(int(x) for x in s[:4])) for s in sizes]
    rows = [judge(res, i) for i, res in enumerate(runner.run_calls(calls, verify=True))]  # type: ignore[arg-type]
    timeouts = Counter(r.kernel_id for r in rows if r.status == "timeout")
    again = [
        i for i, r in enumerate(rows) if r.status == "timeout" and r.kernel_id and timeouts[r.kernel_id] == 1
    ]
    if again:
        results = runner.run_calls([calls[i] for i in again], verify=True)  # type: ignore[arg-type]
        for i, res in zip(again, results, strict=True):
            row = judge(res, i)
            first = f"run again: its first call timed out ({rows[i].reason})"
            rows[i] = replace(row, reason=f"{row.reason}; {first}" if row.reason else first, retried=True)
    return rows


@dataclass(frozen=True)
class Change:
    size_index: int
    removed: str  # the kernel taken out
    replacement: str  # "" with NEAREST_ROW: no kernel of the size's own
    how: str  # NEXT_CANDIDATE | SPOOF_KERNEL | NEAREST_ROW
    why: str  # what verification said of the removed kernel

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def changes_summary(library: str, changes: Sequence[Change], shown: int = 3) -> list[str]:
    """One line per kernel verification took out, with how many sizes went where and a few of them: on a
    deck of thousands of sizes a line per size would bury the terminal (each size is in the rule's log)."""
    return [f"{library}: {line}" for line in removed_kernels(changes, shown)]


def removed_kernels(changes: Sequence[Change], shown: int = 3) -> list[str]:
    """:func:`changes_summary`'s lines without the library: what the reports' verify table lists (a kernel
    that hung once is out at every size it won, often dozens)."""
    by_kernel: dict[str, list[Change]] = {}
    for c in changes:
        by_kernel.setdefault(c.removed, []).append(c)
    lines = []
    for kernel, cs in by_kernel.items():
        moved = ", ".join(f"{c.size_index} → {c.replacement or 'no row'}" for c in cs[:shown])
        more = f", … {len(cs) - shown} more" if len(cs) > shown else ""
        hows = " / ".join(sorted({c.how for c in cs}))
        lines.append(f"{kernel} out ({cs[0].why}); {len(cs)} size(s) given to the {hows} ({moved}{more})")
    return lines


def replacements_summary(library: str, replacements: Mapping[int, Mapping[str, Any]], shown: int = 3) -> str:
    """One line for the sizes whose kernel verification took out, by the kernel each went to and how."""
    by_kernel: dict[tuple[str, str], list[int]] = {}
    for i, r in sorted(replacements.items()):
        by_kernel.setdefault((str(r["kernel"] or "no row"), str(r["how"])), []).append(int(i))
    parts = [
        f"{len(sizes)} to {kernel} ({how})"
        for (kernel, how), sizes in sorted(by_kernel.items(), key=lambda x: -len(x[1]))
    ]
    more = f", … {len(parts) - shown} more kernels" if len(parts) > shown else ""
    return (
        f"{library}: {len(replacements)} size(s) given to other kernels, verify took theirs out: "
        f"{', '.join(parts[:shown])}{more}"
    )


def log_replacements(log: logging.Logger, library: str, replacements: Mapping[int, Mapping[str, Any]]):
    """Each size verification gave to another kernel in the rule's log (INFO), one line on the terminal."""
    for i, r in sorted(replacements.items()):
        log.info("%s: size %s given to %s (%s): verify took its kernel out", library, i,
                 r["kernel"] or "no row", r["how"])  # fmt: skip
    if replacements:
        log.warning("%s", replacements_summary(library, replacements))


@dataclass(frozen=True)
class Decision:
    library: str
    winners: dict[int, str]  # size index -> kernel after verification
    changes: list[Change]
    failing: dict[str, str]  # kernel -> why it was taken out
    verified: list[str]  # kernels that passed at some size and failed at none
    unverified_sizes: list[int]  # malformed / unsupported: not judged either way
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "winners": dict(self.winners),
            "changes": [c.as_dict() for c in self.changes],
            "failing": dict(self.failing),
            "verified": list(self.verified),
            "unverified_sizes": list(self.unverified_sizes),
            "counts": dict(self.counts),
        }


def decide(
    library: str,
    per_size: Iterable[Mapping[str, Any]],
    rows: Iterable[VerifyRow],
) -> Decision:
    """Take every kernel verification found wrong out of the library (see the module doc).

    ``per_size``: one entry per size, ``{size_index, winner, shipped, ranking, shipped_failed}``
    (``ranking``: the size's candidates best first, the winner included; ``shipped_failed``: the shipped
    kernel failed at the size in the race; both from a final's race), ``rows`` the verify rows."""
    per_size = list(per_size)
    rows = list(rows)
    failing: dict[str, str] = {}
    passed: set[str] = set()
    counts: dict[str, int] = {}
    unverified = []
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
        if r.status in KERNEL_FAILURES and r.kernel_id:
            failing.setdefault(r.kernel_id, f"{r.status} at size {list(r.size)}: {r.reason}")
        elif r.status == "pass" and r.kernel_id:
            passed.add(r.kernel_id)
        elif r.status in ("malformed", "unsupported"):
            unverified.append(r.size_index)
    verified = sorted(passed - set(failing))
    winners: dict[int, str] = {}
    changes = []
    for entry in per_size:
        i, winner = int(entry["size_index"]), str(entry["winner"])
        if winner not in failing:
            winners[i] = winner
            continue
        ranking = [str(k) for k in entry.get("ranking") or []]
        nxt = next((k for k in ranking if k != winner and k in verified), None)
        shipped = str(entry.get("shipped") or "")
        if nxt:
            replacement, how = nxt, NEXT_CANDIDATE
        elif shipped and shipped not in failing and not entry.get("shipped_failed"):
            replacement, how = shipped, SPOOF_KERNEL
        else:  # the spoof's kernel is wrong here too: no row beats a kernel known to fail
            replacement, how = "", NEAREST_ROW
        winners[i] = replacement
        changes.append(Change(i, winner, replacement, how, failing[winner]))
    return Decision(library, winners, changes, failing, verified, sorted(set(unverified)), counts)


def verify_document(
    rows: Sequence[VerifyRow], decisions: Sequence[Decision], client: Mapping[str, Any]
) -> dict[str, Any]:
    """verify's results as one document (``verify.yaml``): the kind of numbers, the client, and per library
    the decision (counts, kernels taken out, what replaced them) and every size's row."""
    numbers = sorted({r.numbers for r in rows}) or [str(client.get("numbers", "unknown"))]
    return {
        "numbers": numbers[0] if len(numbers) == 1 else "+".join(numbers),
        "client": dict(client),
        "libraries": {
            d.library: {**d.as_dict(), "rows": [r.as_dict() for r in rows if r.library == d.library]}
            for d in decisions
        },
    }


def merged_verify(docs: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The run's verify results from its libraries' ``<library>/verify.yaml`` (one verify job per library):
    every library's entry, the kinds of numbers joined, the client and environment of the first that ran;
    skipped (with the first reason) when every one was; None when there is none yet."""
    docs = [d for d in docs if d]
    if not docs:
        return None
    ran = [d for d in docs if not d.get("skipped")]
    if not ran:
        return dict(docs[0])
    numbers = sorted({str(d.get("numbers")) for d in ran})
    out = {k: v for k, v in ran[0].items() if k != "libraries"}
    out["numbers"] = numbers[0] if len(numbers) == 1 else "+".join(numbers)
    out["libraries"] = {n: e for d in ran for n, e in (d.get("libraries") or {}).items()}
    return out


def read_verify(arch_dir: Path) -> dict[str, Any] | None:
    """:func:`merged_verify` of every ``<library>/verify.yaml`` in ``results/<arch>`` (earlier nights')."""
    return merged_verify([read_yaml(p) for p in sorted(Path(arch_dir).glob("Cijk_*/verify.yaml"))])
