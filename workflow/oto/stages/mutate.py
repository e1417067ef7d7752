"""mutate: the evidence so far → next generation's proposals (symbolic strategy; the agent rule reuses this
contract). A converged library gets a frozen, empty proposal file and costs nothing downstream."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto import legality
from oto.datatypes import Library
from oto.deck import LibraryDeck, read_library_yaml
from oto.files import read_yaml, write_yaml
from oto.sizes import tuning_indices
from oto.strategies import Evidence, Observation, make_strategy
from oto.tensile_params import canonical

log = logging.getLogger(__name__)


def shipped_seeds(deck: LibraryDeck, count: int) -> list[dict[str, Any]]:
    """Shipped solutions used at the tuning sizes, most used first (ties: lower solution index)."""
    use = Counter(int(deck.shipped[i][0]) for i in tuning_indices(deck.sizes, count))
    order = sorted(use, key=lambda pos: (-use[pos], pos))
    return [canonical(deck.solutions[pos]["params"]) for pos in order]


def evidence_for(
    deck: LibraryDeck, generation: int, selection: Mapping | None, profile: Mapping, config: Mapping
) -> Evidence:
    library = Library.parse(deck.name)
    limits = legality.Limits.from_profile(profile)
    obs = [
        Observation(o["id"], o["params"], o.get("score"), int(o.get("sizes_won", 0)), o.get("failure", ""))
        for o in (selection or {}).get("observations", [])
    ]
    return Evidence(
        library=library,
        generation=generation,
        observations=obs,
        seeds=shipped_seeds(deck, int(config["benchmark"]["tuning_sizes"])),
        seen=frozenset((selection or {}).get("measured", [])),
        is_legal=lambda p: legality.check(library, p, limits).valid,
    )


def run(
    generation: int,
    deck_path: Path,
    previous_selection: Path | None,
    profile: Mapping,
    config: Mapping,
    out_proposals: Path,
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
    evidence = evidence_for(deck, generation, selection, profile, config)
    proposals = strategy.ask(evidence, int(config["search"]["candidates_per_generation"]))
    doc.update(
        proposer=strategy.name,
        proposals=[
            {"params": dict(p.params), "proposer": p.proposer, "rationale": p.rationale} for p in proposals
        ],
    )
    write_yaml(out_proposals, doc)
    log.info("%s gen%d: %d proposals from %s", deck.name, generation, len(proposals), strategy.name)
    return doc
