"""The night's GPU time (config ``budget.hours``) shared across libraries by expected gain.

After every generation each library still tuning gets a share of the GPU time left: first what it is owed (a
library the workload calls keeps the generations equal generations would give every library in the budget, so
none is worse off than it would have been; dropped when the time left cannot pay for them all), then the rest
(what equal generations would spend on libraries with nothing to gain, and what converged libraries leave) in
proportion to its expected gain: per tuned size, the gap to the ceiling (1 - pct_ceiling) × the workload's GPU
time there (calls × the winner's time), summed, × how fast the library has been improving (the relative rise
of its geomean score over its last generation). A library whose share no longer pays for one more generation,
at what its last measured one cost, is starved for that generation: mutate freezes it the way convergence does
(finalize and packaging still run on it; everything measured is kept). Starving is decided again at every
generation: time the others no longer use (a library converged, or every share is capped at what the library's
remaining generations cost) goes to a starved library whose next generation fits in it, best gain per GPU
second first. GPU time is what the benchmark recorded: samples.csv ``time_us`` (simulated time on the
simulated backend). A pure function of the selections, decks and samples of the generations done, decided
once per generation for every library by the budget job (:func:`generation_budget`), whose file each
library's mutate job reads (:mod:`oto.measurement.budget_file`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.deck.model import read_library_yaml
from oto.gemm import Library
from oto.measurement.budget_file import read_budget
from oto.measurement.selection_file import read_selection

# A library that stopped improving keeps a sliver of weight (convergence, not the budget, decides it is done).
MIN_IMPROVEMENT = 0.01
# Before a library has two generations its rate is unknown: count it as doubling, so gen1 is never starved
# for lack of history.
UNKNOWN_IMPROVEMENT = 1.0


@dataclass(frozen=True)
class LibraryState:
    """What the budget knows of one library after its generation ``generation``."""

    library: str
    generation: int
    gap_time_s: float  # Σ over tuned sizes of workload weight × winner's time × (1 - pct_ceiling/100)
    improvement: float  # relative rise of the geomean score over the last generation
    spent_s: float  # GPU seconds of all its generations so far
    last_generation_s: float  # GPU seconds its last measured generation took (a starved one costs 0: skipped)
    tuning: bool  # not converged (a library starved before may be given generations again)
    measured_generations: int = 1  # generations it ran (a starved one did not)
    kernels_measured: int = 0  # kernels its generations measured (the selection's ``measured``)
    sweep_s: float = 0.0  # GPU seconds of its sweep's generation (in spent_s, not in last_generation_s)

    @property
    def kernel_s(self) -> float:
        """What measuring one more kernel costs it: its GPU time so far per kernel measured (0: unknown)."""
        return self.spent_s / self.kernels_measured if self.kernels_measured > 0 else 0.0

    @property
    def expected_gain(self) -> float:
        return self.gap_time_s * max(self.improvement, MIN_IMPROVEMENT)

    @property
    def mean_generation_s(self) -> float:
        """What one of its generations costs on average (the equal plan's measure: its sweep aside)."""
        searched = self.measured_generations - (self.sweep_s > 0)
        if self.spent_s > 0 and searched > 0:
            return (self.spent_s - self.sweep_s) / searched
        return self.last_generation_s


@dataclass(frozen=True)
class Allocation:
    library: str
    share_s: float  # its share of the GPU time left
    generations: int  # further generations the share pays for (0: starved)
    reason: str  # why it is starved, or '' when it goes on
    sweep: int = 0  # fork-lattice kernels its next generation adds (config budget.sweep: once, when due)
    sweep_s: float = 0.0  # the GPU time set aside for its sweep until then, outside its share


def size_flops(size: Sequence[int], flops_per_mac: int = 2) -> float:
    """A deck size [m, n, batch, k, ...] (strides may follow) → floating-point operations of one call, at the
    family's flops per multiply-accumulate (8 for complex types: the GFLOPS a selection records count so)."""
    m, n, batch, k = (int(v) for v in size[:4])
    return float(flops_per_mac) * m * n * batch * k


def library_state(
    selection: Mapping[str, Any],
    size_weights: Sequence[float],
    generation_seconds: Sequence[float],
    sweep_s: float = 0.0,
) -> LibraryState:
    """One library's state from its latest selection.yaml, its deck's per-size weights (``calls`` when the
    deck comes from a workload, else ``weights``) and the GPU seconds of each of its generations so far but
    its sweep's (config budget.sweep), ``sweep_s``: spent, but not what a generation of its search costs,
    which its next generation is priced at (a sweep a hundred times dearer would starve it)."""
    sizes = selection["sizes"]
    deck_indices = selection.get("deck_indices") or list(range(len(sizes)))
    per_mac = Library.parse(str(selection["library"])).family.flops_per_mac
    gap_time = 0.0
    for row in selection["per_size"]:
        gflops, pct = row.get("gflops"), row.get("pct_ceiling")
        if not gflops or pct is None or not math.isfinite(float(gflops)):
            continue  # no valid winner: nothing known to gain from
        i = int(row["size_index"])
        weight = float(size_weights[int(deck_indices[i])])
        seconds = size_flops(sizes[i], per_mac) / (float(gflops) * 1e9)
        gap_time += weight * seconds * min(max(1.0 - float(pct) / 100.0, 0.0), 1.0)
    history = [float(h) for h in selection.get("convergence", {}).get("history", [])]
    improvement = history[-1] / history[-2] - 1.0 if len(history) >= 2 and history[-2] > 0 else None
    conv = selection.get("convergence", {})
    measured = [float(s) for s in generation_seconds if s > 0]  # a starved generation's 0 s says no cost
    return LibraryState(
        library=str(selection["library"]),
        generation=int(selection["generation"]),
        gap_time_s=gap_time,
        improvement=UNKNOWN_IMPROVEMENT if improvement is None else improvement,
        spent_s=float(sum(generation_seconds)) + sweep_s,
        last_generation_s=measured[-1] if measured else 0.0,
        # a frozen selection that did not converge was starved: the budget may give it generations again
        tuning=not conv.get("converged"),
        measured_generations=len(measured) + (sweep_s > 0),
        kernels_measured=len(selection.get("measured") or ()),
        sweep_s=sweep_s,
    )


def equal_generations(states: Sequence[LibraryState], budget_s: float) -> int:
    """How many generations equal generations would give every library in ``budget_s``: the budget over what
    one generation of every library costs on average."""
    per_round = sum(s.mean_generation_s for s in states)
    return int(budget_s / per_round + 1e-9) if per_round > 0 else 0


def owed_seconds(states: Sequence[LibraryState], budget_s: float, generations_left: int) -> dict[str, float]:
    """The guarantee: a tuning library the workload calls (a gap to gain on) keeps the generations equal
    generations would give it, what they cost at its mean; the budget shares only the rest by gain (what
    equal generations would spend on libraries with nothing to gain, and on those that converged). Empty
    when the time left cannot pay for the guarantee (then the gain decides alone)."""
    left = max(budget_s - sum(s.spent_s for s in states), 0.0)
    n_equal = equal_generations(states, budget_s)
    owed = {
        s.library: min(max(n_equal - s.measured_generations, 0), generations_left) * s.mean_generation_s
        for s in states
        if s.tuning and s.gap_time_s > 0
    }
    return owed if sum(owed.values()) <= left else {}


def _shares(
    going: Sequence[LibraryState], left: float, generations_left: int, owed: Mapping[str, float]
) -> dict[str, float]:
    """The time left by expected gain, on top of what each library is owed, no library given more than its
    remaining generations cost (what a cheap library cannot use goes to the others, by gain again)."""
    shares: dict[str, float] = {}
    pool = list(going)
    cap = {
        s.library: max(s.last_generation_s * generations_left - owed.get(s.library, 0.0), 0.0) for s in pool
    }
    while pool:
        total = sum(s.expected_gain for s in pool)
        even = {s.library: left * (s.expected_gain / total if total > 0 else 1.0 / len(pool)) for s in pool}
        full = [s for s in pool if cap[s.library] <= even[s.library]]
        if not full:
            shares.update(even)
            break
        for s in full:
            shares[s.library] = cap[s.library]
            left -= shares[s.library]
            pool.remove(s)
    return {lib: share + owed.get(lib, 0.0) for lib, share in shares.items()}


def sweep_reservations(
    states: Sequence[LibraryState], available_s: float, sweep: int, swept: Collection[str] = ()
) -> dict[str, tuple[int, float]]:
    """Config ``budget.sweep``: per library with a gap to gain on that has not swept yet (``swept``), the
    fork-lattice kernels (up to ``sweep``) its sweep adds and the GPU time set aside for them until then
    (its cost per kernel so far × the kernels), the most expected gain first, while ``available_s`` pays
    for them; a library whose lattice the time left cannot pay for in full gets as many kernels as it can."""
    out: dict[str, tuple[int, float]] = {}
    if sweep <= 0:
        return out
    for s in sorted(states, key=lambda s: (-s.expected_gain, s.library)):
        if not (s.tuning and s.gap_time_s > 0 and s.kernel_s > 0) or s.library in swept:
            continue
        count = min(sweep, int(available_s / s.kernel_s + 1e-9))
        if count <= 0:
            break
        out[s.library] = (count, count * s.kernel_s)
        available_s -= count * s.kernel_s
    return out


def allocate(
    states: Sequence[LibraryState],
    budget_s: float,
    generations_left: int,
    sweep: int = 0,
    swept: Collection[str] = (),
) -> dict[str, Allocation]:
    """Each tuning library's share of the GPU time left (``budget_s`` minus what every library spent), by
    expected gain (capped at what its remaining generations cost) on top of what it is owed
    (:func:`owed_seconds`: a library the workload calls keeps the generations equal generations would give
    it), and how many of the ``generations_left`` (the cap, max_generations) it pays for. When a share does
    not pay for a generation, the library (of those owed nothing) with the
    least gain per second of those is starved and the time left shared again among the others, so what it
    would have had is not lost; time still held by no share then goes to starved libraries whose next
    generation fits in it. ``sweep`` (config budget.sweep): the fork-lattice kernels a library not in
    ``swept`` adds in the generation after those equal generations would give it, or at its last generation
    (``generations_left`` 1), whichever comes first; their time is set aside at every decision before from
    what the guarantee leaves (:func:`sweep_reservations`). The search's generations up to then run as they
    would without it, so the run measures every kernel the equal plan would, and then the lattice, in a
    generation of its own that the equal plan's kernels do not share (a generation keeps one leader per size:
    the lattice's luckiest measurement, beside the search's, would hide the search's kernel there)."""
    left = max(budget_s - sum(s.spent_s for s in states), 0.0)
    going = sorted((s for s in states if s.tuning), key=lambda s: s.library)
    owed = owed_seconds(states, budget_s, generations_left)
    reserved = sweep_reservations(going, left - sum(owed.values()), sweep, swept)
    left -= sum(cost for _, cost in reserved.values())
    n_equal = equal_generations(states, budget_s)
    # a library whose sweep is due runs this generation: the time set aside for its sweep pays for it
    due = {
        s.library
        for s in going
        if s.library in reserved and (generations_left == 1 or s.measured_generations > n_equal)
    }
    starved: dict[str, str] = {}
    while True:
        shares = _shares(going, left - sum(owed.values()), generations_left, owed)
        short = [
            s
            for s in going
            if shares[s.library] < s.last_generation_s and not owed.get(s.library) and s.library not in due
        ]
        if not short:
            break
        worst = min(short, key=lambda s: (s.expected_gain / s.last_generation_s, s.library))
        w = worst
        starved[w.library] = (
            f"at gen{w.generation + 1}: its share {shares[w.library]:.3g} s of the {left:.3g} s of GPU time "
            f"left (budget {budget_s:.3g} s) is less than its last generation's {w.last_generation_s:.3g} s; "
            f"expected gain {w.expected_gain:.3g} (gap × workload time {w.gap_time_s:.3g} s × improvement "
            f"{w.improvement:.3g}), the least per GPU second of the {len(going)} libraries left"
        )
        going.remove(worst)
    # Time no share holds (every share capped at what its generations cost): a starved library whose next
    # generation fits in it runs after all, the most gain per GPU second first.
    spare = left - sum(shares.values())
    for s in sorted(
        (s for s in states if s.library in starved),
        key=lambda s: (-s.expected_gain / max(s.last_generation_s, 1e-12), s.library),
    ):
        if s.last_generation_s <= spare:
            shares[s.library] = min(s.last_generation_s * generations_left, spare)
            spare -= shares[s.library]
            going.append(s)
            del starved[s.library]
    out = {lib: Allocation(lib, 0.0, 0, why) for lib, why in starved.items()}
    for s in going:
        cost, share = s.last_generation_s, shares[s.library]
        gens = generations_left if cost <= 0 else min(int(share // cost), generations_left)
        count, set_aside = reserved.get(s.library, (0, 0.0))
        out[s.library] = Allocation(s.library, share, gens, "", count if s.library in due else 0, set_aside)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class BudgetInputs:
    """What the budget job of generation g reads (config ``budget``): every library's deck and gen g-1
    selection, and the samples.csv of every generation done (GPU time spent), the libraries in the run's
    order (the sums over them are taken in that order)."""

    hours: float
    decks: Sequence[Path]
    selections: Sequence[Path]
    samples: Sequence[Path]
    previous: Path | None = None  # the decision of generation g-1 (g >= 2): who has swept (budget.sweep)


def library_states(
    budget: BudgetInputs, swept_at: Mapping[str, int] | None = None
) -> tuple[list[LibraryState], list[str]]:
    """Every library's state after the last generation, in the order of ``budget.decks``, and the
    ``provenance.numbers`` its selection names (simulated, replayed or measured: what the GPU time is).
    ``swept_at``: the generation each library that swept swept in (its GPU time kept apart)."""
    seconds: dict[str, list[tuple[int, float]]] = {}
    for path in budget.samples:  # results/<arch>/<library>/gen<N>/samples.csv
        gen = int(path.parent.name.removeprefix("gen"))
        seconds.setdefault(path.parent.parent.name, []).append((gen, generation_gpu_seconds(path)))
    states, numbers = [], []
    for deck_path, selection_path in zip(budget.decks, budget.selections, strict=True):
        deck = read_library_yaml(deck_path)
        at = (swept_at or {}).get(deck.name)
        spent = [s for g, s in sorted(seconds.get(deck.name, [])) if g != at]
        sweep_s = sum(s for g, s in seconds.get(deck.name, []) if g == at)
        weights = deck.calls if deck.calls is not None else deck.weights
        selection = read_selection(selection_path)
        states.append(library_state(selection, weights, spent, sweep_s))
        numbers.append(str((selection.get("provenance") or {}).get("numbers", "unknown")))
    return states, numbers


def generation_budget(
    budget: BudgetInputs, generation: int, max_generations: int, sweep: int = 0
) -> dict[str, Any]:
    """The budget's decision for ``generation``, made once for every library (results/<arch>/budget/
    gen<N>.yaml, docs/architecture.md): per library whether it runs, is starved (and why) or converged, its
    share, the fork-lattice kernels it adds (config budget.sweep, once: ``swept`` lists the libraries that
    have, carried from the previous decision) and the figures the decision used. Mutate of each library
    reads its own entry."""
    before: set[str] = set()  # who has swept, and in which generation (a file before swept_at: unknown)
    at: dict[str, int] = {}
    if budget.previous is not None:  # results/<arch>/<library>/deck.yaml: the run's libraries, by folder
        earlier = read_budget(budget.previous, generation - 1, [Path(p).parent.name for p in budget.decks])
        before, at = set(earlier.get("swept") or ()), dict(earlier.get("swept_at") or {})
    states, numbers = library_states(budget, at)
    budget_s = budget.hours * 3600.0
    generations_left = max_generations - generation
    plan = allocate(states, budget_s, generations_left, sweep, before)
    owed = owed_seconds(states, budget_s, generations_left)
    spent = sum(s.spent_s for s in states)
    allocations = {}
    for s in states:
        share = plan.get(s.library)
        decision = "converged" if share is None else "starved" if share.reason else "runs"
        allocations[s.library] = {
            "decision": decision,
            "reason": share.reason if share is not None else "",
            "share_s": share.share_s if share is not None else 0.0,
            "generations": share.generations if share is not None else 0,
            "sweep": share.sweep if share is not None else 0,
            "sweep_s": share.sweep_s if share is not None else 0.0,
            "owed_s": owed.get(s.library, 0.0),
            "expected_gain": s.expected_gain,
            "gap_time_s": s.gap_time_s,
            "improvement": s.improvement,
            "spent_s": s.spent_s,
            "last_generation_s": s.last_generation_s,
            "measured_generations": s.measured_generations,
        }
    return {
        "generation": generation,
        "numbers": "/".join(sorted(set(numbers))) or "unknown",
        "hours": budget.hours,
        "budget_s": budget_s,
        "spent_s": spent,
        "left_s": max(budget_s - spent, 0.0),
        "generations_left": generations_left,
        "equal_generations": equal_generations(states, budget_s),
        "libraries": [s.library for s in states],
        "allocations": allocations,
        "swept": sorted(before | {lib for lib, a in plan.items() if a.sweep}),
        "swept_at": dict(sorted({**at, **{lib: generation for lib, a in plan.items() if a.sweep}}.items())),
    }


def generation_gpu_seconds(samples_csv: str) -> float:
    """GPU seconds one generation's benchmark recorded: the sum of samples.csv ``time_us`` (a frozen
    generation's header-only file is 0; an unparsable or missing time counts nothing)."""
    total = 0.0
    with open(samples_csv, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                t = float(row.get("time_us") or "nan")
            except ValueError:
                continue
            if math.isfinite(t) and t > 0:
                total += t
    return total / 1e6
