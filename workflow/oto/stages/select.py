"""select: per tuning size, the best kernel so far, its verdict against the spoof floor, and convergence
(:mod:`oto.measurement.selection`); also the generation's experiment-registry job file."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from oto.files import read_yaml, write_yaml
from oto.gemm import Library
from oto.measurement.score_rows import read_score_rows
from oto.measurement.selection import (
    convergence,
    measurement_failures,
    novelty,
    observations,
    per_size_rows,
    summarise,
)
from oto.measurement.selection_file import read_selection
from oto.registry.job_files import write_job_file
from oto.registry.records import generation_records

log = logging.getLogger(__name__)


def run(
    scores_path: Path,
    candidates_path: Path,
    build_path: Path,
    previous_path: Path | None,
    profile: Mapping,
    config: Mapping,
    out_selection: Path,
    out_registry: Path | None = None,
) -> dict:
    cands = read_yaml(candidates_path)
    build = read_yaml(build_path)
    generation = int(cands["generation"])
    library = Library.parse(cands["library"])
    prev = read_selection(previous_path) if previous_path else None

    if cands.get("frozen") and prev is not None:
        doc = dict(prev)
        doc.update(generation=generation, frozen=True)
        write_yaml(out_selection, doc)
        if out_registry is not None:
            write_job_file(out_registry, [])  # converged: nothing proposed, nothing measured
        log.info("%s gen%d: frozen, carried forward from gen%d", library.name, generation, prev["generation"])
        return doc

    scores = read_score_rows(scores_path)  # plain rows: select is one of the most frequent jobs, pandas-free
    params = {k["id"]: k["params"] for k in cands.get("kernels", [])}
    previous_rows = {int(r["size_index"]): r for r in prev["per_size"]} if prev else None
    rows = per_size_rows(
        scores,
        cands["sizes"],
        library,
        profile,
        float(config["benchmark"]["tie_tolerance"]),
        generation,
        previous_rows,
    )

    failures = Counter(prev["summary"]["failures"]) if prev else Counter()
    failures.update(b["status"] for b in build.get("kernels", []) if b["status"] != "ok")
    failures.update(r["class"] for r in cands.get("rejected", []))
    failures.update(measurement_failures(scores))

    kernels = dict(prev["kernels"]) if prev else {}
    for r in rows:
        if r["winner"] and r["winner"] not in kernels:
            kernels[r["winner"]] = params[r["winner"]]
    kernels = {k: v for k, v in kernels.items() if any(r["winner"] == k for r in rows)}
    summary = summarise(rows, failures)
    history = [*((prev or {}).get("convergence", {}).get("history", [])), summary["geomean_score"] or 0.0]
    measured = sorted(
        set(prev.get("measured", []) if prev else [])
        | set(params)
        | {r["id"] for r in cands.get("rejected", []) if r.get("id")}
    )
    conv_cfg = config["search"]["convergence"]
    doc = {
        "library": library.name,
        "generation": generation,
        "frozen": False,
        "provenance": build.get("provenance", {}),
        "measurement": {"drift": str(scores[0]["drift"]) if scores and "drift" in scores[0] else None},
        "sizes": cands["sizes"],
        "deck_indices": cands.get("deck_indices", []),
        "per_size": rows,
        "kernels": kernels,
        "summary": summary,
        "convergence": convergence(history, float(conv_cfg["epsilon"]), int(conv_cfg["patience"])),
        "observations": observations(
            scores,
            params,
            rows,
            (prev or {}).get("observations", []),
            {
                b["id"]: (b["status"], b.get("reason", ""))
                for b in build.get("kernels", [])
                if b["status"] != "ok"
            },
        ),
        "measured": measured,
        "novelty": novelty(cands, rows, generation),
    }
    write_yaml(out_selection, doc)
    if out_registry is not None:
        write_job_file(
            out_registry,
            generation_records(cands, build, scores, config, profile["arch"]),
        )
    log.info(
        "%s gen%d: geomean score %.3f, W/T/L %d/%d/%d, %s",
        library.name,
        generation,
        summary["geomean_score"] or float("nan"),
        summary["wins"],
        summary["ties"],
        summary["losses"],
        doc["convergence"]["reason"],
    )
    return doc
