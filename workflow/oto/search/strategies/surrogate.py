"""Surrogate-guided local search: a Gaussian process ranks the candidates of a variable-neighbourhood
descent that runs from several starts at once.

Why this design: GPU tuning spaces are rough but locally smooth in tile geometry, evaluations are costly
and a few hundred at most, so a GP (cheap at that size, honest about uncertainty) picking by expected
improvement beats population methods that need thousands of evaluations (Willemsen et al., SC'21 PMBS).
But such spaces are also multi-modal along single knobs (block width 256 beats 128 and 32 while 64 is
worse) and hold needles a smooth model cannot see (the convolution optimum sits in a region that is worse
on average). So the model does not search alone; picks rotate through three kinds (``ROTATION``):

- ``l`` (half): best expected improvement among the *one-parameter changes* (any value of one knob, not
  just the adjacent one) of the best few *starts*, i.e. measured configurations no measured one-knob
  change beats, plus the incumbent's *two-parameter changes* (escapes that need two knobs at once).
- ``c`` (a quarter): first the *switch flips* (:func:`switch_flips`: every on/off parameter tried on the
  best configuration of each switch setting), then certify the best open start, measuring its one-knob
  changes best-first until all are measured. A certified start (a proven local optimum under one-knob
  moves) drops out, so the certify picks move on to the next basin's best: the restart rule, with no
  notion of "stalled for k steps" (the evidence carries no order).
- ``e`` (a quarter): exploration, the best expected improvement among configurations that differ from
  each of the best five in at least two parameters.

The GP sees costs (minus log score) clipped at their 70% quantile, so it models the good region rather
than how bad the worst kernels are. Candidates come from one-step neighbourhoods, one- and two-parameter
changes, random walks and (enumerated spaces) random members; where validity is a legality check
(Tensile's space, not enumerable) two-parameter changes are sampled, so it works on any
:class:`oto.search.space.Space`.

Generation 0 proposes the shipped solutions and their legal neighbourhood. Knowledge transfers through
``Evidence.prior`` (the family's other patterns, earlier runs): those points enter the GP with extra
noise, so they shape the model early and are overruled by this library's own measurements. Priors moved
from another GPU's space (:mod:`oto.search.prior_map`) are weaker still: their labels are on the other GPU's
scale, so once some of them are measured here all of them are shifted by the mean gap
(:func:`relevel_mapped_priors`), and they **earn their weight** (``mapped_prior_trust``): the first
generation is the cold run's (no mapped first bets, the shipped seeds and their neighbours in their own order,
the random design untouched), and from then on the mapped priors' noise in the model is ``prior_noise``
divided by how well a model of them alone ranks this GPU's own measurements (:func:`mapped_prior_trust`: a
rank correlation that must beat chance); at no agreement they leave the model and the candidate pool, and the
run proposes exactly what the cold run would from the same evidence. Options keep the earlier rules:
``mapped_first_bets`` of them among the first bets, the seeds' neighbours in their model's order
(``mapped_rank_neighbours``).
Deterministic for a given (seed, evidence): every ask rebuilds its state from the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from oto.numbers import spearman as rank_correlation
from oto.search.space import Index
from oto.search.strategies.base import BaseStrategy, Evidence, Option, Proposal, StrategyError
from oto.search.strategies.common import (
    History,
    Picker,
    fill_random,
    history,
    lines,
    pair_lines,
    rng_for,
)

LENGTHSCALES = (0.15, 0.25, 0.4, 0.65, 1.0)
NOISES = (1e-3, 0.05)
MAX_TRAIN = 200  # GP points: the best half plus a spread of the rest (keeps an ask in milliseconds)
HYPER_TRAIN = 100  # points used to pick lengthscale and noise
ARD_FACTORS = (0.5, 2.0, 8.0)
REFIT_GROWTH = 1.1
PRIOR_NOISE = 0.3  # variance added to transferred points (standardised units)
# Priors moved from another GPU's space (oto.search.prior_map, distance > 0): chosen on gfx1030->gfx1100,
# gfx1035->gfx1150 and gfx1035->gfx1103's seen seeds (bench/RESULTS.md, "Mapped priors weighed ...")
MAPPED_PRIOR_RELEVEL = 1.0  # share of the measured offset of mapped priors applied to all of them
# of the first generation's bets on priors, how many may be mapped ones: none since mapped priors earn their
# weight (below), so a warm run's first generation is the cold run's (2 before, "Mapped priors weighed ...")
MAPPED_FIRST_BETS = 0
MAPPED_PRIORS_IN_DESIGN = False  # mapped priors do not stand in for the initial design's random kernels
MAPPED_PRIORS_IN_MODEL = True  # mapped priors are training points of the Gaussian process
# the shipped seeds' neighbours in the mapped priors' order: chosen on the same development pairs once the
# RDNA3 seeds indexed (bench/RESULTS.md, "The shipped RDNA3 seeds indexed ..."); off since mapped priors earn
# their weight: an unmeasured donor decides nothing, so the seeds' neighbours come seed by seed as cold
MAPPED_RANK_NEIGHBOURS = False
# mapped priors earn their weight: trusted in proportion to how well their ranking agrees with this GPU's own
# measurements (mapped_prior_trust); chosen on the development pairs of bench/RESULTS.md, "Mapped priors that
# earn their weight"
MAPPED_PRIOR_TRUST = True
TRUST_MIN_MEASURED = 6  # this GPU's own measurements before the agreement is computed (the trust is unknown)
MAPPED_TRUST_Z = 1.64  # the agreement must beat chance: rank correlation > z / sqrt(n - 1) (one-sided 5%)
POOL_RANDOM = 600  # random valid configurations scored per ask (enumerated spaces)
TOP_NEIGHBOURHOODS = 8  # best configurations whose one-step neighbourhood is always scored
LINE_TOPS = 3  # best configurations whose one-parameter lines (any value of one knob) are scored
# Pick rotation (see SurrogateStrategy._local): "l" the best expected improvement among one- and
# two-parameter changes of the best starts, "c" switch flips then certify the best open start's lines,
# "e" exploration in another basin; "g" (the whole pool) is where an empty kind falls back to.
ROTATION = "llce"
LOCAL_STARTS = 5  # candidate local optima whose lines the "l" picks consider
ANCHOR_SCAN = 60  # ranked configurations scanned for starts (enumerated spaces; 4 otherwise)
CLIP_QUANTILE = 0.7  # costs above this quantile are clipped to it before the GP sees them


def switch_flips(hist: History) -> list[Index]:
    """Unmeasured configurations one switch away from a switch setting's best configuration.

    A *switch* is a two-valued parameter (shared memory on/off, read-only loads, padding; Tensile's
    kernel language, assembly or source). Switches interact with everything else: on the convolution
    cache the best kernels without shared memory need a power-of-two block width and read-only loads off,
    while the shared-memory half is better on average and favours other widths, so flipping a switch on
    the incumbent says little about the other setting. Each setting's *champion* (the best measured
    configuration with it) is the context in which the other switches are worth trying: at most 2s*s
    evaluations for s switches."""
    space = hist.space
    switches = [k for k, p in enumerate(space.parameters) if len(p.values) == 2]
    ranked = hist.ranked()
    champions: dict[Index, None] = {}
    for k in switches:
        for v in (0, 1):
            best = next((r for r in ranked if r[k] == v), None)
            if best is not None:
                champions[best] = None
    out: dict[Index, None] = {}
    for c in champions:
        for k in switches:
            nb = (*c[:k], 1 - c[k], *c[k + 1 :])
            if space.key(nb) not in hist.taken and space.valid(nb):
                out[nb] = None
    return list(out)


def relevel_mapped_priors(hist: History, share: float) -> float:
    """Shift the costs of the priors moved from another GPU's space (distance > 0) by ``share`` of the mean
    offset between what those of them measured here cost and their labels; returns the shift applied.

    Their labels are the donor GPU's scores against the donor's own reference: the ranking among them may
    carry over where the level does not (RDNA2's VALU kernels mapped to RDNA3 WMMA kernels score well below
    what their labels say), and a level that is too good makes the model spend the first generations in
    their region. Priors legal here as they are keep their labels."""
    measured = {p: c for p, c in hist.ok()}
    gaps = [
        measured[p] - c
        for p, c, d in zip(hist.prior_points, hist.prior_costs, hist.prior_distances, strict=True)
        if d > 0 and p in measured
    ]
    if not gaps or share <= 0:
        return 0.0
    shift = share * float(np.mean(gaps))
    hist.prior_costs = [
        c + shift if d > 0 else c for c, d in zip(hist.prior_costs, hist.prior_distances, strict=True)
    ]
    return shift


def spearman(a, b) -> float:
    """Spearman's rank correlation (:func:`oto.numbers.spearman`), 0 when either side is constant: no
    agreement."""
    rho = rank_correlation(a, b)
    return rho if math.isfinite(rho) else 0.0


def mapped_prior_trust(hist: History, z: float = 0.0) -> float | None:
    """How far the priors moved from another GPU's space (distance > 0) have earned their weight here: the
    rank correlation between what a model of those priors alone predicts for the kernels measured on this
    GPU and what they measured, when it beats chance (exceeds ``z`` / sqrt(n - 1), n measurements: ``z``
    standard errors of a chance correlation), else 0. None (unknown) before ``TRUST_MIN_MEASURED``
    measurements or with fewer than two mapped priors.

    A donor whose ranking carries over to this GPU (the same macro tiles good on both) keeps its priors in
    the search; one whose ranking does not (RDNA2's VALU kernels mapped onto RDNA3 WMMA kernels, where other
    tiles win) is weighed down to nothing once this GPU's own kernels say so, and the run goes on as a cold
    run would. The measurements are this GPU's, whatever proposed them (shipped seeds, their neighbours, the
    mapped priors' own first bets), so a ranking that only holds among the priors themselves scores low."""
    mapped = [
        (p, c)
        for p, c, d in zip(hist.prior_points, hist.prior_costs, hist.prior_distances, strict=True)
        if d > 0
    ]
    ok = hist.ok()
    if len(mapped) < 2 or len(ok) < TRUST_MIN_MEASURED:
        return None
    space = hist.space
    gp = GP(space.encode([p for p, _ in mapped]), np.asarray([c for _, c in mapped]), np.zeros(len(mapped)))
    mean, _ = gp.predict(space.encode([p for p, _ in ok]))
    rho = spearman(mean, [c for _, c in ok])
    return rho if rho > z / math.sqrt(len(ok) - 1) else 0.0


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


WHY = {
    "g": "max expected improvement",
    "e": "exploration: best expected improvement in another basin",
    "c": "local: certifying the best open start's one-parameter changes",
    "s": "local: switch flip of the best configuration with one switch setting",
    "l": "local: best expected improvement among one- and two-parameter changes",
}


class SurrogateStrategy(BaseStrategy):
    name = "surrogate"
    options = (
        Option(
            "rotation",
            ROTATION,
            "order of pick kinds within a batch: l = best expected improvement among one- and two-parameter "
            "changes of the best starts, c = switch flips then certify the best open start, e = explore "
            "another basin",
            choices=None,
        ),
        Option(
            "local_starts",
            LOCAL_STARTS,
            "candidate local optima whose one-knob lines the l picks weigh",
            1,
            50,
        ),
        Option(
            "clip_quantile",
            CLIP_QUANTILE,
            "costs above this quantile are clipped to it before the Gaussian process sees them",
            0.05,
            1.0,
        ),
        Option(
            "prior_noise",
            PRIOR_NOISE,
            "variance (standardised units) added to transferred points from related problems",
            0.0,
            10.0,
        ),
        Option(
            "mapped_prior_relevel",
            MAPPED_PRIOR_RELEVEL,
            "share (0 off, 1 all) of the offset between the labels of the priors moved from another GPU's "
            "space and what those of them measured here scored, applied to all of them: their labels are on "
            "the other GPU's scale",
            0.0,
            1.0,
        ),
        Option(
            "mapped_priors_in_design",
            MAPPED_PRIORS_IN_DESIGN,
            "whether priors moved from another GPU's space count towards the initial design (then the model, "
            "trained on them alone, picks the rest of the first batch in their region); if not, the first "
            "batch's other picks are random valid configurations, as in a cold run",
        ),
        Option(
            "mapped_first_bets",
            MAPPED_FIRST_BETS,
            "how many of the first generation's bets on priors (a third of the batch) may be priors moved "
            "from another GPU's space; the slots left go to the shipped solutions or the initial design",
            0,
            200,
        ),
        Option(
            "mapped_priors_in_model",
            MAPPED_PRIORS_IN_MODEL,
            "whether priors moved from another GPU's space are training points of the Gaussian process (its "
            "picture of this space); if not, they act only through their ranking among themselves: the first "
            "bets and ``mapped_rank_neighbours``",
        ),
        Option(
            "mapped_rank_neighbours",
            MAPPED_RANK_NEIGHBOURS,
            "whether the first generation takes the shipped solutions' one-knob neighbours in the order a "
            "model of the priors moved from another GPU's space ranks them (the donor's ranking inside this "
            "GPU's own region), rather than seed by seed",
        ),
        Option(
            "mapped_prior_trust",
            MAPPED_PRIOR_TRUST,
            "whether priors moved from another GPU's space earn their weight: out of the model until this "
            f"GPU has measured {TRUST_MIN_MEASURED} kernels, then their extra noise in the Gaussian process "
            "is ``prior_noise`` divided by the rank correlation between a model of those priors alone and "
            "this GPU's own measurements (0 unless it beats chance, ``mapped_prior_trust_z``), and at 0 "
            "they leave the model and the candidate pool; if not, they keep ``prior_noise`` throughout",
        ),
        Option(
            "mapped_prior_trust_z",
            MAPPED_TRUST_Z,
            "with ``mapped_prior_trust``: the rank correlation counts only above this many standard errors "
            "of a chance one (z / sqrt(n - 1) for n measurements); below it the trust is 0",
            0.0,
            5.0,
        ),
        Option(
            "initial_design",
            8,
            "random configurations before the model is trusted (no seeds, no priors)",
            1,
            200,
        ),
    )

    def __init__(self, seed: int = 0, **options):
        super().__init__(seed, **options)
        rotation = self.settings["rotation"]
        if not rotation or set(rotation) - set("lce"):
            raise StrategyError(
                "search.options.rotation", f"{rotation!r} must be a non-empty string of l, c and e"
            )
        # Hyper-parameters are re-picked once the data grew by REFIT_GROWTH (speed only: a fresh
        # instance given the same evidence re-picks them, so workflow jobs stay reproducible).
        self._hyper: dict[str, tuple[int, tuple]] = {}

    def ask(self, evidence: Evidence, n: int) -> list[Proposal]:
        space = evidence.space
        hist = history(evidence, space)
        pick = Picker(hist, n, self.name)
        rng = rng_for(self.seed, space, len(hist.points), f"g{evidence.generation}")
        ok = hist.ok()
        relevel_mapped_priors(hist, self.settings["mapped_prior_relevel"])
        if not ok and hist.prior_points:  # transfer: a related problem's best kernels are the first bets
            bets, mapped = 0, 0
            for i in np.argsort(hist.prior_costs, kind="stable"):
                if bets >= max(1, n // 3):
                    break
                moved = hist.prior_distances[int(i)] > 0
                if moved and mapped >= self.settings["mapped_first_bets"]:
                    continue
                source = hist.prior_sources[int(i)]  # another GPU's registry, say: the proposal says so
                why = "best kernel of a related problem (transfer" + (f": {source})" if source else ")")
                pick.offer(hist.prior_points[int(i)], why)
                bets += 1
                mapped += moved
        if not ok and hist.seeds:
            self._seed_generation(pick, hist)
        elif len(ok) + self._design_priors(hist) < self.settings["initial_design"]:
            fill_random(pick, rng, "initial design: random valid configuration")
        else:
            self._model_step(pick, hist, rng)
        fill_random(pick, rng, "random valid configuration (pool exhausted)")
        return pick.out

    def _design_priors(self, hist: History) -> int:
        """The priors that stand in for the initial design's random configurations."""
        if self.settings["mapped_priors_in_design"]:
            return len(hist.prior_points)
        return sum(1 for d in hist.prior_distances if d == 0)

    def _seed_generation(self, pick: Picker, hist: History) -> None:
        for s in hist.seeds[: max(1, pick.n // 2)]:
            pick.offer(s, "shipped solution used at a tuning size", proposer="seed")
        # the seeds' neighbours in seed order, found only as far as the picks need them (a shipped deck
        # holds dozens of seeds, each neighbour a legality check)
        neighbours: Iterable[Index] = _seed_neighbours(hist)
        priors = zip(hist.prior_points, hist.prior_costs, hist.prior_distances, strict=True)
        mapped = [(p, c) for p, c, d in priors if d > 0]
        why = "one-knob neighbour of a shipped solution"
        if self.settings["mapped_rank_neighbours"] and len(mapped) >= 2:
            # a model of the mapped priors alone: only the order it gives this GPU's own candidates is used
            every = list(neighbours)
            if every:
                ys = np.asarray([c for _, c in mapped])
                gp = GP(hist.space.encode([p for p, _ in mapped]), ys, np.zeros(len(ys)))
                mean, _ = gp.predict(hist.space.encode(every))
                why += ", in the order of the mapped priors' model"
                every = [every[int(i)] for i in np.argsort(mean, kind="stable")]
            neighbours = every
        for nb in neighbours:
            if pick.full:
                break
            pick.offer(nb, why)

    def _trust(self, hist: History) -> float:
        """The weight of the mapped priors (1: as any prior; 0: not earned, or not yet; see
        :func:`mapped_prior_trust`)."""
        if not self.settings["mapped_prior_trust"]:
            return 1.0
        trust = mapped_prior_trust(hist, self.settings["mapped_prior_trust_z"])
        return 0.0 if trust is None else trust

    def _pool(self, hist: History, rng: np.random.Generator, trusted: bool = True) -> list[Index]:
        """Candidates the model scores; ``trusted``: whether the mapped priors' best are among them."""
        space = hist.space
        prior = [
            p
            for p, _, d in sorted(
                zip(hist.prior_points, hist.prior_costs, hist.prior_distances, strict=True),
                key=lambda t: t[1],
            )
            if trusted or d == 0
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
        for p in ranked[: LINE_TOPS if space.enumerable else 1]:
            for nb in lines(space, p):
                cands[nb] = None
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

    def _local(self, hist: History, rng: np.random.Generator) -> tuple[list[Index], list[Index], str]:
        """Candidates for the local picks, a variable-neighbourhood descent from several starts.

        A *start* is a measured configuration none of whose measured one-parameter changes beats it
        (a candidate local optimum); one whose lines are all measured is certified and drops out.
        Returns (certify, more, kind): ``certify`` are the open switch flips (:func:`switch_flips`,
        kind "s") or, once those are all measured, the unmeasured one-parameter changes of the best open
        start (kind "c"; the incumbent until certified, then the next basin's best: a restart). ``more``
        adds those of the next LOCAL_STARTS - 1 open starts, the switch flips and the incumbent's
        two-parameter changes, the escapes that need two knobs at once (e.g. dropping shared memory *and*
        widening the block)."""
        space = hist.space
        ranked = hist.ranked()[: ANCHOR_SCAN if space.enumerable else 4]
        if not ranked:
            return [], [], "c"
        cost = {p: c for p, c in hist.ok()}
        more = [c for c in pair_lines(space, ranked[0], rng) if space.key(c) not in hist.taken]
        first: list[Index] = []
        starts = 0
        for r in ranked:
            line = lines(space, r)
            if any(cost.get(c, math.inf) < cost[r] for c in line):
                continue  # not a local optimum candidate: a line neighbour already beats it
            open_ = [c for c in line if space.key(c) not in hist.taken]
            if not open_:
                continue  # certified
            if not first:
                first = open_
            else:
                more += open_
            starts += 1
            if starts >= self.settings["local_starts"]:
                break
        flips = switch_flips(hist)
        return (flips, first + more + flips, "s") if flips else (first, first + more, "c")

    def _model_step(self, pick: Picker, hist: History, rng: np.random.Generator) -> None:
        line_c, pair_c, certify_kind = self._local(hist, rng)
        trust = self._trust(hist)
        pool = self._pool(hist, rng, trust > 0)
        in_pool = set(pool)
        pool += [c for c in dict.fromkeys(line_c + pair_c) if c not in in_pool]
        if not pool:
            return
        space = hist.space
        ok = sorted(hist.ok(), key=lambda pc: pc[1])
        if len(ok) > MAX_TRAIN:  # the best half, then an even spread over the rest
            rest = ok[MAX_TRAIN // 2 :]
            ok = ok[: MAX_TRAIN // 2] + rest[:: max(1, len(rest) // (MAX_TRAIN // 2))][: MAX_TRAIN // 2]
        keep = [
            d == 0 or (self.settings["mapped_priors_in_model"] and trust > 0) for d in hist.prior_distances
        ]
        prior_pts = [p for p, k in zip(hist.prior_points, keep, strict=True) if k]
        prior_noise = [
            self.settings["prior_noise"] / (1.0 if d == 0 else trust)
            for d, k in zip(hist.prior_distances, keep, strict=True)
            if k
        ]
        pts = [p for p, _ in ok] + prior_pts
        ys = [c for _, c in ok] + [c for c, k in zip(hist.prior_costs, keep, strict=True) if k]
        if not ys:
            return  # nothing measured and no prior trusted yet: the random fill proposes
        # Clipping the worst costs (warping, as in HEBO/SMAC's log-transforms): the model spends its
        # capacity on the good region instead of on how bad the worst kernels are, which otherwise
        # makes a slightly worse-on-average region that holds the optimum look hopeless.
        cap = float(np.quantile(ys, self.settings["clip_quantile"]))
        ys = [min(y, cap) for y in ys]
        # Failed configurations are as bad as the worst success: the model learns to avoid their region.
        worst = max(ys)
        failed = [p for p, c in zip(hist.points, hist.costs, strict=True) if c is None][-MAX_TRAIN // 4 :]
        pts += failed
        ys += [worst] * len(failed)
        extra = np.r_[
            np.zeros(len(ok)),
            np.asarray(prior_noise, dtype=float),
            np.zeros(len(failed)),
        ]
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
        # Local picks (see _local): "c" flips switches or certifies the anchor's lines, "l" takes its
        # lines or pairs.
        where = {c: i for i, c in enumerate(pool)}
        on_line = np.zeros(len(pool), dtype=bool)
        on_line[[where[c] for c in line_c]] = True
        on_pair = np.zeros(len(pool), dtype=bool)
        on_pair[[where[c] for c in pair_c]] = True
        masks = {"g": None, "e": far, "c": on_line, "l": on_pair}
        fallback = {"g": "g", "e": "g", "c": "l", "l": "g"}
        # Batch proposals: after each pick, damp the acquisition near it so one batch spreads out.
        for j in range(pick.n):
            rotation = self.settings["rotation"]
            phase = rotation[(len(hist.points) + j) % len(rotation)]
            while True:
                acq = score if masks[phase] is None else np.where(masks[phase], score, -np.inf)
                if np.isfinite(acq).any() or phase == "g":
                    break
                phase = fallback[phase]
            i = int(np.argmax(acq))
            if not np.isfinite(acq[i]):
                break
            why = WHY[certify_kind if phase == "c" else phase]
            pick.offer(pool[i], f"{why} (pred {math.exp(-mean[i]):.3g}x)")
            d2 = (((xq - xq[i]) / gp.ls) ** 2).sum(1)
            score = score * (1.0 - np.exp(-d2))
            score[i] = -np.inf
            if pick.full:
                break


def _seed_neighbours(hist: History) -> Iterator[Index]:
    """Every shipped seed's valid one-knob neighbours, seed by seed, each once."""
    seen: set[Index] = set()
    for seed in hist.seeds:
        for nb in hist.space.neighbours(seed):
            if nb not in seen:
                seen.add(nb)
                yield nb
