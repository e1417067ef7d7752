"""Random search: the baseline every strategy must beat (uniform over valid, unseen configurations)."""

from __future__ import annotations

from oto.search.strategies.base import BaseStrategy, Evidence, Option, Proposal
from oto.search.strategies.common import Picker, fill_random, history, rng_for


class RandomStrategy(BaseStrategy):
    name = "random"
    options = (
        Option(
            "seed_share",
            0.5,
            "share of the first generation's slots given to the shipped solutions (when there are any)",
            0.0,
            1.0,
        ),
    )

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space = evidence.space
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        if evidence.generation == 0 and not hist.points:
            for s in hist.seeds[: max(1, int(n * self.settings["seed_share"]))]:
                pick.offer(s, "shipped solution (seed)", proposer="seed")
        fill_random(pick, rng, "uniformly random valid configuration")
        return pick.out
