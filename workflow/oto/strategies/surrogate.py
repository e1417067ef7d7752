"""Surrogate-guided local search: a Gaussian process over the evidence ranks a pool of candidates.

Why this design: GPU tuning spaces are rough but locally smooth in tile geometry, evaluations are costly
and a few hundred at most, so a GP (cheap at that size, honest about uncertainty) picking by expected
improvement beats population methods that need thousands of evaluations (Willemsen et al., SC'21 PMBS).
The pool mixes the neighbourhoods of the best configurations (exploitation: most gains are one knob away)
with random valid configurations (exploration), so it works on any :class:`oto.space.Space`, enumerated
(replay caches) or constraint-only (Tensile).

Generation 0 proposes the shipped solutions and their legal neighbourhood. Knowledge transfers through
``Evidence.prior`` (the family's other patterns, earlier runs): those points enter the GP with extra
noise, so they shape the model early and are overruled by this library's own measurements.
Deterministic for a given (seed, evidence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from oto.space import Index
from oto.strategies.base import Evidence, Observation, Proposal
from oto.strategies.common import History, Picker, SpaceCache, fill_random, history, rng_for

LENGTHSCALES = (0.12, 0.2, 0.3, 0.45, 0.7, 1.1)
NOISES = (1e-4, 1e-2, 0.1)
PRIOR_NOISE = 0.3  # variance added to transferred points (standardised units)
POOL_RANDOM = 2500  # random valid configurations scored per ask (enumerated spaces)
TOP_NEIGHBOURHOODS = 8  # best configurations whose one-step neighbourhood is always scored


def _matern52(a: np.ndarray, b: np.ndarray, ls: float) -> np.ndarray:
    d2 = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0)
    r = np.sqrt(5.0 * d2) / ls
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


class GP:
    """Zero-mean GP on standardised costs; lengthscale and noise picked by marginal likelihood."""

    def __init__(self, x: np.ndarray, y: np.ndarray, extra_noise: np.ndarray):
        self.mu, self.sd = float(y.mean()), float(y.std()) or 1.0
        ys = (y - self.mu) / self.sd
        best = None
        for ls in LENGTHSCALES:
            k = _matern52(x, x, ls)
            for noise in NOISES:
                try:
                    chol = np.linalg.cholesky(k + np.diag(noise + extra_noise + 1e-8))
                except np.linalg.LinAlgError:
                    continue
                alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, ys))
                lml = -0.5 * float(ys @ alpha) - float(np.log(np.diag(chol)).sum())
                if best is None or lml > best[0]:
                    best = (lml, ls, chol, alpha)
        if best is None:
            raise np.linalg.LinAlgError("no kernel setting gave a positive-definite matrix")
        _, self.ls, self.chol, self.alpha = best
        self.x = x

    def predict(self, xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ks = _matern52(xq, self.x, self.ls)
        mean = ks @ self.alpha
        v = np.linalg.solve(self.chol, ks.T)
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return mean * self.sd + self.mu, np.sqrt(var) * self.sd


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    z = (best - mean - xi) / sd
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mean - xi) * cdf + sd * pdf


class SurrogateStrategy:
    name = "surrogate"
    n_init = 8  # random configurations before the model is trusted (when there are no seeds)

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._spaces = SpaceCache()

    def tell(self, observations: Sequence[Observation]) -> None:
        return None  # stateless: ask() gets the whole evidence each time (resumable, reproducible)

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space = self._spaces.get(evidence)
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        ok = hist.ok()
        if not ok and hist.seeds:
            self._seed_generation(pick, hist)
        elif len(ok) + len(hist.prior_points) < self.n_init:
            fill_random(pick, rng, "initial design: random valid configuration")
        else:
            self._model_step(pick, hist, rng)
        fill_random(pick, rng, "random valid configuration (pool exhausted)")
        return pick.out

    @staticmethod
    def _seed_generation(pick: Picker, hist: History) -> None:
        for s in hist.seeds[: max(1, pick.n // 2)]:
            pick.offer(s, "shipped solution used at a tuning size", proposer="seed")
        for s in hist.seeds:
            for nb in hist.space.neighbours(s):
                pick.offer(nb, "one-knob neighbour of a shipped solution")

    def _pool(self, hist: History, rng: np.random.Generator) -> list[Index]:
        space = hist.space
        ranked = hist.ranked() or hist.seeds
        cands: dict[Index, None] = {}
        for p in ranked[:TOP_NEIGHBOURHOODS]:
            for nb in space.neighbours(p):
                cands[nb] = None
        for p in ranked[:4]:
            for _ in range(24):
                cands[space.walk(p, int(rng.integers(2, 4)), rng)] = None
        if space.enumerable:
            members = space.all_members()
            take = min(POOL_RANDOM, len(members))
            for i in rng.choice(len(members), size=take, replace=False):
                cands[members[int(i)]] = None
        return [c for c in cands if space.key(c) not in hist.taken]

    def _model_step(self, pick: Picker, hist: History, rng: np.random.Generator) -> None:
        pool = self._pool(hist, rng)
        if not pool:
            return
        space = hist.space
        ok = hist.ok()
        pts = [p for p, _ in ok] + hist.prior_points
        ys = [c for _, c in ok] + hist.prior_costs
        # Failed configurations are as bad as the worst success: the model learns to avoid their region.
        worst = max(ys)
        failed = [p for p, c in zip(hist.points, hist.costs, strict=True) if c is None]
        pts += failed
        ys += [worst] * len(failed)
        extra = np.r_[np.zeros(len(ok)), np.full(len(hist.prior_points), PRIOR_NOISE), np.zeros(len(failed))]
        gp = GP(space.encode(pts), np.asarray(ys), extra / max(np.var(ys), 1e-12))
        xq = space.encode(pool)
        mean, sd = gp.predict(xq)
        best = min(c for _, c in ok) if ok else min(ys)
        score = expected_improvement(mean, sd, best)
        # Batch proposals: after each pick, damp the acquisition near it so one batch spreads out.
        for _ in range(pick.n):
            i = int(np.argmax(score))
            if not np.isfinite(score[i]) or score[i] < 0:
                break
            pick.offer(pool[i], f"max expected improvement (pred {math.exp(-mean[i]):.3g}x)")
            d2 = ((xq - xq[i]) ** 2).sum(1)
            score = score * (1.0 - np.exp(-d2 / (gp.ls * gp.ls)))
            score[i] = -np.inf
            if pick.full:
                break
