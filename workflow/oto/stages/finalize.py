"""finalize: measure the tuned winners on every deck size of the library, against each size's shipped
solution, and pick the final kernel per size. This is what the logic file and the acceptance report use:
every size of the deck gets a measured winner, not an extrapolation from the tuning sizes. The finalists
race like a generation does (:mod:`oto.measurement.racing`); each size records why its race stopped."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from oto.backends import job_stream, resolve
from oto.backends.base import Kernel, Problem, Size
from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, write_yaml
from oto.gemm import Library
from oto.measurement.benchmarking import RACE_BOOTSTRAP, run_race
from oto.measurement.scoring import measurement_summary, score_library
from oto.measurement.selection import (
    finalists,
    measurement_failures,
    per_size_rows,
    summarise,
)
from oto.measurement.selection_file import read_selection
from oto.tensile import legality
from oto.tensile.params import canonical

log = logging.getLogger(__name__)


def run(
    selection_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    out_final: Path,
    out_samples: Path,
) -> dict:
    selection = read_selection(selection_path)
    deck = read_library_yaml(deck_path)
    library = Library.parse(deck.name)
    backend = resolve(config, profile, job_stream(deck.name, "final"))
    problem = Problem.of(deck, profile)

    tuned = finalists(selection)
    kernels = {k: Kernel(k, canonical(p)) for k, p in tuned.items()}
    reference: dict[int, str | None] = {}
    refs = deck.references(list(range(len(deck.sizes))), legality.Limits.from_profile(profile))
    for i, ref in refs.items():
        reference[i] = ref["id"]
        if ref["id"] is not None:
            kernels.setdefault(ref["id"], Kernel(ref["id"], ref["params"]))
    built = {b.kernel_id: b for b in backend.build(problem, list(kernels.values()), Path(workdir))}
    ok = {k for k, b in built.items() if b.status == "ok"}
    sizes = [Size(*map(int, s[:4])) for s in deck.sizes]
    size_lists = [list(s[:4]) for s in deck.sizes]
    race = run_race(
        backend,
        problem,
        {k: kernels[k] for k in ok},
        sizes,
        {i: [k for k in tuned if k in ok] for i in range(len(sizes))},
        {i: r for i, r in reference.items() if r is not None and r in ok},
        lambda df, only: score_library(df, library, size_lists, profile, config, only, RACE_BOOTSTRAP),
        config,
        workdir,
        f"{config['seed']}:{deck.name}:final",
        archive=Path(out_final).parent.parent / "measurements" / deck.name / "final",
    )
    df = race.samples
    atomic_write_text(out_samples, df.to_csv(index=False))
    for line in race.log:
        log.info("%s final: %s", deck.name, line)
    scores = score_library(df, library, size_lists, profile, config).to_dict("records")
    stops = {i: d.stop for i, d in race.decisions.items()}
    rows = per_size_rows(
        scores,
        [list(s[:4]) for s in deck.sizes],
        library,
        profile,
        float(config["benchmark"]["tie_tolerance"]),
        int(selection["generation"]),
    )
    for r in rows:
        r["shipped"] = reference[r["size_index"]]
        r["shipped_gflops_gfx900"] = float(deck.shipped[r["size_index"]][1])
        r["race"] = stops.get(r["size_index"]) or "no_valid"
    failures = Counter({k: v for k, v in selection["summary"]["failures"].items()})
    failures.update(b.status for b in built.values() if b.status != "ok")
    failures.update(measurement_failures(scores))
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
        "kernels": {k: dict(kernels[k].params) for k in winners},
        "shipped_kernels": len({r for r in reference.values() if r is not None}),
        "reference_substitutes": {i: r["substitute"] for i, r in refs.items() if "substitute" in r},
        "summary": summarise(rows, failures),
    }
    write_yaml(out_final, doc)
    s = doc["summary"]
    log.info(
        "%s final: %d sizes, %d kernels, geomean %.3f x spoof, W/T/L %d/%d/%d",
        deck.name,
        len(rows),
        len(winners),
        s["geomean_score"] or float("nan"),
        s["wins"],
        s["ties"],
        s["losses"],
    )
    return doc
