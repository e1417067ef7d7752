"""The agent's part of the mutate stage: decide whether it runs, ask it in the library's space, and shape its
provenance."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.agent.digest import add_last_generation, hardware, tensile_digest
from oto.agent.engine import Outcome, propose
from oto.agent.settings import AgentSettings, agent_status, api_key
from oto.files import read_yaml
from oto.gemm import Library
from oto.hardware.ceilings import theoretical_gflops
from oto.search.space import Space


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
