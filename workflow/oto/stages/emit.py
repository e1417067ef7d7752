"""emit: proposals → the generation's legal, new candidates (:mod:`oto.search.candidates`), Tensile config."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.deck.model import read_library_yaml
from oto.deck.tuning_sizes import deck_tuning_indices
from oto.files import read_yaml, read_yaml_mirrored, require, write_yaml_mirrored
from oto.measurement.knowledge import emit_knowledge
from oto.search.candidates import candidates_document
from oto.stages import PROVENANCE_FIELDS, Stage
from oto.tensile import benchmark_config, install, legality

STAGE = Stage(
    name="emit", scope="generation", home="{library}/gen{gen}", reads=("deck", "mutate"),
    profile=(*install.REGISTRATION_FIELDS, *legality.Limits.PROFILE_FIELDS, *benchmark_config.PROFILE_FIELDS,
             PROVENANCE_FIELDS),  # its provenance: registry knowledge of the same numbers and chip
)  # fmt: skip
log = logging.getLogger(__name__)


def run(
    proposals_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    previous_selection: Path | None,
    results: Path,
    out_candidates: Path,
    out_tensile: Path,
) -> dict:
    proposals = read_yaml(proposals_path)
    generation = int(require(proposals, "generation", proposals_path, int))
    frozen = bool(proposals.get("frozen", False))
    deck = read_library_yaml(deck_path)
    idx = deck_tuning_indices(deck, int(config["benchmark"]["tuning_sizes"]))
    previous = read_yaml_mirrored(previous_selection) if previous_selection is not None else {}
    seen = set(previous.get("measured", []))
    sizes = [list(deck.sizes[i][:4]) for i in idx]
    known = emit_knowledge(Path(results), deck.name, generation, sizes, profile, config) if not frozen else ()
    proposed = [] if frozen else require(proposals, "proposals", proposals_path, list)
    doc = candidates_document(deck, generation, frozen, proposed, idx, legality.Limits.from_profile(profile),
                              seen, *known)  # fmt: skip
    write_yaml_mirrored(out_candidates, doc)  # with a JSON mirror: four jobs of the generation read it
    why = "library converged; results carried forward" if frozen else "no new legal candidate"
    reps = int(config["benchmark"]["repetitions"])
    text = benchmark_config.render_benchmark_yaml(deck, profile, generation, doc["kernels"], sizes, reps, why)
    Path(out_tensile).parent.mkdir(parents=True, exist_ok=True)
    Path(out_tensile).write_text(text)
    log.info(
        "%s gen%d: %d candidates, %d rejected, %d reference kernels, %d sizes%s", deck.name, generation,
        sum("candidate" in k["roles"] for k in doc["kernels"]), len(doc["rejected"]),
        len(set(doc["reference"].values())), len(idx), " (frozen)" if frozen else "",
    )  # fmt: skip
    return doc
