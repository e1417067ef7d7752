"""Random search: the baseline every strategy must beat (uniform over valid, unseen configurations)."""

from __future__ import annotations

from collections.abc import Sequence

from oto.strategies.base import Evidence, Observation, Proposal
from oto.strategies.common import Picker, SpaceCache, fill_random, history, rng_for


class RandomStrategy:
    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._spaces = SpaceCache()

    def tell(self, observations: Sequence[Observation]) -> None:
        return None

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space = self._spaces.get(evidence)
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        if evidence.generation == 0 and not hist.points:
            for s in hist.seeds[: max(1, n // 2)]:
                pick.offer(s, "shipped solution (seed)", proposer="seed")
        fill_random(pick, rng, "uniformly random valid configuration")
        return pick.out
