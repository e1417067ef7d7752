"""The second floor: the **best shipped kernel** of each size, the fastest of all the solutions the library's
shipped logic holds (what PyTorch TunableOp selects among them when it tunes rocBLAS), beside the floor each
size races against (its shipped winner, the spoof floor: :mod:`oto.deck.floors`).

Timing every shipped solution at every size would cost more than the tuning, so finalize races a bounded
**shortlist** per size (config ``benchmark.best_shipped_shortlist``), in the same race as the finalists and
the reference, so the same drift model and statistics judge them. The shortlist alternates two sources:

- the model's picks: the shipped solutions the simulated GPU's performance model expects fastest at the
  size (:class:`oto.hardware.simulated.scorer.SimulatedScorer`, a solution it cannot build left out);
- the shipped file's own winners at the neighbouring sizes: the solutions its Matching table runs at the
  deck sizes nearest in log (M, N, batch, K), nearest first, which AMD measured fastest there on gfx900.

Both leave out the size's own reference (raced anyway) and solutions Tensile 4.44 would not build
(:func:`oto.tensile.legality.check`); two solutions Tensile builds as one kernel count once. On the simulated
GPU the shortlisted kernels are measured like any other, so the same code path runs everywhere.

After the race, each size's best shipped kernel is the highest-scoring shipped kernel measured there (the
reference included when it is one of the library's own solutions), and :func:`judge_rows` gives every
final.yaml row its verdict against it and applies the rule that the final library never ships a kernel that
loses to it: such a size gets the best shipped kernel, recorded as ``kept_by_best_shipped``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oto.backends.base import Kernel
from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.hardware.simulated.performance import Arch
from oto.hardware.simulated.scorer import SimulatedScorer
from oto.measurement.score_rows import missing
from oto.measurement.selection import geomean, take_kernel, verdict
from oto.tensile import legality
from oto.tensile.params import candidate_id

# The arch-profile fields the model's picks read (the simulated GPU's): finalize's profile view holds them.
PROFILE_FIELDS = (*Arch.PROFILE_FIELDS, "calibration")
BEATS_BY = 0.05  # the share of sizes where the tuned kernel beats the best shipped one by this much


@dataclass
class Shortlist:
    """The shipped kernels finalize races besides the finalists and the references."""

    kernels: dict[str, Kernel] = field(default_factory=dict)  # id → the solution as Tensile resolves it
    per_size: dict[int, list[str]] = field(default_factory=dict)  # deck size → its shortlisted kernel ids
    positions: dict[str, int] = field(default_factory=dict)  # id → the solution's position in the logic file
    why: dict[int, dict[str, str]] = field(default_factory=dict)  # deck size → {id: model | neighbour}


def _log_sizes(sizes: Sequence[Sequence[int]]) -> np.ndarray:
    return np.log(np.maximum(np.asarray([list(s[:4]) for s in sizes], dtype=float).reshape(-1, 4), 1.0))


def shortlist(
    deck: LibraryDeck,
    profile: Mapping[str, Any],
    seed: int,
    length: int,
    references: Mapping[int, str | None],
    limits: legality.Limits | None = None,
) -> Shortlist:
    """Up to ``length`` shipped kernels per deck size (module doc), none equal to the size's reference in
    ``references`` (deck size → kernel id). ``length`` 0, or a library that ships no kernels: empty."""
    out = Shortlist()
    if length <= 0 or not deck.solutions or not deck.sizes:
        return out
    library = Library.parse(deck.name)
    ids: dict[int, str] = {}  # solution position → id, for the legal ones
    params: dict[str, dict[str, Any]] = {}
    for pos, sol in enumerate(deck.solutions):
        if legality.check(library, sol["params"], limits).valid:
            resolved = legality.resolve(library, sol["params"], limits)
            kid = candidate_id(resolved)
            ids[pos] = kid
            params.setdefault(kid, resolved)
            out.positions.setdefault(kid, pos)
    if not ids:
        return out
    legal = sorted(ids)
    sizes = [list(map(int, s[:4])) for s in deck.sizes]
    times = SimulatedScorer(profile, seed).times_us(library, [deck.solutions[p] for p in legal], sizes)
    t = np.asarray([[math.inf if x is None else x for x in row] for row in times], dtype=float)
    logs = _log_sizes(sizes)
    rows = np.asarray([j for j, s in enumerate(deck.shipped) if s is not None], dtype=int)
    for i in range(len(sizes)):
        ref = references.get(i)
        model = [ids[legal[r]] for r in np.argsort(t[:, i], kind="stable") if math.isfinite(t[r, i])]
        near = []
        if len(rows):
            dist = np.sum((logs[rows] - logs[i]) ** 2, axis=1)
            for j in rows[np.argsort(dist, kind="stable")]:
                pos = int(deck.shipped[int(j)][0])
                if pos in ids:
                    near.append(ids[pos])
        picked: dict[str, str] = {}
        sources = (("model", iter(model)), ("neighbour", iter(near)))
        exhausted: set[str] = set()
        while len(picked) < length and len(exhausted) < len(sources):
            for name, it in sources:  # alternate: one of the model's, one of the neighbours'
                if len(picked) >= length or name in exhausted:
                    continue
                kid = next((k for k in it if k != ref and k not in picked), None)
                if kid is None:
                    exhausted.add(name)
                else:
                    picked[kid] = name
        if picked:
            out.per_size[i] = list(picked)
            out.why[i] = picked
            for kid in picked:
                out.kernels.setdefault(kid, Kernel(kid, params[kid]))
    return out


def _half_width(row: Mapping) -> float:
    """Half the width of a score's 95% interval in log space (0 where it has none)."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if missing(lo) or missing(hi) or lo is None or hi is None or lo <= 0 or hi <= 0:
        return 0.0
    return (math.log(hi) - math.log(lo)) / 2


def best_shipped_rows(scores: Sequence[Mapping], shipped: set[str]) -> dict[int, Mapping]:
    """Per size, the highest-scoring shipped kernel that ran without a failure (then the first id)."""
    best: dict[int, Mapping] = {}
    for r in scores:
        if r["kernel_id"] not in shipped or r["status"] != "ok" or missing(r["score"]):
            continue
        i = int(r["size_index"])
        cur = best.get(i)
        if cur is None or (-r["score"], r["kernel_id"]) < (-cur["score"], cur["kernel_id"]):
            best[i] = r
    return best


def against(winner: Mapping, best: Mapping, tolerance: float) -> tuple[float, str]:
    """The winner's speed-up over the best shipped kernel (ratio of their scores against the same reference
    in the same race) and its verdict: the two intervals' log half-widths add in quadrature, as racing
    judges a tie."""
    ratio = float(winner["score"]) / float(best["score"])
    hw = math.hypot(_half_width(winner), _half_width(best))
    return ratio, verdict(ratio, ratio * math.exp(-hw), ratio * math.exp(hw), tolerance)


def judge_rows(
    rows: list[dict],
    scores: Sequence[Mapping],
    shipped: set[str],
    tolerance: float,
    positions: Mapping[str, int] | None = None,
    take_losers: bool = True,
) -> list[dict]:
    """final.yaml's rows judged against the best shipped kernel of their size (``best_shipped``,
    ``best_shipped_score``, ``vs_best_shipped``, ``verdict_best_shipped``, ``kept_by_best_shipped``).

    A row whose winner loses to the best shipped kernel (or that has no winner while a shipped kernel ran)
    takes the best shipped kernel: the final library never ships a loser to it, unless ``take_losers`` is
    False (judged only: a size given its runtime key's kernel, oto.measurement.dispatch).
    ``kept_by_best_shipped`` marks every size whose final kernel is a shipped one other than the size's
    floor."""
    best = best_shipped_rows(scores, shipped)
    out = []
    for row in rows:
        row = dict(row)
        i = int(row["size_index"])
        b = best.get(i)
        if b is None:  # no shipped kernel ran here: nothing to judge against
            row.update(best_shipped=None, best_shipped_score=None, vs_best_shipped=None)
            row.update(verdict_best_shipped=None, kept_by_best_shipped=False)
            out.append(row)
            continue
        if take_losers and (row.get("winner") is None or against(row, b, tolerance)[1] == "loss"):
            take_kernel(row, b, tolerance)
        ratio, v = against(row, b, tolerance)
        row.update(
            best_shipped=b["kernel_id"],
            best_shipped_score=_round(b["score"]),
            vs_best_shipped=_round(ratio),
            verdict_best_shipped=v,
            kept_by_best_shipped=row["winner"] in shipped and row["winner"] != row.get("shipped"),
        )
        if positions and b["kernel_id"] in positions:
            row["best_shipped_position"] = int(positions[b["kernel_id"]])
        out.append(row)
    return out


def _round(x) -> float | None:
    return None if x is None or missing(x) or not math.isfinite(float(x)) else round(float(x), 6)


def summary(rows: Sequence[Mapping]) -> dict[str, Any]:
    """wins/ties/losses and the geomean speed-up against the best shipped kernel, the sizes it was measured
    at, the sizes that kept it, and the share of sizes where the tuned kernel beats it by ``BEATS_BY``."""
    judged = [r for r in rows if r.get("verdict_best_shipped")]
    ratios = [r["vs_best_shipped"] for r in judged]
    beats = sum(1 for x in ratios if x is not None and x >= 1 + BEATS_BY)
    return {
        "sizes": len(judged),
        "geomean_score": _round(geomean(ratios)) if judged else None,
        "wins": sum(r["verdict_best_shipped"] == "win" for r in judged),
        "ties": sum(r["verdict_best_shipped"] == "tie" for r in judged),
        "losses": sum(r["verdict_best_shipped"] == "loss" for r in judged),
        "kept_by_best_shipped": sum(bool(r.get("kept_by_best_shipped")) for r in rows),
        "share_beats_5pct": _round(beats / len(judged)) if judged else None,
    }
