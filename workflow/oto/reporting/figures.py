"""The figures the dashboard and the acceptance report both show, computed one way from per-size records.

A per-size record is a row of ``selection.yaml`` or ``final.yaml`` ``per_size``: ``{score, ci_low, ci_high,
gflops, ceiling_gflops, pct_ceiling, verdict, winner}``, to which :func:`with_roofline` adds the realistic
roofline the pages judge it against (``roofline_gflops``, ``pct_roofline``, ``bound``). A library record is
``{library, family, pattern, per_size, sizes, summary}``; during the run it comes from the latest selection,
at the end from final.yaml. Missing keys count as "no data", never as zero.

**The realistic roofline.** Selection's ``ceiling_gflops`` is the lower of the family's peak and the
sustained bandwidth times the size's arithmetic intensity: no kernel does better. A launch also costs the
arch's launch overhead before any work (``ceilings.yaml`` ``roofline.launch_us``, from the arch profile's
``timing.launch_us``), which for a 1×1×128 GEMM is a hundred times its compute and memory time: the pages
judge each size against ``flops / (launch + flops / ceiling_gflops)`` and call a size **latency-bound** where
the launch is the larger part of that floor. Without a launch overhead (a ceilings.yaml of an older run) they
use ``ceiling_gflops`` and the file's ``pct_ceiling`` as they are.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from oto.hardware.profile import hsa_override_version
from oto.measurement.scoring import finite
from oto.reporting.summary import apart

SLOWEST_SHOWN = 10
BOUNDS = ("latency", "memory", "compute")  # what limits a size's roofline (see the module docstring)


def _median(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def geomean(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and x > 0]
    return float(np.exp(np.mean(np.log(v)))) if v else None


def verdict_counts(rows: Iterable[Mapping]) -> dict[str, int]:
    v = Counter(r.get("verdict") for r in rows)
    return {
        "wins": v["win"],
        "ties": v["tie"],
        "losses": v["loss"],
        "not_measured": v["not_measured"],
        "floor_failed": v["floor_failed"],
    }


def wtl_text(counts: Mapping[str, Any]) -> str:
    """W/T/L as the tables print it, with the sizes no kernel ran at (selection.NOT_MEASURED) and those where
    the spoof's kernel failed (selection.FLOOR_FAILED) beside it."""
    return f"{counts['wins']}/{counts['ties']}/{counts['losses']}" + apart(counts, " ({n} not measured)")


# final.yaml rows judged against the second floor, the best shipped kernel (oto.measurement.best_shipped)
BEATS_BY = 0.05  # "beats it by 5% or more": the share the reports give


def best_shipped_counts(rows: Iterable[Mapping]) -> dict[str, Any]:
    """Against the best shipped kernel of each size: the sizes judged, the geomean speed-up, wins / ties /
    losses, the sizes that kept a shipped kernel and the share where the final kernel beats it by 5%."""
    rows = list(rows)
    judged = [r for r in rows if r.get("verdict_best_shipped")]
    ratios = [finite(r.get("vs_best_shipped")) for r in judged]
    v = Counter(r["verdict_best_shipped"] for r in judged)
    beats = sum(1 for x in ratios if x is not None and x >= 1 + BEATS_BY)
    return {
        "best_shipped_sizes": len(judged),
        "best_shipped_geomean": geomean(ratios),
        "best_shipped_wins": v["win"],
        "best_shipped_ties": v["tie"],
        "best_shipped_losses": v["loss"],
        "best_shipped_kept": sum(1 for r in rows if r.get("kept_by_best_shipped")),
        "best_shipped_beats_5pct": beats / len(judged) if judged else None,
    }


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


def realistic_roofline(
    ceiling: float, size: Sequence[int], flops_per_mac: float, launch_us: float
) -> tuple[float, bool]:
    """(GFLOPS, latency-bound) at one size [M, N, batch, K, ...]: the roofline ``ceiling`` with the launch
    overhead counted (the time of the work at the ceiling plus ``launch_us``), and whether the launch takes
    at least as long as the work."""
    m, n, batch, k = (float(x) for x in size[:4])
    flops = flops_per_mac * m * n * batch * k
    work_ns, launch_ns = flops / ceiling, 1000.0 * launch_us  # flops / GFLOPS = ns
    return flops / (work_ns + launch_ns), launch_ns >= work_ns


def with_roofline(
    rows: Sequence[Mapping],
    sizes: Sequence[Sequence[int]],
    flops_per_mac: float,
    peak: float | None,
    launch_us: float | None,
) -> list[dict[str, Any]]:
    """Per-size records with the realistic roofline added: ``roofline_gflops``, ``pct_roofline`` (of it) and
    ``bound`` (latency | memory | compute; None without a ceiling), as the module docstring defines them."""
    out = []
    for r in rows:
        row = dict(r)
        ceiling, gflops, i = finite(r.get("ceiling_gflops")), finite(r.get("gflops")), r.get("size_index")
        roof, pct, bound = ceiling, finite(r.get("pct_ceiling")), None
        if ceiling and ceiling > 0:
            bound = "compute" if peak and ceiling >= peak * (1 - 1e-9) else "memory"
        if launch_us and ceiling and ceiling > 0 and isinstance(i, int) and 0 <= i < len(sizes):
            roof, latency_bound = realistic_roofline(ceiling, sizes[i], flops_per_mac, launch_us)
            pct = 100 * gflops / roof if gflops is not None else None
            bound = "latency" if latency_bound else bound
        row.update(roofline_gflops=roof, pct_roofline=pct, bound=bound)
        out.append(row)
    return out


def _pct(r: Mapping) -> float | None:
    """% of the realistic roofline (the file's own pct_ceiling for a record :func:`with_roofline` has not
    seen)."""
    return finite(r["pct_roofline"] if "pct_roofline" in r else r.get("pct_ceiling"))


def _roof(r: Mapping) -> float | None:
    return finite(r["roofline_gflops"] if "roofline_gflops" in r else r.get("ceiling_gflops"))


def size_stats(rows: Sequence[Mapping], peak: float | None) -> dict[str, Any]:
    """Medians over the sizes that have a winner: achieved GFLOPS, realistic (roofline) ceiling, % of both;
    the geomean speed-up and W/T/L over every size; how many sizes are latency-bound."""
    measured = [r for r in rows if finite(r.get("gflops")) is not None]
    gf = [finite(r["gflops"]) for r in measured]
    return {
        "sizes": len(rows),
        "measured": len(measured),
        "median_gflops": _median(gf),
        "median_ceiling_gflops": _median(_roof(r) for r in measured),
        "best_pct_theoretical": (100 * max(gf) / peak) if gf and peak else None,
        "median_pct_theoretical": _median(100 * g / peak for g in gf) if peak else None,
        "median_pct_roofline": _median(_pct(r) for r in measured),
        "latency_bound": sum(1 for r in rows if r.get("bound") == "latency"),
        "geomean_score": geomean(finite(r.get("score")) for r in rows),
        **verdict_counts(rows),
        **best_shipped_counts(rows),
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
                "libraries": len(libs),
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
                # a workload's: the geomean weighted by it (oto.deck.sources.weights_from_calls)
                **(
                    {"weighted_geomean_score": finite(s["weighted_geomean_score"])}
                    if "weighted_geomean_score" in s
                    else {}
                ),
                # the pages' roofline (with_roofline), like every other % of roofline they show
                "pct_ceiling_median": _median(_pct(r) for r in per if finite(r.get("gflops")) is not None),
                **counts,
                **best_shipped_counts(per),
                "verdict": verdict,
                "verdict_kind": verdict_kind(verdict),
            }
        )
    return rows


def slowest_sizes(libraries: Sequence[Mapping], n: int = SLOWEST_SHOWN) -> list[dict[str, Any]]:
    """The sizes with most left to gain: the largest ``headroom``, the speed-up a kernel at the size's
    realistic roofline would still give (roofline ÷ achieved GFLOPS, 100 / % of roofline); each says what
    bounds its roofline (a latency-bound size's floor is the launch overhead)."""
    rows = []
    for lib in libraries:
        sizes = lib.get("sizes") or []
        for r in lib.get("per_size") or []:
            pct = _pct(r)
            i = r.get("size_index")
            if pct is None or pct <= 0 or not isinstance(i, int) or not 0 <= i < len(sizes):
                continue
            rows.append(
                {
                    "library": lib["library"],
                    "size": [int(x) for x in sizes[i][:4]],
                    "gflops": finite(r.get("gflops")),
                    "ceiling_gflops": _roof(r),
                    "pct_ceiling": pct,
                    "headroom": 100 / pct,
                    "bound": r.get("bound"),
                    "score": finite(r.get("score")),
                    "verdict": r.get("verdict"),
                }
            )
    rows.sort(key=lambda r: (-r["headroom"], r["library"], r["size"]))
    return rows[:n]


def failure_totals(libraries: Sequence[Mapping]) -> dict[str, int]:
    """Failures by class over the whole run: each library's final.yaml counts every generation's and its
    own final measurement's."""
    total: Counter = Counter()
    for lib in libraries:
        total.update({k: int(v) for k, v in ((lib.get("summary") or {}).get("failures") or {}).items()})
    return dict(sorted(total.items()))


def failures_by_stage(records: Sequence[Mapping]) -> dict[str, dict[str, int]]:
    """Per failure class, how many the tuning generations and the final measurement added (library records
    of :func:`oto.reporting.collect.collect`); the two sum to :func:`failure_totals`."""
    tuning: Counter = Counter()
    final: Counter = Counter()
    for lib in records:
        for g in lib.get("generations") or []:
            tuning.update(g.get("failures_new") or {})
        final.update(lib.get("final_failures_new") or {})
    return {k: {"tuning": tuning[k], "final": final[k]} for k in sorted(set(tuning) | set(final))}


def overall(libraries: Sequence[Mapping]) -> dict[str, Any]:
    """Whole-run figures over every size of every library."""
    per = [r for lib in libraries for r in lib.get("per_size") or []]
    return {
        "libraries": len(libraries),
        "sizes": len(per),
        "with_winner": sum(1 for r in per if r.get("winner")),
        "geomean_score": geomean(finite(r.get("score")) for r in per),
        "median_pct_roofline": _median(_pct(r) for r in per if finite(r.get("gflops")) is not None),
        "latency_bound": sum(1 for r in per if r.get("bound") == "latency"),
        **verdict_counts(per),
        **best_shipped_counts(per),
    }


def native_rows(libraries: Sequence[Mapping]) -> list[dict[str, Any]]:
    """One row per library raced against a native floor (config deck.native_floor: upstream's own library
    for the GPU): the winners' geomean speed-up over the native kernels beside the one over the floor, on
    the sizes where both ran."""
    out = []
    for lib in libraries:
        native = lib.get("native_floor")
        if not native:
            continue
        rows = [r for r in lib.get("per_size") or [] if finite(r.get("vs_native")) is not None]
        out.append(
            {
                "library": lib["library"],
                "arch": native.get("arch"),
                "path": native.get("path"),
                "sizes": len(rows),
                "geomean_vs_native": geomean(r["vs_native"] for r in rows),
                "geomean_score": geomean(finite(r.get("score")) for r in rows),
                "native_faster_than_floor": sum(1 for r in rows if (finite(r.get("native_score")) or 0) > 1),
                "kept": sum(1 for r in lib.get("per_size") or [] if r.get("kept_by_native")),
                "native_wrong": sum(
                    1 for r in lib.get("per_size") or [] if r.get("native_status") == "validation_failed"
                ),
            }
        )
    return out


def roofline_text(launch_us: float | None) -> str:
    """One sentence saying what the pages' "% of roofline" is measured against."""
    if launch_us:
        return (
            f"Roofline: the family's peak or the sustained memory bandwidth times the size's arithmetic "
            f"intensity, whichever is lower, after a launch overhead of {launch_us:g} µs (the arch profile's "
            "timing.launch_us); a size is latency-bound where the launch is the larger part of that floor."
        )
    return (
        "Roofline: the family's peak or the sustained memory bandwidth times the size's arithmetic "
        "intensity, whichever is lower (this run's ceilings.yaml gives no launch overhead: small sizes look "
        "further from it than they are)."
    )


def best_shipped_text(tolerance: float) -> str:
    """What the second floor is, in words (the reports and the dashboard say it the same way)."""
    return (
        "Best shipped kernel: at each size the fastest of the library's shipped solutions raced there (the "
        "floor, and a shortlist chosen by the performance model and by the shipped winners of the "
        "neighbouring sizes: config benchmark.best_shipped_shortlist), what TunableOp would pick among "
        "them; speed-ups are the final kernel's score over its score in the same race, ties within "
        f"±{tolerance:.0%}. "
        "A size whose tuned kernel lost to it keeps the shipped kernel (kept)."
    )


def reference_phrase(deck_of: str, floor: Mapping[str, Any] | None) -> str:
    """What every score is a ratio to, in words (the reports and the dashboard say it the same way)."""
    if not floor:
        return (
            f"the spoof floor (the shipped {deck_of} solution for each size, run as under "
            f"HSA_OVERRIDE_GFX_VERSION={hsa_override_version(deck_of)})"
        )
    if floor.get("source") == "none":
        return f"the floor: {floor.get('label')} (one conservative legal kernel per problem type)"
    return (
        f"the floor of the shipped {floor.get('arch')} library ({floor.get('source')} {floor.get('path')}): "
        "at each size the solution its Matching table picks, the nearest shipped size"
    )


def workload_rows(finals: Sequence[Mapping], files: Sequence[Mapping] | None = None) -> dict[str, Any]:
    """The workload's expected time per run of all its calls, per library and in total: with the shipped
    floor, with the winners, and the time saved with its 95% interval (libraries' intervals combined as
    independent). From final.yaml's ``workload`` blocks (oto.measurement.finals.workload_time). ``files``: the
    run's workload files (deck.yaml ``workload.files``); a library whose block names other files was tuned
    for another workload by an earlier night and is listed apart (``other_workload``), never added in."""
    rows, other, before, after, half2 = [], [], 0.0, 0.0, 0.0
    mine = sorted([str(x.get("source")), str(x.get("path"))] for x in files) if files is not None else None
    for f in finals:
        w = f.get("workload")
        if not w or not w.get("calls"):
            continue
        if mine is not None and w.get("files") is not None and sorted(w["files"]) != mine:
            other.append(f["library"])
            continue
        lo, hi = (finite(v) for v in w.get("saved_ci_us") or (None, None))
        rows.append({"library": f["library"], **w})
        before += finite(w["time_before_us"]) or 0.0
        after += finite(w["time_after_us"]) or 0.0
        if lo is not None and hi is not None:
            half2 += ((hi - lo) / 2) ** 2
    saved = before - after
    half = math.sqrt(half2)
    total = {
        "calls": sum(int(r["calls"]) for r in rows),
        "calls_unmeasured": sum(int(r.get("calls_unmeasured") or 0) for r in rows),
        "time_before_us": before,
        "time_after_us": after,
        "saved_us": saved,
        "saved_ci_us": [saved - half, saved + half],
        "saved_share": saved / before if before > 0 else None,
    }
    return {"libraries": rows, "total": total, "other_workload": other}
