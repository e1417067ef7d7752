"""Which proposals become candidates: canonical parameters, Tensile's legality, and never measuring a kernel
twice (in this run, or in an earlier one under the same protocol, unless it is a deliberate top-up)."""

from __future__ import annotations

from collections.abc import Mapping

from oto.gemm import Library
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
