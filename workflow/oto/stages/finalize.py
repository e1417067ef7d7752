"""finalize: measure the tuned winners on every deck size of the library, against each size's shipped
solution, and pick the final kernel per size (:mod:`oto.measurement.finals`). This is what the logic file
and the acceptance report use. The finalists race like a generation does (:mod:`oto.measurement.racing`);
each size records why its race stopped."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.backends import job_stream, resolve
from oto.config import NIGHT_PROFILE_FIELDS
from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, write_yaml_mirrored
from oto.hardware import ceilings, memory
from oto.measurement import best_shipped
from oto.measurement.finals import final_document, final_log_lines, race_finalists
from oto.measurement.selection_file import read_selection
from oto.stages import BACKEND_FIELDS, Stage
from oto.tensile.legality import Limits

# benchmark's figures, selection's roofline, the legality limits of the references it builds and the model
# that shortlists the best shipped kernel's contenders
PROFILE = ("arch", BACKEND_FIELDS, *memory.PROFILE_FIELDS, *ceilings.ROOFLINE_FIELDS, *Limits.PROFILE_FIELDS,
           *best_shipped.PROFILE_FIELDS, *NIGHT_PROFILE_FIELDS)  # fmt: skip
STAGE = Stage(
    name="finalize", scope="library", home="{library}", reads=("deck", "select"), gpu=True, profile=PROFILE
)
log = logging.getLogger(__name__)


def run(
    selection_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    workdir: Path,
    results: Path,
    out_final: Path,
    out_samples: Path,
) -> dict:
    selection = read_selection(selection_path)
    deck = read_library_yaml(deck_path)
    backend = resolve(config, profile, job_stream(deck.name, "final"))
    final = race_finalists(backend, selection, deck, profile, config, Path(workdir), Path(results))
    atomic_write_text(out_samples, final.race.samples_csv())
    for line in final.race.log:
        log.info("%s final: %s", deck.name, line)
    doc = final_document(selection, deck, final, backend, profile, config)
    # with a JSON mirror: verify, compare, logic, family, the report read a 4,868-size final in 0.04 s not 2 s
    write_yaml_mirrored(out_final, doc)
    for line in final_log_lines(doc):
        log.info("%s final: %s", deck.name, line)
    return doc
