"""A generation's proposals (proposals.yaml, the agent contract) for the mutate stage: the agent's part
(decide whether it runs, ask it in the library's space, shape its provenance), then the registry's
deliberate top-ups and the configured search strategy in the slots it leaves; a converged library's frozen,
empty file."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.agent.digest import add_last_generation, hardware, tensile_digest
from oto.agent.engine import Outcome, propose
from oto.agent.settings import AgentSettings, agent_status, api_key
from oto.deck.model import LibraryDeck
from oto.files import read_yaml
from oto.gemm import Library
from oto.hardware.ceilings import theoretical_gflops
from oto.measurement.budget_file import read_budget, starved_reason, sweep_count
from oto.registry.transfer import Knowledge
from oto.search.evidence import evidence_for, topups
from oto.search.lattice import SWEEP_PROPOSER, fork_lattice
from oto.search.space import Space
from oto.search.strategies import Evidence, make_strategy
from oto.tensile.legality import Limits

log = logging.getLogger(__name__)


def ledger_path(results_arch_dir: Path) -> Path:
    """results/<arch>/agent/ledger.json: the run's token and cost ledger (see oto.agent.ledger)."""
    return Path(results_arch_dir) / "agent" / "ledger.json"


def agent_proposals(
    library: Library,
    space: Space,
    generation: int,
    selection: Mapping[str, Any] | None,
    seeds: Sequence[Mapping[str, Any]],
    seen: frozenset[str],
    read_profile: Callable[[], Mapping[str, Any]],
    config: Mapping[str, Any],
    slots: int,
    ledger: Path,
    audit: Path | None,
    previous_build: Path | None = None,
    previous_candidates: Path | None = None,
) -> Outcome:
    """Up to min(agent.proposals_per_generation, slots) validated proposals, or why there are none.
    ``read_profile`` gives the arch profile shown to the agent; it is called only when the agent runs."""
    settings = AgentSettings.from_config(config)
    on, why = agent_status(config)
    if not on:
        return Outcome("off", why, settings.model)
    profile = read_profile()
    hw = hardware(profile)
    hw["peak_gflops_by_rate_class"] = {r: round(theoretical_gflops(profile, r), 2) for r in profile["rates"]}
    digest = tensile_digest(library, generation, selection, seeds, profile)
    add_last_generation(
        digest,
        read_yaml(previous_build) if previous_build else None,
        read_yaml(previous_candidates) if previous_candidates else None,
    )
    return propose(
        space,
        digest,
        hw,
        min(settings.proposals, slots),
        seen,
        settings,
        api_key() or "",
        ledger,
        audit,
        job=f"{library.name}/gen{generation}",
    )


def proposal_entries(outcome: Outcome) -> list[dict[str, Any]]:
    """proposals.yaml entries with provenance per candidate: proposer, model, rationale, the call's tokens."""
    k = max(1, len(outcome.proposals))
    tokens = {**outcome.usage, "shared_by": k}
    return [
        {
            "params": p["params"],
            "proposer": "agent",
            "rationale": p["rationale"],
            "model": outcome.model,
            "tokens": tokens,
        }
        for p in outcome.proposals
    ]


def frozen_proposals(library: str, generation: int, selection: Mapping[str, Any] | None) -> dict | None:
    """The frozen, empty proposals of a library that converged before ``generation`` (downstream stages carry
    its results forward); None when it has not converged. A frozen selection that did not converge was starved
    by the budget, which decides again whether it goes on."""
    if selection is None or not selection["convergence"]["converged"]:
        return None
    return {
        "library": library,
        "generation": generation,
        "frozen": True,
        "proposer": "none",
        "proposals": [],
        "reason": f"converged at gen{selection['generation']}: {selection['convergence']['reason']}",
    }


def starved_proposals(library: str, generation: int, budget: Mapping[str, Any]) -> dict | None:
    """The frozen, empty proposals of a library config ``budget`` starves before ``generation`` (``budget``:
    the generation's budget file, :func:`oto.measurement.budget_file.read_budget`); None when it goes on."""
    reason = starved_reason(budget, library)
    if not reason:
        return None
    return {
        "library": library, "generation": generation, "frozen": True, "proposer": "none", "proposals": [],
        "reason": reason,
    }  # fmt: skip


def budget_decision(budget: Path | None, generation: int, libraries: Sequence[str]) -> dict | None:
    """Config ``budget``'s decision for ``generation`` (``budget``: its file, results/<arch>/budget/
    gen<N>.yaml, read once for the run's ``libraries``); None without a budget, and at gen0."""
    return read_budget(budget, generation, libraries) if budget is not None and generation else None


def frozen_or_starved(
    library: str,
    generation: int,
    selection: Mapping[str, Any] | None,
    decision: Mapping[str, Any] | None = None,
) -> dict | None:
    """The frozen proposals of a library starved by config ``budget`` (``decision``: the generation's,
    :func:`budget_decision`) or converged; None when it goes on. A starved library's selection is frozen
    too: the starved reason comes first, to say why."""
    starved = starved_proposals(library, generation, decision) if decision is not None else None
    doc = starved or frozen_proposals(library, generation, selection)
    if doc is not None:
        log.info("%s gen%d: frozen (%s)", library, generation, doc["reason"])
    return doc


def generation_proposals(
    deck: LibraryDeck,
    generation: int,
    selection: Mapping[str, Any] | None,
    profile: Mapping[str, Any],
    config: Mapping[str, Any],
    know: Knowledge | None,
    read_profile: Callable[[], Mapping[str, Any]],
    ledger: Path,
    audit: Path | None,
    previous_build: Path | None = None,
    previous_candidates: Path | None = None,
    decision: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """proposals.yaml of a generation that goes on: the agent takes its slots first (when it runs); the
    registry's top-ups (``know``) and then the configured strategy fill what it leaves empty or loses to
    validation; then, where config ``budget``'s ``decision`` for the generation (:func:`budget_decision`)
    has the library sweep, that many fork-lattice kernels not measured yet (:func:`lattice_proposals`).
    ``read_profile`` gives the whole profile shown to the agent (:func:`agent_proposals`)."""
    strategy = make_strategy(config["search"]["strategy"], int(config["seed"]), config["search"]["options"])
    evidence = evidence_for(deck, generation, selection, profile, config, know)
    slots = int(config["search"]["candidates_per_generation"])
    top = topups(know, generation)
    agent = agent_proposals(
        Library.parse(deck.name), evidence.space, generation, selection, evidence.seeds, evidence.seen,
        read_profile, config, slots, ledger, audit, previous_build, previous_candidates,
    )  # fmt: skip
    taken = {evidence.space.identify(p["params"]) for p in agent.proposals}
    top = [t for t in top if evidence.space.identify(t["params"]) not in taken]
    evidence = dataclasses.replace(evidence, seen=evidence.seen | taken)
    proposals = strategy.ask(evidence, max(slots - len(taken) - len(top), 0))
    sweep = sweep_count(decision, deck.name) if decision is not None else 0
    swept = lattice_proposals(deck.name, evidence, profile, sweep, [*top, *agent.proposals, *proposals])
    log.info(
        "%s gen%d: %d proposals from the agent (%s: %s), %d from %s", deck.name, generation, len(taken),
        agent.status, agent.reason, len(proposals), strategy.name,
    )  # fmt: skip
    return {
        "library": deck.name,
        "generation": generation,
        "frozen": False,
        "proposer": f"agent+{strategy.name}" if taken else strategy.name,
        "proposals": [
            *top,
            *proposal_entries(agent),
            *(
                {"params": dict(p.params), "proposer": p.proposer, "rationale": p.rationale}
                for p in proposals
            ),
            *swept,
        ],
        "agent": agent.provenance(),
    }


def lattice_proposals(
    library: str, evidence: Evidence, profile: Mapping[str, Any], count: int, taken: Sequence[Any]
) -> list[dict[str, Any]]:
    """Up to ``count`` points of the library's fork lattice (:func:`oto.search.lattice.fork_lattice`, in its
    order) that are neither measured (``evidence.seen``) nor among the generation's other proposals
    (``taken``: entries or strategy proposals, each with its ``params``)."""
    if count <= 0:
        return []
    space = evidence.space
    have = set(evidence.seen) | {
        space.id_of(p["params"] if isinstance(p, Mapping) else p.params) for p in taken
    }
    out = []
    for params in fork_lattice(Library.parse(library), Limits.from_profile(profile)):
        key = space.id_of(params)
        if key in have:
            continue
        have.add(key)
        out.append(
            {"params": params, "proposer": SWEEP_PROPOSER, "rationale": "fork lattice point (budget.sweep)"}
        )
        if len(out) == count:
            break
    return out
