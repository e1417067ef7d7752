"""The finals of a library (rule finalize): its tuned finalists raced on every deck size against each size's
floor (by default its shipped solution, the spoof floor: oto.deck.floors), and the final document
(final.yaml) the logic file and the acceptance report use, so that every size of the deck gets a measured
winner, not an extrapolation from the tuning sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.backends.base import BuildResult, Kernel, Problem, Size
from oto.config import night_record
from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.measurement.benchmarking import race_library
from oto.measurement.racing import RaceResult
from oto.measurement.scoring import measurement_summary, score_library
from oto.measurement.selection import finalists, measurement_failures, per_size_rows, summarise
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
    refs = deck.references(list(range(len(deck.sizes))), legality.Limits.from_profile(profile))
    reference: dict[int, str | None] = {}
    for i, ref in refs.items():
        reference[i] = ref["id"]
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
        {i: [k for k in tuned if k in ok] for i in range(len(sizes))},
        {i: r for i, r in reference.items() if r is not None and r in ok},
        workdir,
        "final",
        results,
    )
    substitutes = {i: r["substitute"] for i, r in refs.items() if "substitute" in r}
    return FinalRace(tuned, kernels, reference, substitutes, built, race)


def final_document(
    selection: Mapping, deck: LibraryDeck, final: FinalRace, backend, profile: Mapping, config: Mapping
) -> dict[str, Any]:
    """final.yaml: the winner of every deck size with its verdict against the shipped solution, how the
    race at each size stopped, the summary, and how the numbers were measured."""
    library = Library.parse(deck.name)
    df = final.race.samples
    scores = score_library(df, library, [list(s[:4]) for s in deck.sizes], profile, config).to_dict("records")
    stops = {i: d.stop for i, d in final.race.decisions.items()}
    rows = per_size_rows(
        scores,
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
    failures.update(measurement_failures(scores))
    winners = sorted({r["winner"] for r in rows if r["winner"]})
    doc = {
        "library": deck.name,
        "family": library.family.code,
        "pattern": library.pattern,
        "provenance": backend.provenance(),
        "night": night_record(config),  # the run that finished this library (nights accumulate in a folder)
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
    return doc
