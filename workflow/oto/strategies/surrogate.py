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

LENGTHSCALES = (0.15, 0.25, 0.4, 0.65, 1.0)
NOISES = (1e-3, 0.05)
MAX_TRAIN = 200  # GP points: the best half plus a spread of the rest (keeps an ask in milliseconds)
HYPER_TRAIN = 100  # points used to pick lengthscale and noise
ARD_FACTORS = (0.5, 2.0, 8.0)
REFIT_GROWTH = 1.1
EXPLORE_EVERY = 3  # every 3rd pick looks away from the best configurations
PRIOR_NOISE = 0.3  # variance added to transferred points (standardised units)
POOL_RANDOM = 600  # random valid configurations scored per ask (enumerated spaces)
TOP_NEIGHBOURHOODS = 8  # best configurations whose one-step neighbourhood is always scored


def _matern52_d2(d2: np.ndarray) -> np.ndarray:
    r = np.sqrt(5.0 * np.maximum(d2, 0.0))
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


def _sqdist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0)


class GP:
    """Zero-mean GP on standardised costs with a Matern-5/2 kernel and per-feature lengthscales.

    Hyper-parameters are picked by marginal likelihood on a spread subsample: a shared lengthscale and
    noise from a grid, then one coordinate sweep that stretches or shrinks each feature's lengthscale
    (a parameter that does not matter gets a huge one: automatic relevance determination)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, extra_noise: np.ndarray, hyper=None):
        self.mu, self.sd = float(y.mean()), float(y.std()) or 1.0
        ys = (y - self.mu) / self.sd
        self.hyper = hyper or self._pick_hyper(x, ys, extra_noise)
        self.ls, noise = self.hyper
        self.x = x / self.ls
        fit = self._fit(_sqdist(self.x, self.x), ys, extra_noise, noise)
        if fit is None:
            raise np.linalg.LinAlgError("kernel matrix not positive definite")
        _, chol, self.alpha = fit
        self.chol_inv = np.linalg.inv(chol)

    def _pick_hyper(self, x: np.ndarray, ys: np.ndarray, extra_noise: np.ndarray):
        sub = np.argsort(ys, kind="stable")[:: max(1, len(ys) // HYPER_TRAIN)]
        xs, es = x[sub], extra_noise[sub]
        diff2 = (xs[:, None, :] - xs[None, :, :]) ** 2  # per-feature squared distances, reused per trial

        def lml(ls: np.ndarray, noise: float) -> float:
            fit = self._fit(diff2 @ (1.0 / ls**2), ys[sub], es, noise)
            return -np.inf if fit is None else fit[0]

        d = x.shape[1]
        best = max(
            ((lml(np.full(d, ls), noise), ls, noise) for ls in LENGTHSCALES for noise in NOISES),
            key=lambda t: t[0],
        )
        score, noise = best[0], best[2]
        ls = np.full(d, best[1])
        for k in range(d):
            for factor in ARD_FACTORS:
                trial = ls.copy()
                trial[k] *= factor
                s = lml(trial, noise)
                if s > score + 1e-6:
                    score, ls = s, trial
        if not np.isfinite(score):
            raise np.linalg.LinAlgError("no kernel setting gave a positive-definite matrix")
        return ls, noise

    @staticmethod
    def _fit(d2, ys, extra, noise):
        try:
            chol = np.linalg.cholesky(_matern52_d2(d2) + np.diag(noise + extra + 1e-8))
        except np.linalg.LinAlgError:
            return None
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, ys))
        return -0.5 * float(ys @ alpha) - float(np.log(np.diag(chol)).sum()), chol, alpha

    def predict(self, xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xq = xq / self.ls
        ks = _matern52_d2(_sqdist(xq, self.x))
        mean = ks @ self.alpha
        v = self.chol_inv @ ks.T
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
        # Hyper-parameters are re-picked once the data grew by REFIT_GROWTH (speed only: a fresh
        # instance given the same evidence re-picks them, so workflow jobs stay reproducible).
        self._hyper: dict[str, tuple[int, tuple]] = {}

    def tell(self, observations: Sequence[Observation]) -> None:
        return None  # stateless: ask() gets the whole evidence each time (resumable, reproducible)

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space = self._spaces.get(evidence)
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        ok = hist.ok()
        if not ok and hist.prior_points:  # transfer: a related problem's best kernels are the first bets
            order = np.argsort(hist.prior_costs, kind="stable")[: max(1, n // 3)]
            for i in order:
                pick.offer(hist.prior_points[int(i)], "best kernel of a related problem (transfer)")
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
        prior = [
            p for p, _ in sorted(zip(hist.prior_points, hist.prior_costs, strict=True), key=lambda pc: pc[1])
        ]
        ranked = hist.ranked() or prior[:TOP_NEIGHBOURHOODS] or hist.seeds
        cands: dict[Index, None] = dict.fromkeys(prior[:TOP_NEIGHBOURHOODS])  # the family's best, as is
        for p in ranked[: TOP_NEIGHBOURHOODS if space.enumerable else TOP_NEIGHBOURHOODS // 2]:
            for nb in space.neighbours(p):
                cands[nb] = None
        # The whole two-move neighbourhood (escapes that need two knobs at once) where validity is a set
        # lookup; constraint-checked spaces (Tensile's legality) get sampled two-move walks instead.
        for p in ranked[: 1 if space.enumerable else 0]:
            for nb in space.neighbours(p):
                for nb2 in space.neighbours(nb):
                    cands[nb2] = None
        for p in ranked[:4]:
            for _ in range(12):
                cands[space.walk(p, int(rng.integers(2, 4)), rng)] = None
        if space.enumerable:
            members = space.all_members()
            take = min(POOL_RANDOM, len(members))
            for i in rng.choice(len(members), size=take, replace=False):
                cands[members[int(i)]] = None
        done = set(hist.points)
        return [c for c in cands if c not in done and space.key(c) not in hist.taken]

    def _model_step(self, pick: Picker, hist: History, rng: np.random.Generator) -> None:
        pool = self._pool(hist, rng)
        if not pool:
            return
        space = hist.space
        ok = sorted(hist.ok(), key=lambda pc: pc[1])
        if len(ok) > MAX_TRAIN:  # the best half, then an even spread over the rest
            rest = ok[MAX_TRAIN // 2 :]
            ok = ok[: MAX_TRAIN // 2] + rest[:: max(1, len(rest) // (MAX_TRAIN // 2))][: MAX_TRAIN // 2]
        pts = [p for p, _ in ok] + hist.prior_points
        ys = [c for _, c in ok] + hist.prior_costs
        # Failed configurations are as bad as the worst success: the model learns to avoid their region.
        worst = max(ys)
        failed = [p for p, c in zip(hist.points, hist.costs, strict=True) if c is None][-MAX_TRAIN // 4 :]
        pts += failed
        ys += [worst] * len(failed)
        extra = np.r_[np.zeros(len(ok)), np.full(len(hist.prior_points), PRIOR_NOISE), np.zeros(len(failed))]
        memo = self._hyper.get(space.name)
        hyper = memo[1] if memo and len(pts) <= memo[0] * REFIT_GROWTH else None
        gp = GP(space.encode(pts), np.asarray(ys), extra / max(np.var(ys), 1e-12), hyper)
        if hyper is None:
            self._hyper[space.name] = (len(pts), gp.hyper)
        xq = space.encode(pool)
        mean, sd = gp.predict(xq)
        best = min(c for _, c in ok) if ok else min(ys)
        score = expected_improvement(mean, sd, best)
        # Exploration picks: the best expected improvement among configurations that differ from every
        # one of the best five in at least two parameters: another basin, not a neighbour.
        elite = np.asarray(hist.ranked()[:5] or pts[:1])
        far = (np.asarray(pool)[:, None, :] != elite[None, :, :]).sum(2).min(1) >= 2
        lcb = np.where(far, -score, np.inf)
        # Batch proposals: after each pick, damp the acquisition near it so one batch spreads out.
        for j in range(pick.n):
            explore = (len(hist.points) + j) % EXPLORE_EVERY == EXPLORE_EVERY - 1 and np.isfinite(lcb).any()
            i = int(np.argmin(lcb)) if explore else int(np.argmax(score))
            if not explore and (not np.isfinite(score[i]) or score[i] < 0):
                break
            why = (
                "exploration: best expected improvement in another basin"
                if explore
                else "max expected improvement"
            )
            pick.offer(pool[i], f"{why} (pred {math.exp(-mean[i]):.3g}x)")
            lcb[i] = np.inf
            d2 = (((xq - xq[i]) / gp.ls) ** 2).sum(1)
            score = score * (1.0 - np.exp(-d2))
            score[i] = -np.inf
            if pick.full:
                break
