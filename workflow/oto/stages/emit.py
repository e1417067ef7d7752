"""emit: proposals → the generation's candidate kernels (legal, new) and their Tensile benchmark config."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

import oto
from oto import legality, registry
from oto.datatypes import Library
from oto.deck import LibraryDeck, read_library_yaml
from oto.files import read_yaml, require, write_yaml
from oto.sizes import tuning_indices
from oto.tensile_defaults import BENCHMARK_PROBLEM_KEYS, TENSILE_MIN_VERSION
from oto.tensile_params import CandidateError, candidate_id, canonical

log = logging.getLogger(__name__)


def tuning_sizes(deck: LibraryDeck, count: int) -> list[int]:
    return tuning_indices(deck.sizes, count)


def reference_params(deck: LibraryDeck, size_index: int) -> dict[str, Any]:
    """The shipped solution the spoof would run at this deck size."""
    position = int(deck.shipped[size_index][0])
    return dict(deck.solutions[position]["params"])


def classify(
    proposals: list[Mapping],
    library: Library,
    limits: legality.Limits,
    seen: set[str],
    registry_seen: frozenset[str] = frozenset(),
):
    """Split proposals into kernels to build and rejected ones (illegal or already measured).

    ``registry_seen``: kernels earlier runs already benchmarked at these sizes under this protocol; only a
    deliberate top-up (proposer ``topup``) may measure one again."""
    kernels, rejected = [], []
    for p in proposals:
        entry = {"proposer": p.get("proposer", "unknown"), "rationale": p.get("rationale", "")}
        try:
            params = canonical(p.get("params") or {})
        except CandidateError as exc:
            rejected.append(
                {**entry, "id": None, "params": p.get("params"), "class": "illegal", "reason": str(exc)}
            )
            continue
        kid = candidate_id(params)
        verdict = legality.check(library, params, limits)
        if not verdict.valid:
            rejected.append(
                {
                    **entry,
                    "id": kid,
                    "params": params,
                    "class": "illegal",
                    "reason": "; ".join(verdict.reasons),
                }
            )
        elif kid in registry_seen and entry["proposer"] != registry.TOPUP and kid not in seen:
            rejected.append(
                {
                    **entry,
                    "id": kid,
                    "params": params,
                    "class": "duplicate",
                    "reason": "already benchmarked at these sizes under this protocol (experiment registry)",
                }
            )
        elif kid in seen:
            rejected.append(
                {
                    **entry,
                    "id": kid,
                    "params": params,
                    "class": "duplicate",
                    "reason": "already measured in an earlier generation or this one",
                }
            )
        else:
            seen.add(kid)
            kernels.append({"id": kid, "params": params, "roles": ["candidate"], **entry})
    return kernels, rejected


def render_tensile_config(
    deck: LibraryDeck,
    profile: Mapping,
    generation: int,
    kernels: list[Mapping],
    sizes: list[list[int]],
    repetitions: int,
    why_empty: str = "",
) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("oto", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    problem = {k: deck.problem_type[k] for k in BENCHMARK_PROBLEM_KEYS if k in deck.problem_type}
    tensile = profile.get("tensile", {})
    cands = [k for k in kernels if "candidate" in k["roles"]]
    return env.get_template("tensile_benchmark.yaml.j2").render(
        oto_version=oto.__version__,
        library=deck.name,
        generation=generation,
        arch=profile["arch"],
        min_version=TENSILE_MIN_VERSION,
        repetitions=repetitions,
        problem_type=problem,
        candidates=[dict(k["params"]) for k in cands],
        c_ids=[k["id"] for k in cands],
        sizes=[list(s[:4]) for s in sizes],
        schedule=tensile.get("logic_prefix", profile["arch"]),
        device_names=list(tensile.get("device_names", [])),
        why_empty=why_empty,
    )


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
    idx = tuning_sizes(deck, int(config["benchmark"]["tuning_sizes"]))
    sizes = [list(deck.sizes[i][:4]) for i in idx]

    seen: set[str] = set()
    if previous_selection is not None:
        seen.update(read_yaml(previous_selection).get("measured", []))
    arch_dir = Path(out_candidates).parents[2]
    know = None if frozen else registry.knowledge(arch_dir, profile["arch"], deck.name, config, sizes)
    registry_seen = frozenset(know.measured) if know is not None else frozenset()

    kernels, rejected = (
        ([], [])
        if frozen
        else classify(
            list(require(proposals_doc, "proposals", proposals_path, list)),
            library,
            limits,
            seen,
            registry_seen,
        )
    )
    reference: dict[int, str] = {}
    if not frozen:
        by_id = {k["id"]: k for k in kernels}
        for local, i in enumerate(idx):
            params = canonical(reference_params(deck, i))
            kid = candidate_id(params)
            reference[local] = kid
            if kid in by_id:
                if "reference" not in by_id[kid]["roles"]:
                    by_id[kid]["roles"].append("reference")
            else:
                by_id[kid] = {
                    "id": kid,
                    "params": params,
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
        "kernels": kernels,
        "rejected": rejected,
    }
    write_yaml(out_candidates, doc)
    why = "library converged; results carried forward" if frozen else "no new legal candidate"
    Path(out_tensile).parent.mkdir(parents=True, exist_ok=True)
    Path(out_tensile).write_text(
        render_tensile_config(
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
