"""select: per tuning size, the best kernel so far, its verdict against the spoof floor, and convergence
(:mod:`oto.measurement.selection`); also the generation's experiment-registry job file."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.files import read_yaml, read_yaml_mirrored, write_yaml_mirrored
from oto.hardware.ceilings import ROOFLINE_FIELDS
from oto.measurement.score_rows import read_score_rows
from oto.measurement.selection import carried_forward, selection_document, selection_log_line
from oto.measurement.selection_file import read_selection
from oto.registry.job_files import write_job_file
from oto.registry.records import generation_records
from oto.stages import Stage

STAGE = Stage(
    name="select",
    scope="generation",
    home="{library}/gen{gen}",
    reads=("compile", "emit", "normalise"),
    profile=("arch", *ROOFLINE_FIELDS),  # the per-size rows' ceilings
)
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
    cands, build = read_yaml_mirrored(candidates_path), read_yaml(build_path)
    name, generation = cands["library"], int(cands["generation"])
    prev = read_selection(previous_path) if previous_path else None
    if cands.get("frozen") and prev is not None:
        doc, records = carried_forward(prev, generation), []  # converged: nothing proposed, nothing measured
        log.info("%s gen%d: frozen, carried forward from gen%d", name, generation, prev["generation"])
    else:
        scores = read_score_rows(scores_path)  # plain rows: select is a frequent job, pandas-free
        doc = selection_document(cands, build, scores, prev, profile, config)
        records = generation_records(cands, build, scores, config, profile["arch"])
        log.info("%s gen%d: %s", name, generation, selection_log_line(doc))
    write_yaml_mirrored(out_selection, doc)  # with a JSON mirror: the next mutate, emit and select read it
    if out_registry is not None:
        write_job_file(out_registry, records)
    return doc
