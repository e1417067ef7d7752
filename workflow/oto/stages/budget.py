"""budget: config ``budget``'s decision for one generation, made once for every library
(:func:`oto.measurement.budget.generation_budget`): who runs, who is starved and why, each share and the
figures the decision used. Each library's mutate job of the generation reads its own entry."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from oto.files import write_yaml
from oto.measurement.budget import BudgetInputs, generation_budget
from oto.stages import Stage

# One job per generation after gen0, where config budget is set: it reads every library's deck.yaml, and the
# previous generations' selection.yaml and samples.csv (select's and benchmark's: a generation back).
STAGE = Stage(name="budget", scope="round", home="budget", reads=("deck",), when="budget")
log = logging.getLogger(__name__)


def run(
    generation: int,
    hours: float,
    max_generations: int,
    decks: Sequence[Path],
    selections: Sequence[Path],
    samples: Sequence[Path],
    out_budget: Path,
    sweep: int = 0,
    previous: Path | None = None,
) -> dict:
    """``decks`` and ``selections`` (generation - 1): one per library, in the run's order; ``samples``: every
    library's samples.csv of generations 0 … generation - 1; ``sweep``: config budget.sweep; ``previous``:
    the decision of generation - 1 (from gen2 on), which says who has swept."""
    inputs = BudgetInputs(hours, decks, selections, samples, previous)
    doc = generation_budget(inputs, generation, max_generations, sweep)
    write_yaml(out_budget, doc)
    decided = doc["allocations"].items()
    log.info(
        "gen%d: %.6g s of %.6g s left; %d libraries run, %d starved, %d converged",
        generation, doc["left_s"], doc["budget_s"],
        *(sum(1 for _, a in decided if a["decision"] == d) for d in ("runs", "starved", "converged")),
    )  # fmt: skip
    for name, a in decided:
        if a["decision"] == "starved":
            log.info("%s: starved %s", name, a["reason"])
        elif a.get("sweep"):
            log.info("%s: sweeps %d fork-lattice kernels (%.6g s set aside)", name, a["sweep"], a["sweep_s"])
    return doc
