"""The figures the dashboard and the acceptance report both show, computed one way from per-size records.

A per-size record is a row of ``selection.yaml`` or ``final.yaml`` ``per_size``: ``{score, ci_low, ci_high,
gflops, ceiling_gflops, pct_ceiling, verdict, winner}``. A library record is ``{library, family, pattern,
per_size, sizes, summary}``; during the run it comes from the latest selection, at the end from final.yaml.
Missing keys count as "no data", never as zero.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from oto.measurement.scoring import finite

SLOWEST_SHOWN = 10


def _median(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def geomean(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and x > 0]
    return float(np.exp(np.mean(np.log(v)))) if v else None


def verdict_counts(rows: Iterable[Mapping]) -> dict[str, int]:
    v = Counter(r.get("verdict") for r in rows)
    return {"wins": v["win"], "ties": v["tie"], "losses": v["loss"]}


def library_verdict(summary: Mapping[str, Any], tolerance: float) -> str:
    """One line per library: how it compares with the spoof floor over all its sizes."""
    g = finite(summary.get("geomean_score"))
    if g is None:
        return "no measurement yet"
    losses = int(summary.get("losses") or 0)
    if losses == 0 and g >= 1 + tolerance:
        return "better than the spoof"
    if losses == 0:
        return "at parity with the spoof"
    if g >= 1:
        return "mixed: faster overall, slower at some sizes"
    return "slower than the spoof"


def verdict_kind(text: str) -> str:
    """Carbon tag colour of a library verdict."""
    return {
        "better than the spoof": "green",
        "at parity with the spoof": "gray",
        "mixed: faster overall, slower at some sizes": "warm-gray",
        "slower than the spoof": "red",
    }.get(text, "cool-gray")


def size_stats(rows: Sequence[Mapping], peak: float | None) -> dict[str, Any]:
    """Medians over the sizes that have a winner: achieved GFLOPS, realistic (roofline) ceiling, % of both."""
    measured = [r for r in rows if finite(r.get("gflops")) is not None]
    gf = [finite(r["gflops"]) for r in measured]
    return {
        "sizes": len(rows),
        "measured": len(measured),
        "median_gflops": _median(gf),
        "median_ceiling_gflops": _median(finite(r.get("ceiling_gflops")) for r in measured),
        "best_pct_theoretical": (100 * max(gf) / peak) if gf and peak else None,
        "median_pct_theoretical": _median(100 * g / peak for g in gf) if peak else None,
        "median_pct_roofline": _median(finite(r.get("pct_ceiling")) for r in measured),
        "geomean_score": geomean(finite(r.get("score")) for r in rows),
        **verdict_counts(rows),
    }


def family_rows(libraries: Sequence[Mapping], peaks: Mapping[str, float]) -> list[dict[str, Any]]:
    """Per family: % of the theoretical ceiling, % of the roofline, speed-up and W/T/L over all its sizes."""
    by_family: dict[str, list[Mapping]] = defaultdict(list)
    for lib in libraries:
        by_family[lib["family"]].append(lib)
    rows = []
    for fam, libs in sorted(by_family.items()):
        per = [r for lib in libs for r in lib.get("per_size") or []]
        peak = finite(peaks.get(fam))
        rows.append(
            {
                "family": fam,
                "patterns": ", ".join(sorted(lib["pattern"] for lib in libs)),
                "peak": peak,
                **size_stats(per, peak),
            }
        )
    return rows


def library_rows(libraries: Sequence[Mapping], tolerance: float) -> list[dict[str, Any]]:
    rows = []
    for lib in libraries:
        s = lib.get("summary") or {}
        per = lib.get("per_size") or []
        counts = verdict_counts(per)
        summary = {
            **counts,
            "geomean_score": s.get("geomean_score", geomean(finite(r.get("score")) for r in per)),
        }
        verdict = library_verdict(summary, tolerance)
        rows.append(
            {
                "library": lib["library"],
                "family": lib["family"],
                "pattern": lib["pattern"],
                "sizes": len(per),
                "kernels": len(lib.get("kernels") or {}),
                "geomean_score": finite(summary["geomean_score"]),
                "pct_ceiling_median": finite(s.get("pct_ceiling_median")),
                **counts,
                "verdict": verdict,
                "verdict_kind": verdict_kind(verdict),
            }
        )
    return rows


def slowest_sizes(libraries: Sequence[Mapping], n: int = SLOWEST_SHOWN) -> list[dict[str, Any]]:
    """The sizes furthest below their roofline ceiling (lowest % of the realistic ceiling)."""
    rows = []
    for lib in libraries:
        sizes = lib.get("sizes") or []
        for r in lib.get("per_size") or []:
            pct = finite(r.get("pct_ceiling"))
            i = r.get("size_index")
            if pct is None or not isinstance(i, int) or not 0 <= i < len(sizes):
                continue
            rows.append(
                {
                    "library": lib["library"],
                    "size": [int(x) for x in sizes[i][:4]],
                    "gflops": finite(r.get("gflops")),
                    "ceiling_gflops": finite(r.get("ceiling_gflops")),
                    "pct_ceiling": pct,
                    "score": finite(r.get("score")),
                    "verdict": r.get("verdict"),
                }
            )
    rows.sort(key=lambda r: (r["pct_ceiling"], r["library"], r["size"]))
    return rows[:n]


def failure_totals(libraries: Sequence[Mapping]) -> dict[str, int]:
    total: Counter = Counter()
    for lib in libraries:
        total.update({k: int(v) for k, v in ((lib.get("summary") or {}).get("failures") or {}).items()})
    return dict(sorted(total.items()))


def overall(libraries: Sequence[Mapping]) -> dict[str, Any]:
    """Whole-run figures over every size of every library."""
    per = [r for lib in libraries for r in lib.get("per_size") or []]
    return {
        "sizes": len(per),
        "with_winner": sum(1 for r in per if r.get("winner")),
        "geomean_score": geomean(finite(r.get("score")) for r in per),
        "median_pct_roofline": _median(finite(r.get("pct_ceiling")) for r in per),
        **verdict_counts(per),
    }
