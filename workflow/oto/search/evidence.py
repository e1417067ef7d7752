"""What a strategy is asked with: this run's evidence for one library (the previous selection's observations,
the shipped seeds, the kernels never to propose again) plus, when a registry store exists, what earlier runs
learned; and the deliberate top-ups a fresh run re-measures."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from oto.deck.model import LibraryDeck
from oto.deck.tuning_sizes import shipped_seeds
from oto.gemm import Library
from oto.registry.records import TOPUP
from oto.registry.transfer import Knowledge
from oto.search.prior_map import PriorTransfer, map_priors
from oto.search.space import Space
from oto.search.strategies import Evidence, Observation
from oto.search.tensile_space import tensile_space
from oto.tensile import legality

PRIOR_KEPT = 48  # family kernels transferred as prior evidence
TOPUPS = 2
log = logging.getLogger(__name__)


def evidence_for(
    deck: LibraryDeck,
    generation: int,
    selection: Mapping | None,
    profile: Mapping,
    config: Mapping,
    know: Knowledge | None = None,
) -> Evidence:
    """This run's evidence plus, when a registry store exists, what earlier runs learned: their
    measurements of this library, the kernels never to measure again, and the family's other patterns."""
    library = Library.parse(deck.name)
    obs = [
        Observation(
            o["id"],
            o["params"],
            o.get("score"),
            int(o.get("sizes_won", 0)),
            o.get("failure", ""),
            o.get("failure_reason", ""),
        )
        for o in (selection or {}).get("observations", [])
    ]
    seen = set((selection or {}).get("measured", []))
    space = tensile_space(library, legality.Limits.from_profile(profile))
    prior: list[Observation] = []
    if know is not None:
        have = {o.kernel_id for o in obs}
        obs += [Observation(k["id"], k["params"], k["score"]) for k in know.own if k["id"] not in have]
        obs.sort(key=lambda o: -(o.score or 0.0))
        seen |= know.measured | know.rejected
        prior = [Observation(k["id"], k["params"], k["score"]) for k in know.family[:PRIOR_KEPT]]
        # Opt-in priors (another kind of numbers, another GPU): labelled, weaker evidence, never observations
        # or seen. Another GPU's kernels go to their nearest legal point of this GPU's space, counted.
        kept = know.priors[:PRIOR_KEPT]
        here = [k for k in kept if not k.get("from_arch")]
        prior += [Observation(k["id"], k["params"], k["score"], source=prior_label(k)) for k in here]
        other = [k for k in kept if k.get("from_arch")]
        if other:
            moved = warm_priors(other, space)
            log.info("%s gen%d: %s", deck.name, generation, moved.summary())
            prior += moved.priors
    return Evidence(
        space=space,
        generation=generation,
        observations=obs,
        seeds=shipped_seeds(deck, int(config["benchmark"]["tuning_sizes"])),
        seen=frozenset(seen),
        prior=prior,
    )


def warm_priors(kernels: Sequence[Mapping[str, Any]], space: Space) -> PriorTransfer:
    """Other GPUs' kernels (``registry.warm_start``, best first) as priors of ``space``: each at its nearest
    legal point, a kernel of an ISA without this library's matrix instruction adopting the target's
    (:func:`oto.search.prior_map.map_priors`); what could not be mapped is counted in the result."""
    obs = [Observation(k["id"], k["params"], k["score"], source=prior_label(k)) for k in kernels]
    return map_priors(obs, space, [bool(k.get("valu_only")) for k in kernels])


def prior_label(kernel: Mapping[str, Any]) -> str:
    """What a prior is, as the proposals and the report say it: another kind of numbers from this registry,
    or another GPU's registry (``registry.warm_start``)."""
    if kernel.get("from_arch"):
        return f"{kernel['numbers']} prior from {kernel['from_arch']}'s registry (another GPU)"
    return f"{kernel['numbers']} prior from the registry"


def topups(know: Knowledge | None, generation: int, count: int = TOPUPS) -> list[dict[str, Any]]:
    """Deliberate re-measurements: a fresh run re-measures the registry's best kernels of this library
    once (gen0), so they compete under this run's conditions instead of being forgotten."""
    if know is None or generation != 0:
        return []
    return [
        {
            "params": k["params"],
            "proposer": TOPUP,
            "rationale": f"registry: best earlier kernel (score {k['score']:.3g}), re-measured in this run",
        }
        for k in know.own[:count]
    ]
