"""mutate: the evidence so far → next generation's proposals: the agent's (when it runs), deliberate
top-ups, and the configured search strategy's for the remaining slots. A converged library gets a frozen,
empty proposal file and costs nothing downstream."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oto.agent.proposals import agent_proposals, ledger_path, proposal_entries
from oto.backends import job_stream, resolve
from oto.deck.model import read_library_yaml
from oto.deck.tuning_sizes import tuning_indices
from oto.files import write_yaml
from oto.gemm import Library
from oto.measurement.selection_file import read_selection
from oto.registry.transfer import knowledge
from oto.search.evidence import evidence_for, topups
from oto.search.strategies import make_strategy

log = logging.getLogger(__name__)


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
    read_profile: Callable[[], Mapping] | None = None,
) -> dict:
    """``profile``: the fields proposals depend on (legality); ``read_profile``: reads the whole profile,
    shown to the agent (default: ``profile``); called only when the agent runs, as reading it validates the
    file."""
    deck = read_library_yaml(deck_path)
    selection = read_selection(previous_selection) if previous_selection else None
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
    strategy = make_strategy(config["search"]["strategy"], int(config["seed"]), config["search"]["options"])
    sizes = [deck.sizes[i] for i in tuning_indices(deck.sizes, int(config["benchmark"]["tuning_sizes"]))]
    arch_dir = Path(out_proposals).parents[2]
    provenance = resolve(config, profile, job_stream(deck.name, f"gen{generation}")).provenance()
    know = knowledge(arch_dir, profile["arch"], deck.name, config, sizes, provenance, as_job=True)
    if know is not None:
        log.info(
            "%s gen%d: registry knowledge (%s numbers only): %d kernel(s) of this library, %d of its family, "
            "%d measured here before under this protocol; %d labelled prior(s) of other numbers (%s)",
            deck.name, generation, know.numbers, len(know.own), len(know.family), len(know.measured),
            len(know.priors), ", ".join(sorted({p["numbers"] for p in know.priors})) or "none",
        )  # fmt: skip
    evidence = evidence_for(deck, generation, selection, profile, config, know)
    slots = int(config["search"]["candidates_per_generation"])
    top = topups(know, generation)
    # The agent takes its slots first; whatever it leaves empty or loses to validation goes to the strategy.
    agent = agent_proposals(
        Library.parse(deck.name), evidence.space, generation, selection, evidence.seeds, evidence.seen,
        read_profile or (lambda: profile), config, slots,
        ledger_path(Path(out_proposals).parents[2]), agent_audit, previous_build, previous_candidates,
    )  # fmt: skip
    taken = {evidence.space.identify(p["params"]) for p in agent.proposals}
    top = [t for t in top if evidence.space.identify(t["params"]) not in taken]
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
