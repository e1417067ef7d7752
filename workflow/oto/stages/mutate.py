"""mutate: evidence → the next proposals: the agent's, top-ups, then search.strategy's (oto.agent.proposals).
A converged or budget-starved library gets a frozen, empty proposal file and costs nothing downstream."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from oto.agent.proposals import budget_decision, frozen_or_starved, generation_proposals, ledger_path
from oto.deck.model import read_library_yaml
from oto.deck.tuning_sizes import deck_tuning_indices
from oto.files import write_yaml
from oto.measurement.knowledge import job_knowledge
from oto.measurement.selection_file import read_selection
from oto.stages import PROVENANCE_FIELDS, Stage
from oto.tensile.install import REGISTRATION_FIELDS
from oto.tensile.legality import Limits

# Its view holds the legality limits proposals depend on and what resolving the backend for its provenance
# reads (registry knowledge of the same numbers); the agent's prompt shows the whole profile (read_profile).
PROFILE = (*REGISTRATION_FIELDS, *Limits.PROFILE_FIELDS, PROVENANCE_FIELDS)
STAGE = Stage(
    name="mutate", scope="generation", home="{library}/gen{gen}", reads=("deck", "budget"), profile=PROFILE
)
log = logging.getLogger(__name__)


def run(
    generation: int,
    deck_path: Path,
    previous_selection: Path | None,
    profile: Mapping,
    config: Mapping,
    results: Path,
    out_proposals: Path,
    agent_audit: Path | None = None,
    previous_build: Path | None = None,
    previous_candidates: Path | None = None,
    read_profile: Callable[[], Mapping] | None = None,
    budget: Path | None = None,
    libraries: Sequence[str] = (),
) -> dict:
    """``results``: results/<arch>; ``read_profile``: the whole profile shown to the agent (default:
    ``profile``), read only when the agent runs; ``budget``: config budget's file of this generation."""
    deck = read_library_yaml(deck_path)
    selection = read_selection(previous_selection) if previous_selection else None
    decision = budget_decision(budget, generation, libraries)  # read once: starved, or its sweep
    doc = frozen_or_starved(deck.name, generation, selection, decision)
    if doc is None:
        sizes = [deck.sizes[i] for i in deck_tuning_indices(deck, int(config["benchmark"]["tuning_sizes"]))]
        know = job_knowledge(Path(results), deck.name, generation, sizes, profile, config)
        if know is not None:
            log.info("%s gen%d: %s", deck.name, generation, know.summary())
        doc = generation_proposals(
            deck, generation, selection, profile, config, know, read_profile or (lambda: profile),
            ledger_path(Path(results)), agent_audit, previous_build, previous_candidates, decision,
        )  # fmt: skip
    write_yaml(out_proposals, doc)
    return doc
