"""mutate: the evidence so far → next generation's proposals (symbolic strategy; the agent rule reuses this
contract). A converged library gets a frozen, empty proposal file and costs nothing downstream."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto import legality, registry
from oto.agent.stage import agent_proposals, ledger_path, proposal_entries
from oto.datatypes import Library
from oto.deck import LibraryDeck, read_library_yaml
from oto.files import read_yaml, write_yaml
from oto.sizes import tuning_indices
from oto.strategies import Evidence, Observation, make_strategy
from oto.tensile_params import candidate_id, canonical

log = logging.getLogger(__name__)
PRIOR_KEPT = 48  # family kernels transferred as prior evidence
TOPUPS = 2


def shipped_seeds(deck: LibraryDeck, count: int) -> list[dict[str, Any]]:
    """Shipped solutions used at the tuning sizes, most used first (ties: lower solution index)."""
    use = Counter(int(deck.shipped[i][0]) for i in tuning_indices(deck.sizes, count))
    order = sorted(use, key=lambda pos: (-use[pos], pos))
    return [canonical(deck.solutions[pos]["params"]) for pos in order]


def evidence_for(
    deck: LibraryDeck,
    generation: int,
    selection: Mapping | None,
    profile: Mapping,
    config: Mapping,
    know: registry.Knowledge | None = None,
) -> Evidence:
    """This run's evidence plus, when a registry store exists, what earlier runs learned: their
    measurements of this library, the kernels never to measure again, and the family's other patterns."""
    library = Library.parse(deck.name)
    limits = legality.Limits.from_profile(profile)
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
    prior: list[Observation] = []
    if know is not None:
        have = {o.kernel_id for o in obs}
        obs += [Observation(k["id"], k["params"], k["score"]) for k in know.own if k["id"] not in have]
        obs.sort(key=lambda o: -(o.score or 0.0))
        seen |= know.measured | know.rejected
        prior = [Observation(k["id"], k["params"], k["score"]) for k in know.family[:PRIOR_KEPT]]
    return Evidence(
        library=library,
        generation=generation,
        observations=obs,
        seeds=shipped_seeds(deck, int(config["benchmark"]["tuning_sizes"])),
        seen=frozenset(seen),
        is_legal=lambda p: legality.check(library, p, limits).valid,
        prior=prior,
    )


def topups(know: registry.Knowledge | None, generation: int, count: int = TOPUPS) -> list[dict[str, Any]]:
    """Deliberate re-measurements: a fresh run re-measures the registry's best kernels of this library
    once (gen0), so they compete under this run's conditions instead of being forgotten."""
    if know is None or generation != 0:
        return []
    return [
        {
            "params": k["params"],
            "proposer": registry.TOPUP,
            "rationale": f"registry: best earlier kernel (score {k['score']:.3g}), re-measured in this run",
        }
        for k in know.own[:count]
    ]


def run(
    generation: int,
    deck_path: Path,
    previous_selection: Path | None,
    profile: Mapping,
    config: Mapping,
    out_proposals: Path,
    agent_audit: Path | None = None,
    previous_build: Path | None = None,
    previous_candidates: Path | None = None,
) -> dict:
    deck = read_library_yaml(deck_path)
    selection = read_yaml(previous_selection) if previous_selection else None
    doc: dict[str, Any] = {"library": deck.name, "generation": generation, "frozen": False}
    if selection is not None and (selection.get("frozen") or selection["convergence"]["converged"]):
        doc.update(
            frozen=True,
            proposer="none",
            proposals=[],
            reason=f"converged at gen{selection['generation']}: {selection['convergence']['reason']}",
        )
        write_yaml(out_proposals, doc)
        log.info("%s gen%d: frozen (%s)", deck.name, generation, doc["reason"])
        return doc
    strategy = make_strategy(config["search"]["strategy"], int(config["seed"]))
    sizes = [deck.sizes[i] for i in tuning_indices(deck.sizes, int(config["benchmark"]["tuning_sizes"]))]
    know = registry.knowledge(Path(out_proposals).parents[2], profile["arch"], deck.name, config, sizes)
    evidence = evidence_for(deck, generation, selection, profile, config, know)
    slots = int(config["search"]["candidates_per_generation"])
    top = topups(know, generation)
    # The agent takes its slots first; whatever it leaves empty or loses to validation goes symbolic.
    agent = agent_proposals(
        evidence.library, generation, selection, evidence.seeds, evidence.seen, profile, config, slots,
        ledger_path(Path(out_proposals).parents[2]), agent_audit, previous_build, previous_candidates,
    )  # fmt: skip
    taken = {candidate_id(p["params"]) for p in agent.proposals}
    top = [t for t in top if candidate_id(t["params"]) not in taken]
    evidence = dataclasses.replace(evidence, seen=evidence.seen | taken)
    proposals = strategy.ask(evidence, max(slots - len(taken) - len(top), 0))
    doc.update(
        proposer=f"agent+{strategy.name}" if taken else strategy.name,
        proposals=[
            *top,
            *proposal_entries(agent),
            *(
                {"params": dict(p.params), "proposer": p.proposer, "rationale": p.rationale}
                for p in proposals
            ),
        ],
        agent=agent.provenance(),
    )
    write_yaml(out_proposals, doc)
    log.info(
        "%s gen%d: %d proposals from the agent (%s: %s), %d from %s", deck.name, generation, len(taken),
        agent.status, agent.reason, len(proposals), strategy.name,
    )  # fmt: skip
    return doc
