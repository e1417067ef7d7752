"""The finals of a library (rule finalize): its tuned finalists raced on every deck size against each size's
floor (by default its shipped solution, the spoof floor: oto.deck.floors), and the final document
(final.yaml) the logic file and the acceptance report use, so that every size of the deck gets a measured
winner, not an extrapolation from the tuning sizes."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.backends.base import BuildResult, Kernel, Problem, Size
from oto.config import config_block, night_record
from oto.deck.model import LibraryDeck
from oto.deck.sources import workload_identity
from oto.gemm import Library, gemm_flops
from oto.measurement import best_shipped
from oto.measurement.benchmarking import race_library
from oto.measurement.dispatch import dispatch_summary, one_kernel_per_key
from oto.measurement.racing import RaceResult
from oto.measurement.score_rows import missing
from oto.measurement.scoring import measurement_summary, score_library, score_state_times
from oto.measurement.selection import (
    finalists,
    floor_failed_winners,
    geomean,
    measurement_failures,
    per_size_rows,
    race_status,
    size_contenders,
    summarise,
    take_kernel,
)
from oto.numbers import finite
from oto.tensile import legality
from oto.tensile.params import canonical


@dataclass
class FinalRace:
    """What finalize built and raced."""

    tuned: dict[str, Mapping]  # the finalists: kernel id → params, from the last selection
    kernels: dict[str, Kernel]  # the finalists and every size's reference
    reference: dict[int, str | None]  # deck size → its reference (None: no shipped kernel Tensile builds)
    substitutes: dict[int, dict]  # deck sizes whose shipped kernel was handed to a nearby size's
    built: dict[str, BuildResult]
    race: RaceResult
    # the shipped kernels raced per size for the second floor, the best shipped kernel (oto.measurement.
    # best_shipped); empty with benchmark.best_shipped_shortlist 0
    shortlist: best_shipped.Shortlist = field(default_factory=best_shipped.Shortlist)
    # deck size → the native floor's kernel (config deck.native_floor), raced beside the finalists; it wins
    # its size as any raced kernel does (keep_native after the best shipped judgement); empty without one
    native: dict[int, str | None] = field(default_factory=dict)
    # deck size → the selection's contenders there (earlier generations' leaders never raced against the
    # size's best: oto.measurement.selection.size_contenders), raced at that size only
    contenders: dict[int, list[str]] = field(default_factory=dict)


def race_finalists(
    backend,
    selection: Mapping,
    deck: LibraryDeck,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    results: Path,
) -> FinalRace:
    """Build the finalists, every deck size's reference and its shortlist of shipped kernels (the best
    shipped kernel's contenders: :mod:`oto.measurement.best_shipped`), and race the ones that built at every
    deck size (:func:`oto.measurement.benchmarking.race_library`, job ``final``)."""
    tuned = finalists(selection)
    kernels = {k: Kernel(k, canonical(p)) for k, p in tuned.items()}
    contenders: dict[int, list[str]] = {}
    for i, kept in size_contenders(selection).items():
        contenders[i] = [k for k in kept if k not in tuned]
        for k, p in kept.items():
            kernels.setdefault(k, Kernel(k, canonical(p)))
    limits = legality.Limits.from_profile(profile)
    refs = deck.references(list(range(len(deck.sizes))), limits)
    reference: dict[int, str | None] = {}
    for i, ref in refs.items():
        reference[i] = ref["id"]
        if ref["id"] is not None:
            kernels.setdefault(ref["id"], Kernel(ref["id"], ref["params"]))
    length = int(config_block(config, "benchmark")["best_shipped_shortlist"])
    short = best_shipped.shortlist(deck, profile, int(config["seed"]), length, reference, limits)
    for kid, kernel in short.kernels.items():
        kernels.setdefault(kid, kernel)
    native: dict[int, str | None] = {}
    for i, ref in deck.native_references(list(range(len(deck.sizes))), limits).items():
        native[i] = ref["id"]
        if ref["id"] is not None:
            kernels.setdefault(ref["id"], Kernel(ref["id"], ref["params"]))
    problem = Problem.of(deck, profile)
    built = {b.kernel_id: b for b in backend.build(problem, list(kernels.values()), Path(workdir))}
    ok = {k for k, b in built.items() if b.status == "ok"}
    sizes = [Size(*map(int, s[:4])) for s in deck.sizes]
    race = race_library(
        backend,
        deck,
        profile,
        config,
        {k: kernels[k] for k in ok},
        sizes,
        {
            i: list(
                dict.fromkeys(
                    [
                        *_raced(tuned, short.per_size.get(i, ()), ok),
                        *(k for k in contenders.get(i, ()) if k in ok),
                        *_native_contender(native.get(i), tuned, ok),
                    ]
                )
            )
            for i in range(len(sizes))
        },
        {i: r for i, r in reference.items() if r is not None and r in ok},
        workdir,
        "final",
        results,
        # a workload deck: its calls steer the race's precision (benchmark.racing.workload_precision)
        dict(enumerate(deck.calls)) if deck.calls is not None else None,
    )
    substitutes = {i: r["substitute"] for i, r in refs.items() if "substitute" in r}
    return FinalRace(tuned, kernels, reference, substitutes, built, race, short, native, contenders)


def _shipped(final: FinalRace, deck: LibraryDeck) -> set[str]:
    """The kernels that are shipped solutions of the library: its legal solutions' ids when the shortlist
    raced any (a finalist may be one), and the references when they come from the library's own logic."""
    if not final.shortlist.kernels:
        return set()  # benchmark.best_shipped_shortlist 0: the second floor is not measured
    own = {r for r in final.reference.values() if r is not None} if deck.floor is None else set()
    return set(final.shortlist.positions) | own


def _raced(tuned, shortlisted, ok: set[str]) -> list[str]:
    """A size's candidates: the finalists, then its shortlisted shipped kernels (never the size's reference),
    each once (a finalist may be a shipped kernel: gen0 proposes them), only those that built."""
    return list(dict.fromkeys(k for k in (*tuned, *shortlisted) if k in ok))


Z95 = 1.959964  # a 95% interval's half-width in standard deviations


def workload_time(
    rows: Sequence[Mapping],
    sizes: Sequence[Sequence[int]],
    calls: Sequence[int],
    library: Library,
    floor_half: Mapping[int, float] | None = None,
) -> dict[str, Any]:
    """The workload's time in this library, per run of all its calls, with the shipped floor and with the
    winners, and the time saved with its 95% interval.

    At a size the winner takes ``time_us_median_state`` per call (its median time in the race's median
    thermal state, where its score is taken: every size's time in one state, so the sizes weigh as they
    measured; rows without it: flops / GFLOPS, the peak state's) and the reference ``score`` times that
    (score = reference time / winner time), so a call saves winner time × (score − 1); the score's interval
    [ci_low, ci_high] gives the saving's, widened by the floor's own (``floor_half``: per size the half-width
    in log of the reference's median, which every score at the size divides by; absent: not counted), and
    the sizes' intervals combine as independent (root sum of squares of their half-widths, each taken as
    1.96 σ). A called size without a winner (nothing valid ran) saves nothing and is counted apart."""
    before = after = var = 0.0
    called = unmeasured = 0
    for r in rows:
        i = int(r["size_index"])
        n = int(calls[i])
        if not n:
            continue
        called += n
        score, gflops = finite(r.get("score")), finite(r.get("gflops"))
        if score is None or not gflops:
            unmeasured += n
            continue
        m, nn, b, k = (int(v) for v in sizes[i][:4])
        # the winner's time in the race's median thermal state where final_document recorded it (the
        # state its score is in), else at the peak state its GFLOPS are taken in
        t_win = finite(r.get("time_us_median_state")) or gemm_flops(library.family, m, nn, b, k) / (
            gflops * 1e3
        )
        before += n * t_win * score
        after += n * t_win
        lo, hi = finite(r.get("ci_low")), finite(r.get("ci_high"))
        if lo is not None and hi is not None:
            # the floor's relative half-width, on the score's scale (a winner that is the floor has none)
            f = (floor_half or {}).get(i, 0.0) if r.get("winner") != r.get("shipped") else 0.0
            var += (n * t_win * math.hypot((hi - lo) / 2, score * f) / Z95) ** 2
    saved = before - after
    half = Z95 * math.sqrt(var)
    return {
        "calls": called,
        "calls_unmeasured": unmeasured,
        "time_before_us": round(before, 3),
        "time_after_us": round(after, 3),
        "saved_us": round(saved, 3),
        "saved_ci_us": [round(saved - half, 3), round(saved + half, 3)],
        "saved_share": round(saved / before, 6) if before > 0 else None,
    }


def searched_rows(scores: Sequence[Mapping], final: FinalRace) -> list[Mapping]:
    """The score rows of the kernels the night raced as its own or as a floor: all but a native floor kernel
    raced at a size only as that size's native pick (its failures there are upstream's, not the run's).
    Judged per size, since upstream's libraries share solutions: one size's floor, or a kernel on its
    shortlist of shipped kernels, can be another size's native pick."""
    return [r for r in scores if not _native_only(final, int(r["size_index"]), r["kernel_id"])]


def _native_only(final: FinalRace, i: int, kernel: str | None) -> bool:
    """Is ``kernel`` at size ``i`` that size's native pick and raced there as nothing else?"""
    return (
        kernel is not None
        and kernel == final.native.get(i)
        and kernel not in final.tuned
        and kernel not in final.contenders.get(i, ())
        and kernel != final.reference.get(i)
        and kernel not in final.shortlist.per_size.get(i, ())
    )


def _floor_half_widths(scores: Sequence[Mapping], final: FinalRace) -> dict[int, float]:
    """Per size, the half-width (in log) of its reference's interval: its score is its own samples against
    their median, so the interval is that median's uncertainty."""
    out = {}
    for r in scores:
        i = int(r["size_index"])
        lo, hi = finite(r.get("ci_low")), finite(r.get("ci_high"))
        if r["kernel_id"] == final.reference.get(i) and r["status"] == "ok" and lo and hi and lo > 0:
            out[i] = (math.log(hi) - math.log(lo)) / 2
    return out


def _native_contender(kernel: str | None, tuned: Mapping, ok: set[str]) -> list[str]:
    """The native floor's kernel of a size as one more contender of its race (already there if tuned)."""
    return [kernel] if kernel is not None and kernel in ok and kernel not in tuned else []


def _judge_floors(
    rows: list[dict], scores: Sequence[Mapping], final: FinalRace, shipped: set[str], tolerance: float
) -> list[dict]:
    """Each size's final kernel against both second floors: the native kernel where the winner loses to it,
    then the best shipped kernel where that loses to it, then the native kernel again where a kept shipped
    kernel loses to it (and the judgement against the best shipped kernel again). Two rounds settle it: a
    kernel taken for beating another beyond the tie tolerance never loses to it."""
    rows = keep_native(rows, scores, final.native, tolerance)
    rows = best_shipped.judge_rows(rows, scores, shipped, tolerance, final.shortlist.positions)
    rows = keep_native(rows, scores, final.native, tolerance)
    rows = best_shipped.judge_rows(rows, scores, shipped, tolerance, final.shortlist.positions)
    if final.native:  # the size ships upstream's own kernel, won outright or taken: kept by native
        for r in rows:
            r["kept_by_native"] = _native_only(final, int(r["size_index"]), r["winner"])
    return rows


def _served(
    rows: list[dict], scores: Sequence[Mapping], deck: LibraryDeck, final: FinalRace, tolerance: float
) -> list[dict]:
    """What rocBLAS can serve: one kernel per runtime key (:mod:`oto.measurement.dispatch`), the sizes it
    changed judged against both second floors again without taking their kernel."""
    rows = one_kernel_per_key(rows, scores, deck.sizes, tolerance)
    if not any(r.get("one_kernel_for") for r in rows):
        return rows
    shipped, positions = _shipped(final, deck), final.shortlist.positions
    rows = best_shipped.judge_rows(rows, scores, shipped, tolerance, positions, take_losers=False)
    if final.native:
        for r in rows:
            r["kept_by_native"] = _native_only(final, int(r["size_index"]), r["winner"])
    return rows


def keep_native(
    rows: list[dict], scores: Sequence[Mapping], native: Mapping[int, str | None], tolerance: float
) -> list[dict]:
    """Rows whose winner loses to the native floor's kernel of their size (or that have none while it ran)
    take that kernel, marked ``kept_by_native``: the final library never ships a size slower than upstream's
    own library for the GPU runs it, as it never ships one slower than the best shipped kernel."""
    if not native:
        return rows
    ran = {
        (int(r["size_index"]), r["kernel_id"]): r
        for r in scores
        if r["status"] == "ok" and not missing(r["score"])
    }
    out = []
    for row in rows:
        row = dict(row)
        theirs = ran.get((int(row["size_index"]), native.get(int(row["size_index"]))))
        lost = theirs is not None and (
            row.get("winner") is None or best_shipped.against(row, theirs, tolerance)[1] == "loss"
        )
        if lost:
            take_kernel(row, theirs, tolerance)
        row["kept_by_native"] = lost or bool(row.get("kept_by_native"))
        out.append(row)
    return out


def native_rows(rows: list[dict], scores: list[Mapping], final: FinalRace) -> dict[str, Any] | None:
    """Each per-size row's native floor kernel, its score (against the floor) and the winner's speed-up over
    it (``vs_native``); the summary over the sizes both ran. None without a native floor."""
    if not final.native:
        return None
    score = {(int(r["size_index"]), r["kernel_id"]): r["score"] for r in scores if r["status"] == "ok"}
    status = race_status(scores)
    ratios = []
    for r in rows:
        kernel = final.native.get(r["size_index"])
        native = score.get((r["size_index"], kernel)) if kernel else None
        native = None if native is None or missing(native) or native <= 0 else float(native)
        r["native"], r["native_score"] = kernel, native
        r["native_status"] = status.get((r["size_index"], kernel)) if kernel else None
        r["vs_native"] = r["score"] / native if native and r["score"] else None
        if r["vs_native"]:
            ratios.append(r["vs_native"])
    return {
        "geomean_vs_native": geomean(ratios) if ratios else None,
        "sizes": len(ratios),
        "kept": sum(1 for r in rows if r.get("kept_by_native")),
        # upstream's own kernel gave wrong results there: no speed-up over it counts (compare leaves them out)
        "failed_validation": sum(1 for r in rows if r["native_status"] == "validation_failed"),
    }


def final_document(
    selection: Mapping, deck: LibraryDeck, final: FinalRace, backend, profile: Mapping, config: Mapping
) -> dict[str, Any]:
    """final.yaml: the winner of every deck size with its verdict against the shipped solution, how the
    race at each size stopped, the summary, and how the numbers were measured."""
    library = Library.parse(deck.name)
    df = final.race.samples
    scores = score_library(df, library, [list(s[:4]) for s in deck.sizes], profile, config).to_dict("records")
    stops = {i: d.stop for i, d in final.race.decisions.items()}
    # every kernel raced at a size may win it, upstream's own (the native floor's pick) included: a tie the
    # race cannot separate goes to the faster point estimate, as it does between the tuned and the shipped
    # kernels (the gfx1103 demo shipped tuned kernels 2-6% slower than upstream's, compare found, when
    # upstream's kernel could only be taken on a clear loss)
    rows = per_size_rows(
        scores,
        [list(s[:4]) for s in deck.sizes],
        library,
        profile,
        float(config["benchmark"]["tie_tolerance"]),
        int(selection["generation"]),
    )
    status = race_status(scores)
    for r in rows:
        r["shipped"] = final.reference[r["size_index"]]
        r["shipped_status"] = status.get((r["size_index"], r["shipped"]))
        r["shipped_gflops"] = deck.shipped_gflops(r["size_index"])  # named shipped_gflops_gfx900 before
        r["race"] = stops.get(r["size_index"]) or "no_valid"
    rows = floor_failed_winners(rows, scores)
    tolerance = float(config["benchmark"]["tie_tolerance"])
    rows = _judge_floors(rows, scores, final, _shipped(final, deck), tolerance)
    rows = _served(rows, scores, deck, final, tolerance)
    if deck.calls is not None:  # a workload's times: the winner's in the state its score is in
        state = score_state_times(df, library, [list(s[:4]) for s in deck.sizes], profile, config)
        for r in rows:
            t = state.get((str(r["winner"]), int(r["size_index"]))) if r["winner"] else None
            r["time_us_median_state"] = round(t, 3) if t is not None else None
    failures = Counter({k: v for k, v in selection["summary"]["failures"].items()})
    failures.update(b.status for b in final.built.values() if b.status != "ok")
    failures.update(measurement_failures(searched_rows(scores, final)))
    native = native_rows(rows, scores, final)
    winners = sorted({r["winner"] for r in rows if r["winner"]})
    doc = {
        "library": deck.name,
        "family": library.family.code,
        "pattern": library.pattern,
        "provenance": backend.provenance(),
        # the run that finished this library (nights accumulate in a folder)
        "night": night_record(config, (profile.get("stock_library") or {}).get("logic_prefix")),
        "measurement": {
            **measurement_summary(df, float(profile["clock_mhz"])),
            "repetitions_per_call": backend.capabilities.repetitions_per_call,
        },
        "generations": int(selection["generation"]) + 1,
        "converged": bool(selection["convergence"]["converged"]),
        "convergence": selection["convergence"],
        "tuning_summary": selection["summary"],
        "sizes": deck.sizes,
        "per_size": rows,
        "kernels": {k: dict(final.kernels[k].params) for k in winners},
        "shipped_kernels": len({r for r in final.reference.values() if r is not None}),
        "shipped_gflops_arch": deck.shipped_arch(),  # where the per-size shipped_gflops were measured
        "reference_substitutes": final.substitutes,
        # sizes Tensile cannot tell apart (the batch count only) given one kernel: oto.measurement.dispatch
        "one_kernel_per_key": dispatch_summary(rows),
        "summary": {**summarise(rows, failures, deck.weights), "best_shipped": best_shipped.summary(rows)},
        # the second floor: how many shipped kernels were raced per size, and which (by id and position)
        "best_shipped": {
            "shortlist": int(config_block(config, "benchmark")["best_shipped_shortlist"]),
            "kernels_raced": len(final.shortlist.kernels),
            "positions": {k: final.shortlist.positions[k] for k in sorted(final.shortlist.kernels)},
        },
    }
    if deck.calls is not None:  # a workload: the time its calls of this library take, before and after
        doc["workload"] = workload_time(
            rows, deck.sizes, deck.calls, library, _floor_half_widths(scores, final)
        )
        doc["workload"]["files"] = workload_identity(config["deck"])  # which workload these figures are of
        # how far the race went for the workload's figure (racing.race: precision_targets)
        doc["workload"]["precision"] = {
            "target": float(config_block(config, "benchmark")["racing"]["workload_precision"]),
            "sizes_raced": len(final.race.refined),
            "launches": int(sum(final.race.refined.values())),
        }
    if deck.floor is not None:  # absent: the deck's own shipped kernels
        doc["floor"] = deck.reference_floor().describe()
    if native is not None:  # absent: no native floor configured, or none shipped for this library
        where = {
            k: v for k, v in (deck.native_floor or {}).items() if k not in ("solutions", "sizes", "shipped")
        }
        doc["native_floor"] = {**where, **native}
    return doc


def final_log_lines(doc: Mapping[str, Any]) -> list[str]:
    """What finalize's log says of a final: both floors, and the workload's time where there is one."""
    s, b = doc["summary"], doc["summary"]["best_shipped"]
    nan = float("nan")
    lines = [
        f"{len(doc['per_size'])} sizes, {len(doc['kernels'])} kernels, geomean "
        f"{s['geomean_score'] or nan:.3f} x spoof, W/T/L {s['wins']}/{s['ties']}/{s['losses']}"
        + (f" ({n} size{'s' * (n != 1)} where the spoof's kernel failed)" if (n := s["floor_failed"]) else "")
        + "; vs best "
        f"shipped {b['geomean_score'] or nan:.3f} x, W/T/L {b['wins']}/{b['ties']}/{b['losses']}"
    ]
    if (one := doc.get("one_kernel_per_key") or {}).get("sizes"):
        lines.append(
            f"{one['sizes']} size(s) in {one['groups']} group(s) that differ only in the batch count "
            "(Tensile serves a group one kernel) take their group's best kernel"
        )
    if "workload" in doc:
        w = doc["workload"]
        lo, hi = w["saved_ci_us"]
        lines.append(
            f"workload-weighted geomean {s.get('weighted_geomean_score') or nan:.3f}; the workload's "
            f"{w['calls']} calls: {w['saved_us']:.1f} us saved (95% {lo:.1f} to {hi:.1f}) of "
            f"{w['time_before_us']:.1f} us"
        )
    return lines
