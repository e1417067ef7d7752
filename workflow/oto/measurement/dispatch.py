"""One kernel per runtime key: the sizes of a library that Tensile cannot tell apart get one kernel.

Tensile's runtime matches a problem to a logic file's exact rows by [M, N, K] (the index order maps M, N
and K to FreeSizeA, FreeSizeB and BoundSize; the batch count and the leading dimensions are dropped for the
Euclidean distance the libraries use), and among rows at the same distance it serves the one with the
highest GFLOPS (ROCm/Tensile: ``MatchingLibrary.FromOriginalState``; ``PropertyMatching.hpp``,
``findBestKeyMatch_BinSearch``). Deck sizes that differ only in their batch count (a batched library's
[512, 64, 40, 512] and [512, 64, 80, 512]) are therefore served one kernel, whatever their rows say: the
winner of the row with the highest GFLOPS, usually the largest batch's. navi21's shipped files hold 1,164
such groups with different solutions, navi31's 690 and vega10's 80.

Finalize gives each such group the kernel with the best geomean score over the group's sizes, among the
kernels that passed at every one of them, so that what the logic file ships, what verify and compare run
and what the reports claim is what rocBLAS serves. It does so after judging the second floors, which judge
the changed sizes again without taking their kernel: under one kernel per key a size may ship a kernel that
loses to its own best shipped or native kernel, since rocBLAS could not serve that one there alone. The
spoof floor is still each size's own shipped row, as upstream's per-size figures are: against what the
spoof really serves there the figures are, if anything, low.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from oto.measurement.score_rows import missing
from oto.measurement.selection import take_kernel


def runtime_key(size: Sequence[int]) -> tuple[int, int, int]:
    """The key Tensile matches a deck size [M, N, batch, K, ...] by."""
    return int(size[0]), int(size[1]), int(size[3])


def _ok(r: Mapping) -> bool:
    return r["status"] == "ok" and not missing(r.get("score")) and float(r["score"]) > 0


def one_kernel_per_key(
    rows: list[dict], scores: Sequence[Mapping], sizes: Sequence[Sequence[int]], tolerance: float
) -> list[dict]:
    """``rows`` (finalize's per-size rows, one per deck size, by size_index) with each group of sizes that
    share a runtime key given one kernel: the one with the best geomean score over the group's sizes among
    those that passed at each (ties: the lowest id). The group is read from ``scores`` alone (the sizes where
    some kernel has a score; a size whose floor failed has none), so finalize and the merge's intake, which
    recompute it from the same samples, agree. A changed row gets the kernel's own score, interval, GFLOPS
    and verdict there, and says so (``one_kernel_for``: the key, the sizes, the winner it had)."""
    by_key: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for i, s in enumerate(sizes):
        by_key[runtime_key(s)].append(i)
    passed = {(int(r["size_index"]), str(r["kernel_id"])): r for r in scores if _ok(r)}
    kernels_at: dict[int, set[str]] = defaultdict(set)
    for i, k in passed:
        kernels_at[i].add(k)
    out = {int(r["size_index"]): dict(r) for r in rows}
    for key, indices in by_key.items():
        group = [i for i in indices if kernels_at[i] and i in out]
        if len(group) < 2:
            continue
        common = set.intersection(*(kernels_at[i] for i in group))
        if not common:
            continue
        best = max(
            sorted(common, reverse=True), key=lambda k: sum(math.log(passed[(i, k)]["score"]) for i in group)
        )
        for i in group:
            if out[i].get("winner") != best:
                out[i] = _served(out[i], passed[(i, best)], key, group, tolerance)
    return [out[int(r["size_index"])] for r in rows]


def _served(
    row: Mapping[str, Any], r: Mapping, key: tuple[int, int, int], group: list[int], tol: float
) -> dict:
    return {
        **take_kernel(dict(row), r, tol),
        "contenders": [],  # they were the size's own winner's rivals
        "one_kernel_for": {"key": list(key), "sizes": list(group), "was": row["winner"]},
    }


def dispatch_summary(rows: Sequence[Mapping]) -> dict[str, int]:
    """How many sizes took their group's kernel, in how many groups."""
    changed = [r["one_kernel_for"] for r in rows if r.get("one_kernel_for")]
    return {"sizes": len(changed), "groups": len({tuple(c["key"]) for c in changed})}
