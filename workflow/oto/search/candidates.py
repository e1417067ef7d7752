"""Which proposals become candidates: canonical parameters, Tensile's legality, and never measuring a kernel
twice (in this run, or in an earlier one under the same protocol, unless it is a deliberate top-up); and the
generation's candidates document (candidates.yaml): those candidates plus the spoof-floor reference of each
tuning size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.numbers import is_weighted
from oto.registry.records import TOPUP
from oto.tensile import legality
from oto.tensile.params import CandidateError, candidate_id


def classify_proposals(
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
            # Tensile's own form: proposals it would build as one kernel get one id (LdsPad -1 on a Source
            # kernel is LdsPad 0, ...)
            params = legality.resolve(library, p.get("params") or {}, limits)
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
        elif kid in registry_seen and entry["proposer"] != TOPUP and kid not in seen:
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


def candidates_document(
    deck: LibraryDeck,
    generation: int,
    frozen: bool,
    proposals: Sequence[Mapping],
    indices: list[int],
    limits: legality.Limits,
    seen: set[str],
    registry_seen: frozenset[str] = frozenset(),
    avoid: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """candidates.yaml of one generation: the kernels to build (the legal, new ``proposals`` and the
    reference of each tuning size, the deck sizes at ``indices``), the rejected proposals, and the sizes
    whose shipped kernel Tensile cannot build or this GPU must not run (``avoid``, {kernel id: why}: the
    GPU-reset quarantine), handed to a nearby size's or left without a reference. The references are the
    deck's floor (oto.deck.floors). A frozen generation (converged) has no kernels."""
    kernels, rejected = (
        ([], [])
        if frozen
        else classify_proposals(list(proposals), Library.parse(deck.name), limits, seen, registry_seen)
    )
    reference: dict[int, str] = {}
    substitutes: dict[int, dict] = {}
    if not frozen:
        by_id = {k["id"]: k for k in kernels}
        refs = deck.references(indices, limits, avoid)
        for local, i in enumerate(indices):
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
                    "proposer": "baseline" if ref.get("baseline") else "shipped",
                    "rationale": deck.reference_floor().note(deck),
                }
                kernels.append(by_id[kid])
    doc = {
        "library": deck.name,
        "generation": generation,
        "frozen": frozen,
        "sizes": [list(deck.sizes[i][:4]) for i in indices],
        "deck_indices": indices,
        "reference": reference,
        "reference_substitutes": substitutes,
        "kernels": kernels,
        "rejected": rejected,
    }
    if is_weighted(deck.weights):  # a workload's: select aggregates the scores by them
        doc["weights"] = [float(deck.weights[i]) for i in indices]
    return doc
