"""The symbolic strategy: seeded evolutionary local search around the best kernels, with a share of
exploration. No model, no API key: the baseline the agent falls back to when asked to.

Generation 0 starts from the shipped solutions (the spoof floor is where the search begins, not what it must
beat blindly) and their small mutations. Later generations mutate the best observed configurations one or
two steps at a time (a step moves one parameter to an adjacent value, or one component of a tuple value such
as one axis of Tensile's ThreadTile), recombine the best with another good one (parameters the space links,
such as a tile shape and its workgroup, move together), and keep a slice of the budget for random valid
configurations so the search can leave a basin. It works in any :class:`oto.search.space.Space`.
"""

from __future__ import annotations

import numpy as np

from oto.search.space import Index, Space
from oto.search.strategies.base import BaseStrategy, Evidence, Option, Proposal
from oto.search.strategies.common import Picker, fill_random, history, rng_for


def recombine(space: Space, a: Index, b: Index, rng: np.random.Generator) -> Index:
    """Each parameter (or linked group of parameters) taken from ``a`` or ``b`` with equal odds."""
    names = space.names
    group_of = {name: group for group in space.linked for name in group}
    take: dict[str, bool] = {}
    for name in names:
        group = group_of.get(name, (name,))
        if group[0] not in take:
            take[group[0]] = bool(rng.random() < 0.5)
        take[name] = take[group[0]]
    return tuple(a[k] if take[name] else b[k] for k, name in enumerate(names))


class SymbolicStrategy(BaseStrategy):
    name = "symbolic"
    options = (
        Option("parents", 4, "best configurations that parent the next generation", 1, 64),
        Option(
            "explore_share",
            0.2,
            "share of a later generation's slots spent on random valid configurations",
            0.0,
            1.0,
        ),
        Option("crossover_share", 0.2, "share of the local picks that recombine two parents", 0.0, 1.0),
        Option("two_step_share", 0.3, "share of mutations that take two steps instead of one", 0.0, 1.0),
    )

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space, opt = evidence.space, self.settings
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        ranked = hist.ranked()
        if not ranked:
            for s in hist.seeds[: max(1, n // 2)]:
                pick.offer(s, "shipped solution used at a tuning size", proposer="seed")
            parents = list(hist.seeds) or [i for i in (space.random(rng),) if i is not None]
            n_explore = 0
        else:
            parents = ranked[: opt["parents"]]
            n_explore = int(round(n * opt["explore_share"]))
        attempts = 0
        while len(pick.out) < n - n_explore and attempts < 200 * n and parents:
            attempts += 1
            # Rank-biased parent choice: the best configuration gets most of the local search.
            i = min(int(rng.geometric(0.5)) - 1, len(parents) - 1)
            if len(parents) > 1 and rng.random() < opt["crossover_share"]:
                j = int(rng.integers(1, len(parents)))
                pick.offer(
                    recombine(space, parents[0], parents[j], rng), f"recombination of parents #1 and #{j + 1}"
                )
            else:
                steps = 2 if rng.random() < opt["two_step_share"] else 1
                pick.offer(space.walk(parents[i], steps, rng), f"{steps}-step mutation of parent #{i + 1}")
        fill_random(pick, rng, "random valid configuration (exploration)")
        return pick.out
