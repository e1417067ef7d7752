"""The finals of a library (rule finalize): its tuned finalists raced on every deck size against each size's
floor (by default its shipped solution, the spoof floor: oto.deck.floors), and the final document
(final.yaml) the logic file and the acceptance report use, so that every size of the deck gets a measured
winner, not an extrapolation from the tuning sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.backends.base import BuildResult, Kernel, Problem, Size
from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.measurement.benchmarking import race_library
from oto.measurement.racing import RaceResult
from oto.measurement.score_rows import missing
from oto.measurement.scoring import measurement_summary, score_library
from oto.measurement.selection import finalists, geomean, measurement_failures, per_size_rows, summarise
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
    # deck size → the native floor's kernel (config deck.native_floor), raced beside the finalists and
    # reported, never a winner; empty without a native floor
    native: dict[int, str | None] = field(default_factory=dict)


def race_finalists(
    backend,
    selection: Mapping,
    deck: LibraryDeck,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    results: Path,
) -> FinalRace:
    """Build the finalists and every deck size's reference, and race the ones that built at every deck
    size (:func:`oto.measurement.benchmarking.race_library`, job ``final``)."""
    tuned = finalists(selection)
    kernels = {k: Kernel(k, canonical(p)) for k, p in tuned.items()}
    limits = legality.Limits.from_profile(profile)
    refs = deck.references(list(range(len(deck.sizes))), limits)
    reference: dict[int, str | None] = {}
    for i, ref in refs.items():
        reference[i] = ref["id"]
        if ref["id"] is not None:
            kernels.setdefault(ref["id"], Kernel(ref["id"], ref["params"]))
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
            i: [k for k in tuned if k in ok] + _native_contender(native.get(i), tuned, ok)
            for i in range(len(sizes))
        },
        {i: r for i, r in reference.items() if r is not None and r in ok},
        workdir,
        "final",
        results,
    )
    substitutes = {i: r["substitute"] for i, r in refs.items() if "substitute" in r}
    return FinalRace(tuned, kernels, reference, substitutes, built, race, native)


def _native_contender(kernel: str | None, tuned: Mapping, ok: set[str]) -> list[str]:
    """The native floor's kernel of a size as one more contender of its race (already there if tuned)."""
    return [kernel] if kernel is not None and kernel in ok and kernel not in tuned else []


def native_rows(rows: list[dict], scores: list[Mapping], final: FinalRace) -> dict[str, Any] | None:
    """Each per-size row's native floor kernel, its score (against the floor) and the winner's speed-up over
    it (``vs_native``); the summary over the sizes both ran. None without a native floor."""
    if not final.native:
        return None
    score = {(int(r["size_index"]), r["kernel_id"]): r["score"] for r in scores if r["status"] == "ok"}
    ratios = []
    for r in rows:
        kernel = final.native.get(r["size_index"])
        native = score.get((r["size_index"], kernel)) if kernel else None
        native = None if native is None or missing(native) or native <= 0 else float(native)
        r["native"], r["native_score"] = kernel, native
        r["vs_native"] = r["score"] / native if native and r["score"] else None
        if r["vs_native"]:
            ratios.append(r["vs_native"])
    return {"geomean_vs_native": geomean(ratios) if ratios else None, "sizes": len(ratios)}


def final_document(
    selection: Mapping, deck: LibraryDeck, final: FinalRace, backend, profile: Mapping, config: Mapping
) -> dict[str, Any]:
    """final.yaml: the winner of every deck size with its verdict against the shipped solution, how the
    race at each size stopped, the summary, and how the numbers were measured."""
    library = Library.parse(deck.name)
    df = final.race.samples
    scores = score_library(df, library, [list(s[:4]) for s in deck.sizes], profile, config).to_dict("records")
    # the native floor's kernels raced as contenders only: never a size's winner
    native_only = {k for k in final.native.values() if k is not None and k not in final.tuned}
    ranked = [r for r in scores if r["kernel_id"] not in native_only]
    stops = {i: d.stop for i, d in final.race.decisions.items()}
    rows = per_size_rows(
        ranked,
        [list(s[:4]) for s in deck.sizes],
        library,
        profile,
        float(config["benchmark"]["tie_tolerance"]),
        int(selection["generation"]),
    )
    for r in rows:
        r["shipped"] = final.reference[r["size_index"]]
        r["shipped_gflops"] = deck.shipped_gflops(r["size_index"])  # named shipped_gflops_gfx900 before
        r["race"] = stops.get(r["size_index"]) or "no_valid"
    failures = Counter({k: v for k, v in selection["summary"]["failures"].items()})
    failures.update(b.status for b in final.built.values() if b.status != "ok")
    failures.update(measurement_failures(ranked))
    native = native_rows(rows, scores, final)
    winners = sorted({r["winner"] for r in rows if r["winner"]})
    doc = {
        "library": deck.name,
        "family": library.family.code,
        "pattern": library.pattern,
        "provenance": backend.provenance(),
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
        "summary": summarise(rows, failures),
    }
    if deck.floor is not None:  # absent: the deck's own shipped kernels
        doc["floor"] = deck.reference_floor().describe()
    if native is not None:  # absent: no native floor configured, or none shipped for this library
        where = {
            k: v for k, v in (deck.native_floor or {}).items() if k not in ("solutions", "sizes", "shipped")
        }
        doc["native_floor"] = {**where, **native}
    return doc
