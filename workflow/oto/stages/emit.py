"""emit: proposals → the generation's candidate kernels (legal, new) and their Tensile benchmark config."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.backends import job_stream, resolve
from oto.deck.model import read_library_yaml
from oto.deck.tuning_sizes import tuning_indices
from oto.files import read_yaml, require, write_yaml
from oto.gemm import Library
from oto.registry.transfer import knowledge
from oto.search.candidates import classify_proposals
from oto.tensile import legality
from oto.tensile.benchmark_config import render_benchmark_yaml

log = logging.getLogger(__name__)


def run(
    proposals_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    previous_selection: Path | None,
    out_candidates: Path,
    out_tensile: Path,
) -> dict:
    proposals_doc = read_yaml(proposals_path)
    generation = int(require(proposals_doc, "generation", proposals_path, int))
    frozen = bool(proposals_doc.get("frozen", False))
    deck = read_library_yaml(deck_path)
    library = Library.parse(deck.name)
    limits = legality.Limits.from_profile(profile)
    idx = tuning_indices(deck.sizes, int(config["benchmark"]["tuning_sizes"]))
    sizes = [list(deck.sizes[i][:4]) for i in idx]

    seen: set[str] = set()
    if previous_selection is not None:
        seen.update(read_yaml(previous_selection).get("measured", []))
    arch_dir = Path(out_candidates).parents[2]
    know = None
    if not frozen:
        provenance = resolve(config, profile, job_stream(deck.name, f"gen{generation}")).provenance()
        know = knowledge(arch_dir, profile["arch"], deck.name, config, sizes, provenance, as_job=True)
    registry_seen = frozenset(know.measured) if know is not None else frozenset()

    kernels, rejected = (
        ([], [])
        if frozen
        else classify_proposals(
            list(require(proposals_doc, "proposals", proposals_path, list)),
            library,
            limits,
            seen,
            registry_seen,
        )
    )
    reference: dict[int, str] = {}
    substitutes: dict[int, dict] = {}
    if not frozen:
        by_id = {k["id"]: k for k in kernels}
        refs = deck.references(idx, limits)
        for local, i in enumerate(idx):
            ref = refs[i]
            if "substitute" in ref:
                substitutes[local] = ref["substitute"]
            if ref["id"] is None:
                continue  # no shipped kernel Tensile can build near this size: no reference
            kid = ref["id"]
            reference[local] = kid
            if kid in by_id:
                if "reference" not in by_id[kid]["roles"]:
                    by_id[kid]["roles"].append("reference")
            else:
                by_id[kid] = {
                    "id": kid,
                    "params": ref["params"],
                    "roles": ["reference"],
                    "proposer": "shipped",
                    "rationale": "spoof floor: shipped gfx900 solution for this size",
                }
                kernels.append(by_id[kid])
    doc = {
        "library": deck.name,
        "generation": generation,
        "frozen": frozen,
        "sizes": sizes,
        "deck_indices": idx,
        "reference": reference,
        "reference_substitutes": substitutes,
        "kernels": kernels,
        "rejected": rejected,
    }
    write_yaml(out_candidates, doc)
    why = "library converged; results carried forward" if frozen else "no new legal candidate"
    Path(out_tensile).parent.mkdir(parents=True, exist_ok=True)
    Path(out_tensile).write_text(
        render_benchmark_yaml(
            deck, profile, generation, kernels, sizes, int(config["benchmark"]["repetitions"]), why
        )
    )
    n_cand = sum("candidate" in k["roles"] for k in kernels)
    log.info(
        "%s gen%d: %d candidates, %d rejected, %d reference kernels, %d sizes%s",
        deck.name,
        generation,
        n_cand,
        len(rejected),
        len(set(reference.values())),
        len(sizes),
        " (frozen)" if frozen else "",
    )
    return doc
