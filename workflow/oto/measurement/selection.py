"""Selection: per size, the best kernel so far, its verdict against the spoof floor and its ceilings; a
library's summary and convergence; the evidence strategies learn from; a generation's selection document
(selection.yaml; reading it: :mod:`oto.measurement.selection_file`); the finalists of the full-deck run.

Scores are ratios to the same reference kernel at each size, so they compare across generations: the best
of generation N is the better of generation N's winner and the carried best of N-1. Across generations two
kernels never raced each other, so where their intervals overlap the higher score is no verdict: the other
stays a size's **contender** (``per_size[].contenders``) and finalize races the two head to head there. Kept
only by the score, eight generations' best per size is the largest of many noisy scores, and a truly faster
kernel of an earlier generation could be displaced by a luckier one and never raced again (issue #31).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oto.gemm import Library
from oto.hardware.ceilings import roofline_gflops
from oto.measurement.score_rows import missing
from oto.numbers import is_weighted, weighted_geomean

OBSERVATIONS_KEPT = 48  # best kernels remembered as evidence for the strategies
CONTENDERS_PER_SIZE = 2  # earlier generations' leaders a size keeps while their interval overlaps the best's


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else round(float(x), 6)


# A size no kernel ran at, the reference included (too large for the device's memory, every launch failed):
# the tuned library serves the shipped kernel there, so it is neither a win nor a loss, and reports count it
# apart (they called it a loss: "slower at some sizes").
NOT_MEASURED = "not_measured"
# A size where the spoof floor's kernel failed every launch (wrong results, a crash, a hang, or never run
# again once it took the GPU down: gpu_reset, the spoof's hangs on some 780Ms) while other kernels passed:
# no speed-up over it exists, so it is neither a win nor a tie; finalize ships the fastest kernel that passed
# there (floor_failed_winners) and reports count the size apart, as one the tuned library fixes rather than
# speeds up (they called it "not measured").
FLOOR_FAILED = "floor_failed"
# how the floor's launches failed for that (scoring's classes; not bad timings, nor a size too large for
# the device's memory, where nothing runs)
FLOOR_FAILURES = frozenset({"validation_failed", "timeout", "crash", "gpu_reset"})


def verdict(score: float, ci_low: float, ci_high: float, tolerance: float) -> str:
    """Win / tie / loss against the spoof floor (score 1), with the configured tie tolerance."""
    if not np.isfinite(score):
        return "loss"
    if score >= 1 + tolerance and ci_low > 1:
        return "win"
    if score <= 1 - tolerance and ci_high < 1:
        return "loss"
    return "tie"


def final_row_problem(row: Mapping[str, Any], kernels: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """Why a final.yaml per-size row with a winner is no measurement a library can ship, as (field, value,
    why), else None: a winner the file's ``kernels`` do not list, a score where the floor failed (there is
    no speed-up over a kernel that failed), a score or GFLOPS that is not a positive, finite number. The
    merge's intake and the upstream kit both refuse such a file."""
    if row["winner"] not in kernels:
        return "winner", row["winner"], "is not in 'kernels'"
    failed_floor = row.get("verdict") == FLOOR_FAILED
    if failed_floor and row.get("score") is not None:
        why = f"where the reference failed (verdict {FLOOR_FAILED}): no speed-up over a kernel that failed"
        return "score", row["score"], why
    for col in ("gflops",) if failed_floor else ("score", "gflops"):
        v = row.get(col)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            return col, v, "is not a measurement (a positive, finite number)"
    return None


def take_kernel(row: dict, kernel: Mapping, tolerance: float) -> dict:
    """``row`` (a final.yaml per-size row) with ``kernel`` (its score row in the same race) made the size's
    final kernel: its id, score, interval, GFLOPS, share of the ceiling and verdict against the floor, judged
    as :func:`per_size_rows` judges (a bound it lacks proves nothing; no GFLOPS, no share). Changed in place
    and returned."""
    row.update(
        winner=str(kernel["kernel_id"]),
        **{c: None if missing(kernel.get(c)) else _finite(kernel[c]) for c in ("score", "ci_low", "ci_high")},
        gflops=None if missing(kernel.get("gflops")) else _finite(kernel["gflops"]),
    )
    ceiling = row.get("ceiling_gflops")
    row["pct_ceiling"] = _finite(100 * row["gflops"] / ceiling) if row["gflops"] and ceiling else None
    row["verdict"] = verdict(
        *(np.nan if row[k] is None else row[k] for k in ("score", "ci_low", "ci_high")), tolerance
    )
    return row


def geomean(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def best_per_size(scores: Sequence[Mapping]) -> dict[int, Mapping]:
    """The best valid kernel per size (highest score, then the first kernel id; failed kernels can never
    win)."""
    best: dict[int, Mapping] = {}
    for r in scores:
        if r["status"] != "ok" or missing(r["score"]):
            continue
        i = int(r["size_index"])
        cur = best.get(i)
        if cur is None or (-r["score"], r["kernel_id"]) < (-cur["score"], cur["kernel_id"]):
            best[i] = r
    return dict(sorted(best.items()))


def per_size_rows(
    scores: Sequence[Mapping],
    sizes: list[list[int]],
    library: Library,
    profile: Mapping,
    tolerance: float,
    generation: int,
    previous: Mapping[int, Mapping] | None = None,
):
    """Merge this batch's best per size with the carried best; add ceilings and verdicts. ``scores``: the
    rows of a scores table (:func:`oto.measurement.score_rows.read_score_rows`, or a DataFrame's records)."""
    best = best_per_size(scores)
    arr = np.asarray([s[:4] for s in sizes], dtype=float).reshape(-1, 4)
    ceilings = roofline_gflops(profile, library.family, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])
    rows = []
    for i, _ in enumerate(sizes):
        cur, prev = best.get(i), (previous or {}).get(i)
        carried = list(prev.get("contenders") or []) if prev is not None else []
        if cur is not None and (prev is None or prev.get("score") is None or cur["score"] > prev["score"]):
            row = {
                "size_index": i,
                "winner": cur["kernel_id"],
                "score": _finite(cur["score"]),
                "ci_low": _finite(cur["ci_low"]),
                "ci_high": _finite(cur["ci_high"]),
                "gflops": _finite(cur["gflops"]),
                "generation": generation,
            }
            if cur.get("race"):  # how the race at this size ended (oto.measurement.racing)
                row["race"] = str(cur["race"])
            if prev is not None and prev.get("winner"):
                carried.insert(0, _contender(prev, prev["winner"], int(prev["generation"])))
        elif prev is not None:
            row = dict(prev)
            if cur is not None:
                carried.append(_contender(cur, cur["kernel_id"], generation))
        else:
            row = {
                "size_index": i,
                "winner": None,
                "score": None,
                "ci_low": None,
                "ci_high": None,
                "gflops": None,
                "generation": generation,
            }
        row.pop("contenders", None)
        if kept := contenders_of(row, carried):
            row["contenders"] = kept
        row["ceiling_gflops"] = _finite(ceilings[i])
        row["pct_ceiling"] = _finite(100 * row["gflops"] / ceilings[i]) if row["gflops"] else None
        row["verdict"] = (
            verdict(
                *(np.nan if row[k] is None else row[k] for k in ("score", "ci_low", "ci_high")), tolerance
            )
            if row["winner"] is not None
            else NOT_MEASURED
        )
        rows.append(row)
    return rows


def race_status(scores: Sequence[Mapping]) -> dict[tuple[int, str], str]:
    """(size, kernel) → how the kernel's launches at that size ended in the race (scoring's classes: ok, or
    the failure most of its failed launches had)."""
    return {(int(r["size_index"]), str(r["kernel_id"])): str(r["status"]) for r in scores}


def floor_failed_winners(rows: list[dict], scores: Sequence[Mapping]) -> list[dict]:
    """Rows without a winner because the size's shipped kernel (the spoof floor) failed every launch there
    while other kernels passed take the fastest of those (median time at the peak state), with the verdict
    ``floor_failed`` and no score: there is no speed-up over a kernel that gives wrong results or hangs, and
    without a winner the logic would have left the size to the nearest size's kernel and the package to the
    failing spoof. The race cannot separate them (scores are against the floor), so it is the probe's
    launches that pick: the row says so (``picked_by``)."""
    passed: dict[int, list[Mapping]] = {}
    for r in scores:
        if r["status"] == "ok" and _finite(r.get("time_us")):
            passed.setdefault(int(r["size_index"]), []).append(r)
    out = []
    for row in rows:
        ran = passed.get(int(row["size_index"]))
        if row.get("winner") is None and row.get("shipped_status") in FLOOR_FAILURES and ran:
            fastest = min(ran, key=lambda r: (float(r["time_us"]), str(r["kernel_id"])))
            row = {
                **row,
                "winner": str(fastest["kernel_id"]),
                "gflops": _finite(fastest.get("gflops")),
                "verdict": FLOOR_FAILED,
                "picked_by": "median time: the shipped kernel failed, so no kernel has a score here",
            }
            ceiling, gflops = _finite(row.get("ceiling_gflops")), row["gflops"]
            row["pct_ceiling"] = _finite(100 * gflops / ceiling) if gflops and ceiling else None
        out.append(row)
    return out


def _contender(r: Mapping, kernel: str, generation: int) -> dict[str, Any]:
    return {
        "kernel": str(kernel),
        **{k: _finite(r.get(k)) for k in ("score", "ci_low", "ci_high")},
        "generation": generation,
    }


def contenders_of(row: Mapping, pool: Sequence[Mapping]) -> list[dict[str, Any]]:
    """The kernels of ``pool`` (other generations' leaders at the size) whose score interval overlaps the
    size's best's: neither is known faster, as they never raced each other. Best score first, each kernel
    once, at most ``CONTENDERS_PER_SIZE``; none where an interval is unknown."""
    low = row.get("ci_low")
    if not row.get("winner") or low is None:
        return []
    kept: dict[str, dict[str, Any]] = {}
    for c in sorted(pool, key=lambda c: (-(c.get("score") or 0.0), c["kernel"])):
        if c["kernel"] == row["winner"] or c["kernel"] in kept or None in (c.get("score"), c.get("ci_high")):
            continue
        if c["ci_high"] >= low:
            kept[c["kernel"]] = dict(c)
    return list(kept.values())[:CONTENDERS_PER_SIZE]


def summarise(
    rows: list[Mapping], failures: Counter, weights: Sequence[float] | None = None
) -> dict[str, Any]:
    """The summary of per-size rows; with ``weights`` (parallel to the rows, a workload's) the weighted
    geomean beside the plain one."""
    verdicts = Counter(r["verdict"] for r in rows)
    pct = [r["pct_ceiling"] for r in rows if r["pct_ceiling"] is not None]
    weighted = {}
    if is_weighted(weights):
        weighted["weighted_geomean_score"] = _finite(weighted_geomean([r["score"] for r in rows], weights))
    return {
        "geomean_score": _finite(geomean([r["score"] for r in rows])),
        **weighted,
        "pct_ceiling_median": _finite(float(np.median(pct))) if pct else None,
        "wins": verdicts["win"],
        "ties": verdicts["tie"],
        "losses": verdicts["loss"],
        "not_measured": verdicts[NOT_MEASURED],
        "floor_failed": verdicts[FLOOR_FAILED],
        "failures": dict(sorted(failures.items())),
    }


def measurement_failures(scores: Sequence[Mapping]) -> Counter:
    """Failure classes of a scores table: one per failed (kernel, size), bad_timing per excluded sample."""
    failures = Counter(r["status"] for r in scores if r["status"] not in ("ok", "bad_timing"))
    excluded = [r["excluded"] for r in scores if "excluded" in r]
    if excluded:
        failures["bad_timing"] += int(sum(0 if missing(x) else x for x in excluded))
    return +failures


def observations(
    scores: Sequence[Mapping],
    params: Mapping[str, Mapping],
    rows: list[Mapping],
    previous: list[Mapping],
    build_failures: Mapping[str, tuple[str, str]] | None = None,
) -> list[dict]:
    """Per kernel: geomean score over the sizes it ran, sizes won, and (as evidence for the strategies) the
    failure class and reason of a kernel that did not build or failed a launch; merged with earlier
    evidence."""
    won = Counter(r["winner"] for r in rows if r["winner"])
    obs = {o["id"]: dict(o) for o in previous}
    for kid, (status, reason) in (build_failures or {}).items():
        if kid in params:
            obs[kid] = {"id": kid, "params": dict(params[kid]), "score": None, "sizes_won": 0}
            obs[kid].update(failure=status, failure_reason=reason)
    by_kernel: dict[str, list[Mapping]] = {}
    for r in scores:
        by_kernel.setdefault(r["kernel_id"], []).append(r)
    for kid, g in sorted(by_kernel.items()):
        if kid not in params:
            continue
        ok = [r["score"] for r in g if r["status"] == "ok" and not missing(r["score"])]
        failed = [r for r in g if r["status"] != "ok"]
        # Any failed launch disqualifies the kernel (correctness gate); its class is evidence either way:
        # the most frequent one (alphabetically first on a tie), with the first failed launch's reason.
        counts = Counter(str(r["status"]) for r in failed)
        failure = min(counts, key=lambda c: (-counts[c], c)) if failed else ""
        reason = failed[0].get("reason") if failed else None
        obs[kid] = {
            "id": kid,
            "params": dict(params[kid]),
            "score": _finite(geomean(ok)) if ok else None,
            "sizes_won": 0,
            "failure": failure,
            "failure_reason": "" if not failure or missing(reason) else str(reason),
        }
    for o in obs.values():
        o["sizes_won"] = won.get(o["id"], 0)
    ranked = sorted(obs.values(), key=lambda o: (o["score"] is None, -(o["score"] or 0), o["id"]))
    return ranked[:OBSERVATIONS_KEPT]


def novelty(cands: Mapping, rows: list[Mapping], generation: int) -> dict[str, Any]:
    """How well the proposals of this generation were spent: new (not already measured), legal, and
    useful (became the best kernel at one or more tuning sizes)."""
    cand = [k for k in cands.get("kernels", []) if "candidate" in k.get("roles", [])]
    rejected = cands.get("rejected", [])
    proposed = len(cand) + len(rejected)
    duplicate = sum(r.get("class") == "duplicate" for r in rejected)
    illegal = sum(r.get("class") == "illegal" for r in rejected)
    ids = {k["id"] for k in cand}
    useful = len({r["winner"] for r in rows if r.get("winner") in ids and r.get("generation") == generation})

    def share(x: int) -> float | None:
        return round(x / proposed, 4) if proposed else None

    return {
        "proposed": proposed,
        "new": proposed - duplicate,
        "legal": proposed - illegal,
        "useful": useful,
        "share_new": share(proposed - duplicate),
        "share_legal": share(proposed - illegal),
        "share_useful": share(useful),
    }


def convergence(history: list[float], epsilon: float, patience: int) -> dict[str, Any]:
    if len(history) > patience:
        base, last = history[-1 - patience], history[-1]
        gain = (last - base) / base if base else math.inf
        if gain <= epsilon:
            return {
                "converged": True,
                "history": history,
                "reason": f"geomean score improved {gain:+.2%} over the last {patience} generations "
                f"(threshold {epsilon:.2%})",
            }
    return {"converged": False, "history": history, "reason": "still improving"}


MAX_FINALISTS = 8  # tuned kernels carried into the full-deck measurement, by tuning sizes won


def finalists(selection: Mapping) -> dict[str, Mapping]:
    won = Counter(r["winner"] for r in selection["per_size"] if r.get("winner"))
    ranked = sorted(won, key=lambda k: (-won[k], k))[:MAX_FINALISTS]
    return {k: selection["kernels"][k] for k in ranked}


def size_contenders(selection: Mapping) -> dict[int, dict[str, Mapping]]:
    """Per deck size (the tuning size's ``deck_indices`` entry), the contenders finalize races there beside
    the finalists: kernel id → params. A contender the run has no parameters of, or whose size has no deck
    index (a selection.yaml from before either), is left out."""
    params = {**(selection.get("contender_kernels") or {}), **selection["kernels"]}
    deck_indices = selection.get("deck_indices") or []
    out: dict[int, dict[str, Mapping]] = {}
    for r in selection["per_size"]:
        kept = {c["kernel"]: params[c["kernel"]] for c in r.get("contenders") or () if c["kernel"] in params}
        if kept and int(r["size_index"]) < len(deck_indices):
            out[int(deck_indices[int(r["size_index"])])] = kept
    return out


def carried_forward(previous: Mapping[str, Any], generation: int) -> dict[str, Any]:
    """The selection of a frozen generation (its library converged): the previous one's, carried forward."""
    doc = dict(previous)
    doc.update(generation=generation, frozen=True)
    return doc


def selection_document(
    cands: Mapping[str, Any],
    build: Mapping[str, Any],
    scores: Sequence[Mapping],
    previous: Mapping[str, Any] | None,
    profile: Mapping,
    config: Mapping,
) -> dict[str, Any]:
    """selection.yaml of one generation from its candidates, builds and scores (rows of scores.csv) and the
    previous generation's selection: the best kernel per tuning size so far, the kernels that are winners,
    failures, convergence, the evidence for the next generation and how well the proposals were spent."""
    generation = int(cands["generation"])
    params = {k["id"]: k["params"] for k in cands.get("kernels", [])}
    previous_rows = {int(r["size_index"]): r for r in previous["per_size"]} if previous else None
    tolerance = float(config["benchmark"]["tie_tolerance"])
    library = Library.parse(cands["library"])
    rows = per_size_rows(scores, cands["sizes"], library, profile, tolerance, generation, previous_rows)

    failures = Counter(previous["summary"]["failures"]) if previous else Counter()
    failures.update(b["status"] for b in build.get("kernels", []) if b["status"] != "ok")
    failures.update(r["class"] for r in cands.get("rejected", []))
    failures.update(measurement_failures(scores))

    kernels = dict(previous["kernels"]) if previous else {}
    for r in rows:
        if r["winner"] and r["winner"] not in kernels:
            kernels[r["winner"]] = params[r["winner"]]
    kernels = {k: v for k, v in kernels.items() if any(r["winner"] == k for r in rows)}
    # the contenders' parameters, for finalize (the winners' are in kernels)
    known = {**(previous or {}).get("contender_kernels", {}), **(previous or {}).get("kernels", {}), **params}
    contender_kernels = {
        c["kernel"]: known[c["kernel"]]
        for r in rows
        for c in r.get("contenders") or ()
        if c["kernel"] not in kernels and c["kernel"] in known
    }
    summary = summarise(rows, failures, cands.get("weights"))
    # convergence follows what the run optimises: the workload-weighted geomean where there is a workload
    progress = summary.get("weighted_geomean_score", summary["geomean_score"])
    history = [*((previous or {}).get("convergence", {}).get("history", [])), progress or 0.0]
    measured = sorted(
        set(previous.get("measured", []) if previous else [])
        | set(params)
        | {r["id"] for r in cands.get("rejected", []) if r.get("id")}
    )
    build_failures = {
        b["id"]: (b["status"], b.get("reason", "")) for b in build.get("kernels", []) if b["status"] != "ok"
    }
    conv = config["search"]["convergence"]
    return {
        "library": library.name,
        "generation": generation,
        "frozen": False,
        "provenance": build.get("provenance", {}),
        "measurement": {"drift": str(scores[0]["drift"]) if scores and "drift" in scores[0] else None},
        "sizes": cands["sizes"],
        "deck_indices": cands.get("deck_indices", []),
        "per_size": rows,
        "kernels": kernels,
        **({"contender_kernels": dict(sorted(contender_kernels.items()))} if contender_kernels else {}),
        "summary": summary,
        "convergence": convergence(history, float(conv["epsilon"]), int(conv["patience"])),
        "observations": observations(
            scores, params, rows, (previous or {}).get("observations", []), build_failures
        ),
        "measured": measured,
        "novelty": novelty(cands, rows, generation),
    }


def selection_log_line(doc: Mapping[str, Any]) -> str:
    """What select's log says of a generation: its geomean (workload-weighted too, where weighted), W/T/L and
    its convergence."""
    s, nan = doc["summary"], float("nan")
    line = (
        f"geomean score {s['geomean_score'] or nan:.3f}, W/T/L {s['wins']}/{s['ties']}/{s['losses']}, "
        f"{doc['convergence']['reason']}"
    )
    if "weighted_geomean_score" in s:
        line += f"; workload-weighted geomean {s['weighted_geomean_score'] or nan:.3f}"
    return line
