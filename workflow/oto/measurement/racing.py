"""Adaptive repetition: race the candidates of every size against each other and the spoof floor.

With ±25% drift, a fixed number of repetitions is either too few to separate close kernels or wastes GPU
seconds on kernels that lost by 30% in the first launches. Racing spends samples where the answer is still
open:

1. **Probe.** Every candidate at every size, ``probe_repetitions`` times, interleaved with the reference.
2. **Decide per size** from the drift-normalised scores of *all* samples so far. The leader is the best
   valid kernel (the reference, i.e. the spoof floor, is a contender like any other). A kernel whose interval
   lies entirely below the leader's is out. The size stops as

   * ``separated`` — no other kernel's interval overlaps the leader's;
   * ``tie`` — every remaining contender is provably within ``tie_tolerance`` of the leader: the upper bound
     of the log gap (gap + the two half-widths in quadrature) is ≤ log(1 + tolerance);
   * ``budget`` — every contender has ``max_repetitions`` samples, or the race's launch budget
     (``budget_per_pair`` × candidates × sizes candidate launches; the bracketing references come on top)
     is spent.

   With a workload (finalize of a deck with call counts, ``workload_precision`` > 0) a size that would stop
   stays open, its leader alone topped up, while its score is less precise than the size's weight asks:
   see :func:`precision_targets`. Deciding *who* wins needs few launches where the winner is clear; the
   workload's time saved needs the winner's *margin*, and most where the workload spends its time.
3. **Top up** the contenders of open sizes by ``round_repetitions``, again bracketed by the reference, and go
   to 2. Each round is one ``measure`` call; execution order (``seq``), repetition and sweep numbers continue
   across rounds so the drift model sees one timeline.

Kernels with any failed launch (validation, crash, timeout) have status != ok and can never lead.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from oto.backends.base import Launch
from oto.config import config_block, config_defaults
from oto.measurement.scoring import t95

SEPARATED, TIE, BUDGET, FIXED, NO_VALID = "separated", "tie", "budget", "fixed", "no_valid"


_BENCHMARK = config_defaults("benchmark")  # the config schema states every default


@dataclass(frozen=True)
class RaceSettings:
    probe_repetitions: int = _BENCHMARK["racing"]["probe_repetitions"]
    round_repetitions: int = _BENCHMARK["racing"]["round_repetitions"]
    max_repetitions: int = _BENCHMARK["racing"]["max_repetitions"]  # per (kernel, size)
    budget_per_pair: float = _BENCHMARK["racing"]["budget_per_pair"]  # candidate launches per pair, mean
    tie_tolerance: float = _BENCHMARK["tie_tolerance"]
    # the workload's precision (finalize only): 0 off; see precision_targets
    workload_precision: float = _BENCHMARK["racing"]["workload_precision"]
    workload_max_repetitions: int = _BENCHMARK["racing"]["workload_max_repetitions"]  # the leader's, per size
    workload_decides: bool = _BENCHMARK["racing"]["workload_decides"]  # an undecided called size races on

    @classmethod
    def from_config(cls, benchmark: Mapping) -> RaceSettings:
        bench = config_block({"benchmark": benchmark}, "benchmark")
        r = bench["racing"]
        return cls(
            probe_repetitions=int(r["probe_repetitions"]),
            round_repetitions=int(r["round_repetitions"]),
            max_repetitions=int(r["max_repetitions"]),
            budget_per_pair=float(r["budget_per_pair"]),
            tie_tolerance=float(bench["tie_tolerance"]),
            workload_precision=float(r["workload_precision"]),
            workload_max_repetitions=int(r["workload_max_repetitions"]),
            workload_decides=bool(r["workload_decides"]),
        )


@dataclass(frozen=True)
class SizeDecision:
    """Racing state of one size: ``stop`` is None while the size is still open."""

    size_index: int
    leader: str | None
    contenders: tuple[str, ...]  # kernels (leader included) whose interval overlaps the leader's
    stop: str | None


@dataclass
class RaceResult:
    samples: pd.DataFrame
    scores: pd.DataFrame
    decisions: dict[int, SizeDecision]
    rounds: int
    launches: int
    log: list[str] = field(default_factory=list)
    # the sizes whose leader was topped up for the workload's precision (precision_targets): their launches
    refined: dict[int, int] = field(default_factory=dict)
    _csv: str | None = field(default=None, repr=False, compare=False)

    def samples_csv(self) -> str:
        """``samples`` as samples.csv holds them, rendered once: the job's output and the measurement archive
        are the same text, and a big deck's final race renders millions of cells."""
        if self._csv is None:
            self._csv = self.samples.to_csv(index=False)
        return self._csv


def _within(ratio: float, half_a: float, half_b: float, limit: float) -> bool:
    """Whether two kernels, one ``ratio`` (>= 1) times the other's time or score, provably differ by at
    most ``limit`` (in log): the log gap plus their intervals' half-widths in quadrature."""
    return math.log(ratio) + math.hypot(half_a, half_b) <= limit


def _half_log_width(lo: float, hi: float) -> float:
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0:
        return math.inf
    return (math.log(hi) - math.log(lo)) / 2


def decide_sizes(scores: pd.DataFrame, tolerance: float, sizes=None) -> dict[int, SizeDecision]:
    """Leader, remaining contenders and stop reason (separated / tie / no_valid / None: open) per size.

    ``scores`` has the scores.csv layout; ``sizes`` limits the decision to those size indices (None: all
    sizes in ``scores``). Plain numpy per size: racing decides hundreds of sizes per round."""
    limit = math.log1p(tolerance)
    size_a = scores["size_index"].to_numpy()
    valid = ((scores["status"] == "ok") & scores["score"].notna()).to_numpy()
    kid_a = scores["kernel_id"].astype(str).to_numpy()
    sc, lo, hi = (scores[c].to_numpy(float) for c in ("score", "ci_low", "ci_high"))
    wanted = set(np.unique(size_a).tolist()) if sizes is None else set(sizes)
    out = {int(i): SizeDecision(int(i), None, (), NO_VALID) for i in wanted}
    rows = np.flatnonzero(valid & np.isin(size_a, list(wanted)))
    for i, idx in pd.Series(rows).groupby(size_a[rows]).groups.items():
        r = rows[np.asarray(idx)]
        r = r[np.lexsort((kid_a[r], -sc[r]))]  # best score first, ties by kernel id
        lead, rivals = r[0], r[1:]
        overlapping = rivals[hi[rivals] >= lo[lead]]
        contenders = (str(kid_a[lead]), *map(str, kid_a[overlapping]))
        stop = SEPARATED
        if len(overlapping):
            h_lead = _half_log_width(lo[lead], hi[lead])
            tied = all(
                _within(sc[lead] / sc[j], h_lead, _half_log_width(lo[j], hi[j]), limit) for j in overlapping
            )
            stop = TIE if tied else None
        out[int(i)] = SizeDecision(int(i), str(kid_a[lead]), contenders, stop)
    return out


def decide_size(scores: pd.DataFrame, size_index: int, tolerance: float) -> SizeDecision:
    """:func:`decide_sizes` for one size."""
    return decide_sizes(scores, tolerance, [size_index])[size_index]


def precision_targets(
    workload: Mapping[int, float], floor_us: Mapping[int, float], precision: float
) -> dict[int, float]:
    """Per size the workload calls, the half-width (in log) its leader's score interval must reach: the
    precision over the square root of the size's share of the library's workload time at the floor (calls ×
    the floor's time). The library's workload speed-up is Σ calls × floor / Σ calls × winner, so a size's
    relative score error moves it by that share × the error, and the sizes' errors add in quadrature: these
    targets hold the library's figure to ``precision`` (95%) whatever the number of sizes, with launches in
    proportion to the shares (the cheapest allocation for that bound). A size with 90% of the time is raced
    to ~1.05 × ``precision``, one with 1% to 10 ×, which the probe mostly reaches already. Sizes without
    calls or without a measured floor get no target."""
    time = {i: workload[i] * floor_us[i] for i in workload if workload[i] > 0 and i in floor_us}
    time = {i: t for i, t in time.items() if math.isfinite(t) and t > 0}
    total = sum(time.values())
    if precision <= 0 or total <= 0:
        return {}
    return {i: precision / math.sqrt(t / total) for i, t in time.items()}


def _row_half_widths(
    scores: pd.DataFrame,
) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]]:
    """Per (kernel, size) of a scores table: the interval's half-width in log, and the time (µs)."""
    ok = scores[(scores["status"] == "ok") & scores["score"].notna()]
    keys = list(zip(ok["kernel_id"].astype(str), ok["size_index"].astype(int), strict=True))
    half = [_half_log_width(lo, hi) for lo, hi in zip(ok["ci_low"], ok["ci_high"], strict=True)]
    return dict(zip(keys, half, strict=True)), dict(zip(keys, ok["time_us"].astype(float), strict=True))


def _launches_for(width: float, n: int, target: float, s: RaceSettings) -> int:
    """The leader's launches that should bring its interval's half-width ``width`` (from ``n`` launches) to
    ``target``: the interval is the robust t-interval, t95(n - 1) · spread / sqrt(n), so the spread is taken
    from it and the count solved at the large-n quantile, with a fifth more for the floor's interval, which
    narrows along but not as fast (and the t quantile still above 1.96)."""
    if not math.isfinite(width) or n < 2:
        return s.round_repetitions
    spread = width * math.sqrt(n) / t95(n - 1)
    return max(1, math.ceil(1.2 * (1.96 * spread / target) ** 2) - n)


@dataclass
class _WorkloadPrecision:
    """The race's state for a workload's precision (see :func:`race`): each size's target and what its
    leader still needs, the sizes kept open for it this round, and the launches spent at them."""

    workload: Mapping[int, float]
    reference: Mapping[int, str]
    settings: RaceSettings
    floor_us: dict[int, float] = field(default_factory=dict)  # each size's reference time, last scored
    half: dict[tuple[str, int], float] = field(default_factory=dict)
    row_us: dict[tuple[str, int], float] = field(default_factory=dict)  # (kernel, size): time, last scored
    targets: dict[int, float] = field(default_factory=dict)
    counts: pd.Series = field(default_factory=lambda: pd.Series(dtype=int))
    refined: dict[int, int] = field(default_factory=dict)
    sizes: set[int] = field(default_factory=set)  # the open sizes whose leader alone is topped up
    undecided: set[int] = field(default_factory=set)  # this round's sizes racing on (workload_decides)
    exhausted: bool = False  # the race's budget is spent: only these top-ups go on

    @property
    def on(self) -> bool:
        return bool(self.workload) and self.settings.workload_precision > 0

    def deciding(self, i: int, d: SizeDecision) -> list[str]:
        """The kernels (reference aside) a size the workload calls races on when max_repetitions left it
        undecided (``workload_decides``): its leader and every contender that may be slower than it by more
        than the size's precision target (:func:`precision_targets`: what the size's share of the workload
        lets it cost the library's figure), each up to workload_max_repetitions; [] where none. Read from the
        round's :meth:`update`."""
        target = self.targets.get(i)
        if not (self.on and self.settings.workload_decides) or target is None or d.leader is None:
            return []
        lead, ref, cap = d.leader, self.reference.get(i), self.settings.workload_max_repetitions
        t_lead, h_lead = self.row_us.get((lead, i), math.nan), self.half.get((lead, i), math.inf)
        apart = [
            k for k in d.contenders
            if k != lead and not _within(self.row_us.get((k, i), math.nan) / t_lead, h_lead,
                                         self.half.get((k, i), math.inf), target)
        ]  # fmt: skip
        if not apart:
            return []
        racing = [k for k in (lead, *apart) if k != ref and int(self.counts.get((k, i), 0)) < cap]
        if racing:
            self.undecided.add(i)
        return racing

    def update(self, scores: pd.DataFrame, counts: pd.Series) -> None:
        self.counts = counts
        if self.on:
            self.half, self.row_us = _row_half_widths(scores)
            times = self.row_us
            self.floor_us.update({i: times[(r, i)] for i, r in self.reference.items() if (r, i) in times})
            self.targets = precision_targets(self.workload, self.floor_us, self.settings.workload_precision)

    def wanted(self, i: int, d: SizeDecision) -> int | None:
        """The launches a size's leader still needs for the workload's precision (None: none)."""
        ref, s = self.reference.get(i), self.settings
        if i not in self.targets or d.leader in (None, ref):
            return None
        width = math.hypot(
            self.half.get((d.leader, i), math.inf), self.half.get((ref, i), 0.0) if ref else 0.0
        )
        n = int(self.counts.get((d.leader, i), 0))
        if width <= self.targets[i] or n >= s.workload_max_repetitions:
            return None
        return min(_launches_for(width, n, self.targets[i], s), s.workload_max_repetitions - n)

    def keep(self, wants: Mapping[int, int]) -> None:
        """The sizes kept open for the workload this round (outside the race's budget): ``wants``' leaders
        and the undecided sizes racing on."""
        self.sizes, self.undecided = {*wants, *self.undecided}, set()
        self.refined.update({i: self.refined.get(i, 0) for i in self.sizes})

    def count(self, launch_plan: Sequence[Launch]) -> None:
        at = Counter(la.size_index for la in launch_plan if la.size_index in self.refined)
        for i, n in at.items():
            self.refined[i] += n


def _continue_timeline(df: pd.DataFrame, rnd: int, next_seq: int, next_sweep: int) -> tuple[int, int]:
    """A round's samples put after the earlier rounds' (``seq`` and ``sweep`` continue; ``round`` set, in
    place); the next round's first seq and sweep."""
    df["seq"] = df["seq"].astype(int) + next_seq
    df["round"] = rnd
    next_seq = int(df["seq"].max()) + 1
    if "sweep" in df.columns:  # sweeps too continue across rounds (-1: the backend has none)
        sweep = df["sweep"].astype(int)
        df["sweep"] = sweep.where(sweep < 0, sweep + next_sweep)
        next_sweep = max(next_sweep, int(df["sweep"].max()) + 1)
    return next_seq, next_sweep


def race(
    measure: Callable[[list[Launch]], pd.DataFrame],
    score: Callable[[pd.DataFrame, set[int] | None], pd.DataFrame],
    plan: Callable[[Mapping[int, Sequence[str]], int, int, int], list[Launch]],
    candidates: Mapping[int, Sequence[str]],
    reference: Mapping[int, str],
    settings: RaceSettings,
    workload: Mapping[int, float] | None = None,
) -> RaceResult:
    """Run the race.

    * ``measure(launches)`` runs one plan and returns its samples (samples.csv layout, ``seq`` from 0);
    * ``score(samples, sizes)`` turns all samples so far (the drift model needs them all) into scores
      (scores.csv layout) of the given sizes (None: every size);
    * ``plan(per_size, repetitions, rep_offset, round)`` orders the launches of one round (interleaved with
      the reference);
    * ``candidates[size]`` are the kernels to race at each size (the reference is added as a contender);
    * ``workload[size]``: the workload's calls per size (finalize of a workload deck). With
      ``settings.workload_precision`` > 0 a size that would stop while its leader's interval (the reference's
      in quadrature) is wider than its :func:`precision_targets` target stays open, its leader alone topped
      up (at most ``workload_max_repetitions``; a leader that is the reference saves nothing), outside the
      race's budget (a small deck spends it on close sizes; the shares bound these top-ups).
    """
    s = settings
    frames: list[pd.DataFrame] = []
    decisions: dict[int, SizeDecision] = {}
    per_size = {i: [c for c in cands if c != reference.get(i)] for i, cands in candidates.items()}
    budget = s.budget_per_pair * sum(len(c) for c in per_size.values())
    next_seq = next_rep = next_sweep = launches = spent = 0
    rnd = 0
    reps = s.probe_repetitions
    log: list[str] = []
    scores = pd.DataFrame()
    precision = _WorkloadPrecision(workload or {}, reference, s)
    while per_size:
        launch_plan = plan(per_size, reps, next_rep, rnd)
        # the workload's precision top-ups have their own cap (workload_max_repetitions), not the budget
        paired = sum(la.role == "candidate" and la.size_index not in precision.sizes for la in launch_plan)
        if rnd > 0 and spent + paired > budget:
            for i in per_size:
                decisions[i] = SizeDecision(i, decisions[i].leader, decisions[i].contenders, BUDGET)
            log.append(f"round {rnd}: budget of {budget:.0f} candidate launches spent ({spent} used)")
            wants = (
                {i: precision.wanted(i, decisions[i]) for i in per_size} if not precision.exhausted else {}
            )
            wants = {i: w for i, w in wants.items() if w is not None}
            if not wants:
                break
            precision.exhausted = True
            precision.keep(wants)
            per_size = {i: [decisions[i].leader] for i in wants}
            reps = max(s.round_repetitions, *wants.values())
            log.append(f"round {rnd}: {len(wants)} size(s) go on for the workload's precision")
            continue
        df = measure(launch_plan).copy()
        if len(df):
            next_seq, next_sweep = _continue_timeline(df, rnd, next_seq, next_sweep)
            frames.append(df)
        launches += len(launch_plan)
        spent += paired
        precision.count(launch_plan)
        next_rep += reps
        samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if samples.empty:
            break
        scores = score(samples, set(per_size))
        counts = samples[samples["status"] == "ok"].groupby(["kernel_id", "size_index"]).size()
        precision.update(scores, counts)
        open_sizes: dict[int, list[str]] = {}
        decided = decide_sizes(scores, s.tie_tolerance, per_size)
        wants = {}  # the launches each size kept for the workload's precision still asks for
        for i in sorted(per_size):
            d = decided[i]
            ref = reference.get(i)
            if d.stop is None and not precision.exhausted:
                hungry = [k for k in d.contenders if counts.get((k, i), 0) < s.max_repetitions]
                # The reference is timed in every round that touches its size (it brackets the candidates),
                # so it only needs candidates to travel with.
                top_up = [k for k in hungry if k != ref] or precision.deciding(i, d)
                if top_up:
                    open_sizes[i] = top_up
            if d.stop is None and i not in open_sizes:
                d = SizeDecision(i, d.leader, d.contenders, BUDGET)
            # Decided (or its contenders all at max_repetitions): the workload may want the leader's score
            # more precise than that.
            if i not in open_sizes and (more := precision.wanted(i, d)) is not None:
                open_sizes[i], wants[i] = [d.leader], more
            decisions[i] = d
        precision.keep(wants)
        precise = f" ({len(wants)} for the workload's precision)" if wants else ""
        log.append(f"round {rnd}: {len(launch_plan)} launches, {len(open_sizes)} size(s) still open{precise}")
        # a round of only precision top-ups takes what their widths ask for at once (fewer rescoring rounds)
        only_precision = bool(wants) and len(wants) == len(open_sizes)
        reps = max(s.round_repetitions, *wants.values()) if only_precision else s.round_repetitions
        per_size = open_sizes
        rnd += 1
    samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    scores = score(samples, None) if len(samples) else scores
    return RaceResult(samples, scores, decisions, rnd, launches, log, refined=precision.refined)


def annotate_scores(scores: pd.DataFrame, tolerance: float, open_label: str = BUDGET) -> pd.DataFrame:
    """Append the racing outcome to a scores table: ``race`` (why its size stopped) and ``contender``
    (the kernel's interval still overlaps the leader's).

    The decision is taken on the final scores (all samples, hence the final drift model): the race's own
    verdict at the time a size closed is in the benchmark log. A size still open on the final scores was
    stopped by the budget (or, without racing, by the fixed repetition count: ``open_label``)."""
    out = scores.copy()
    out["race"] = ""
    out["contender"] = False
    for i, d in sorted(decide_sizes(out, tolerance).items()):
        at = out["size_index"] == i
        out.loc[at, "race"] = d.stop or open_label
        out.loc[at & out["kernel_id"].isin(d.contenders), "contender"] = True
    return out
