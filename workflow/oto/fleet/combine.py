"""One library from many devices: recomputed measurements in, one final out, decided by the statistics.

Scores are ratios to the reference kernel (the shipped solution) measured on the *same* device, so scores of
an 8-CU and a 6-CU laptop combine while their GFLOPS do not. Every number here is recomputed from a bundle's
samples (:mod:`oto.fleet.evidence`); no claim is taken on its word.

Per deck size:

* **Candidates** are the kernels some device's finalize race picked (recomputed), the size's shipped kernel
  among them when it won somewhere.
* **A device's view of a candidate** is the geometric mean of its final-race measurements there (of its
  tuning measurements when the race did not include it), with its interval; a failed launch (validation,
  crash, hang) there disqualifies it on that device, as in the run.
* **Overruled**: a candidate that any device measured *slower than the spoof* (the run's loss verdict: score
  ≤ 1 − tolerance with its interval below 1) or slower than a shipped kernel measured on that same device
  (interval below the shipped kernel's, score below it by the tolerance), or that failed there, never ships,
  however fast another device says it is. One device's word does not outvote another device's measurement.
  Upstream's own kernels for the GPU (config ``deck.native_floor``, raced beside the finalists) are shipped
  kernels in this sense too, but not the floor: they are overruled like any candidate.
* **The winner** is the remaining candidate with the best geometric mean over the devices that measured it
  (more devices first on a tie); its interval spans every device's interval. When every candidate is
  overruled, the size's shipped kernel keeps it (score 1 by definition). Where no candidate has a score on
  any device (the reference failed every launch where it ran), the kernel most devices picked ships,
  verdict ``floor_failed`` (:func:`_floor_failed_pick`).

Agreement: a (kernel, size) measured on two or more devices is a replicated measurement; per library the
merge gives their number, the median and 90th-percentile relative difference of their scores, the share
whose intervals overlap, and the share of sizes where the devices that finished the library picked the same
winner.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from oto.deck.model import LibraryDeck
from oto.gemm import Library
from oto.hardware.ceilings import family_peak_gflops, roofline_gflops
from oto.measurement.dispatch import runtime_key
from oto.measurement.selection import FLOOR_FAILED, NOT_MEASURED, summarise, verdict
from oto.reporting.figures import library_verdict, realistic_roofline

FAILED = frozenset({"validation_failed", "crash", "timeout"})  # a launch that disqualifies its kernel there


@dataclass(frozen=True)
class Contribution:
    """One bundle's evidence of one library: which device, which bundle, what its samples say."""

    device: str
    bundle: str  # sha256[:16]
    evidence: Any  # oto.fleet.evidence.LibraryEvidence
    claimed: Mapping[str, Any] | None  # its final.yaml (provenance, generations), or None: not finished


def geo(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(v)))) if v else None


def rounded(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def _views(contribs: Sequence[Contribution]) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """device → (kernel, size) → its view there: repeated measurements of one kernel at one size on one
    device reduced to one, from the final race's measurements when there are any (the full race against the
    other finalists), else the tuning generations': geometric means of the ok scores and interval bounds,
    the median GFLOPS, and the first failure class seen (which disqualifies the kernel there)."""
    frames = []
    for c in contribs:
        f = c.evidence.frame()
        frames.append(f.assign(device=c.device))
    if not frames:
        return {}
    df = pd.concat(frames, ignore_index=True)
    key = ["device", "kernel", "size_index"]
    final = df["source"].eq("final")
    df = df[final | ~final.groupby([df[k] for k in key]).transform("any")]
    # a launch that ran: its GFLOPS count, and its score where there is one (none where the size's reference
    # failed: oto.measurement.selection.floor_failed_winners)
    ok = (df["status"].eq("ok") & (df["score"] > 0)).to_numpy()
    ran = ok | (df["status"].eq("ok") & (df["gflops"] > 0)).to_numpy()
    bounds = ["score", "ci_low", "ci_high"]
    values = df[bounds].to_numpy(float)
    usable = (values > 0) & np.isfinite(values) & ok[:, None]
    logs = pd.DataFrame(np.log(np.where(usable, values, np.nan)), columns=bounds)
    gflops = df["gflops"].where(ran).to_numpy(float)
    table = df[key].reset_index(drop=True).assign(gflops=gflops, ok=ran, source=df["source"].to_numpy())
    table = pd.concat([table, logs], axis=1)
    g = table.groupby(key, sort=False)
    agg = g.agg(
        score=("score", "mean"),
        ci_low=("ci_low", "mean"),
        ci_high=("ci_high", "mean"),
        gflops=("gflops", "median"),
        measurements=("ok", "sum"),
        source=("source", "first"),
    )
    failed = df[df["status"].isin(FAILED)].groupby(key)["status"].min()
    out: dict[str, dict[tuple[str, int], dict[str, Any]]] = defaultdict(dict)
    for (d, k, i), r in agg.iterrows():
        out[d][(k, int(i))] = {
            "score": _exp(r["score"]),
            "ci_low": _exp(r["ci_low"]),
            "ci_high": _exp(r["ci_high"]),
            "gflops": None if pd.isna(r["gflops"]) else float(r["gflops"]),
            "measurements": int(r["measurements"]),
            "source": "final race" if r["source"] == "final" else "tuning",
            "failed": failed.get((d, k, i)),
        }
    return out


def _exp(log_mean: float) -> float | None:
    return None if pd.isna(log_mean) else float(np.exp(log_mean))


def _final_winners(contribs: Sequence[Contribution]) -> dict[str, dict[int, set[str]]]:
    """device → size → the kernels its finalize races picked (recomputed)."""
    out: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for c in contribs:
        for r in c.evidence.final or []:
            if r.get("winner"):
                out[c.device][int(r["size_index"])].add(r["winner"])
    return out


def overruled_by(
    kernel: str,
    i: int,
    per: Mapping[str, dict],
    obs: Mapping,
    shipped: set[str],
    tolerance: float,
    native: frozenset[str] = frozenset(),
    reference: str | None = None,
) -> dict[str, Any] | None:
    """Why ``kernel`` may not ship at size ``i`` (the first device that measured it slower than the spoof or
    a shipped kernel, or saw it fail), or None. ``shipped``: the floor's kernels; ``reference``: the size's
    own spoof kernel, which scores 1 by definition and is never overruled for being slower than itself (a
    kernel shipped at other sizes is judged like any candidate); ``native``: upstream's own kernels for the
    GPU, rivals as shipped kernels are but judged like any candidate. A kernel that failed on a device at
    the size (the spoof's hangs on some 780Ms) is no yardstick there: being slower than its launches that
    passed overrules nothing, as the device's own finalize disqualified it."""
    for d, v in sorted(per.items()):
        where = {"kernel": kernel, "device": d, "score": rounded(v["score"]), "ci_low": rounded(v["ci_low"]),
                 "ci_high": rounded(v["ci_high"]), "source": v["source"]}  # fmt: skip
        if v["failed"]:
            return {**where, "why": f"failed there ({v['failed']})"}
        # the size's own spoof kernel is the yardstick (score 1); a kernel shipped at other sizes is not
        if v["score"] is None or kernel == reference or (reference is None and kernel in shipped):
            continue
        spoof_failed = reference is not None and (obs[d].get((reference, i)) or {}).get("failed")
        lost = verdict(v["score"], v["ci_low"] or v["score"], v["ci_high"] or v["score"], tolerance) == "loss"
        if lost and not spoof_failed:
            return {**where, "why": "measured slower than the spoof (the shipped kernel) there"}
        for s in sorted((shipped | native) - {kernel}):
            ref = obs[d].get((s, i))
            yardstick = ref and not ref["failed"] and ref["score"]
            slower = yardstick and v["score"] <= ref["score"] * (1 - tolerance)
            if slower and (v["ci_high"] or v["score"]) < (ref["ci_low"] or ref["score"]):
                whose = "shipped kernel" if s in shipped else "upstream's own kernel"
                return {**where, "why": f"measured slower than {whose} {s} ({ref['score']:.3g}x) there"}
    return None


def _decide(
    i: int,
    candidates: Iterable[str],
    obs: Mapping,
    shipped: set[str],
    tolerance: float,
    native: frozenset[str] = frozenset(),
    reference: str | None = None,
):
    """(winner, per-device views, overruled candidates) at size ``i`` (``reference``: its spoof kernel)."""
    best, overruled = None, []
    for k in sorted(candidates):
        per = {d: obs[d][(k, i)] for d in sorted(obs) if (k, i) in obs[d]}
        if not any(v["score"] for v in per.values()):
            continue
        why = overruled_by(k, i, per, obs, shipped, tolerance, native, reference)
        if why:
            overruled.append(why)
            continue
        per = {d: v for d, v in per.items() if v["score"]}
        rank = (geo(v["score"] for v in per.values()), len(per))
        if best is None or rank > best[0]:
            best = (rank, k, per)
    return (best[1], best[2]) if best else (None, {}), overruled


def _floor_failed_pick(
    i: int, candidates: Iterable[str], obs: Mapping, winners: Mapping[str, Mapping[int, set[str]]]
) -> tuple[str | None, dict[str, dict]]:
    """At a size no candidate has a score on any device (every device that ran it saw the reference fail:
    oto.measurement.selection.floor_failed_winners), the kernel most devices' own races picked there, among
    those that passed on every device that measured them (then the one more devices measured, then the first
    id): the devices' GFLOPS do not combine into one ranking, their picks do. (None, {}): none passed."""
    ranked = []
    for k in sorted(candidates):
        per = {d: obs[d][(k, i)] for d in sorted(obs) if (k, i) in obs[d]}
        if per and not any(v["failed"] for v in per.values()) and all(v["gflops"] for v in per.values()):
            picked = sum(1 for d in winners if k in winners[d].get(i, set()))
            ranked.append((-picked, -len(per), k, per))
    if not ranked:
        return None, {}
    _, _, k, per = min(ranked, key=lambda r: r[:3])  # ids are unique: the views are never compared
    return k, per


def _row(i: int, k: str | None, per: Mapping[str, dict], roof: Mapping, picked: Mapping, tolerance: float):
    if k is None:
        return {"size_index": i, "winner": None, "score": None, "ci_low": None, "ci_high": None,
                "gflops": None, "ceiling_gflops": None, "pct_ceiling": None, "verdict": NOT_MEASURED,
                "devices": {}}  # fmt: skip
    score = geo(v["score"] for v in per.values())
    lows = [v["ci_low"] for v in per.values() if v["ci_low"]]
    highs = [v["ci_high"] for v in per.values() if v["ci_high"]]
    lo, hi = (min(lows) if lows else score), (max(highs) if highs else score)
    devices = {}
    for d, v in per.items():
        ceiling = float(roof[d][i])
        devices[d] = {
            "score": rounded(v["score"]),
            "ci_low": rounded(v["ci_low"]),
            "ci_high": rounded(v["ci_high"]),
            "gflops": rounded(v["gflops"]),
            "ceiling_gflops": rounded(ceiling),
            "pct_ceiling": rounded(100 * v["gflops"] / ceiling) if v["gflops"] else None,
            "measurements": v["measurements"],
            "source": v["source"],
            "picked_it": k in picked.get(d, {}).get(i, set()),  # its own finalize race picked this kernel
        }
    gflops = [v["gflops"] for v in per.values() if v["gflops"]]
    return {
        "size_index": i,
        "winner": k,
        "score": rounded(score),
        "ci_low": rounded(lo),
        "ci_high": rounded(hi),
        "gflops": rounded(float(np.median(gflops))) if gflops else None,
        # % of a ceiling is per device (under `devices`): devices have different ceilings.
        "ceiling_gflops": None,
        "pct_ceiling": None,
        # no score on any device: the reference failed where the kernel ran (_floor_failed_pick)
        "verdict": verdict(score, lo, hi, tolerance) if score is not None else FLOOR_FAILED,
        "n_devices": len(per),
        "devices": devices,
    }


def merged_rows(
    deck: LibraryDeck,
    contribs: Sequence[Contribution],
    profiles: Mapping[str, Mapping],
    tolerance: float,
    native: Mapping[int, str] | None = None,
) -> tuple[list[dict], dict[str, dict], dict[str, dict[int, set[str]]], dict]:
    """(rows, kernel params, each device's recomputed final winners, device observations). ``native``: deck
    size → upstream's own kernel for the GPU there (the native floor), which no candidate measured slower
    than it on some device outvotes."""
    obs, winners = _views(contribs), _final_winners(contribs)
    lib = Library.parse(deck.name)
    sizes = np.asarray([s[:4] for s in deck.sizes], dtype=float).reshape(-1, 4)
    roof = {d: roofline_gflops(profiles[d], lib.family, *sizes.T) for d in obs}
    references = {i: k for c in contribs for i, k in c.evidence.references.items()}
    shipped = set(references.values())
    native = native or {}
    upstream = frozenset(native.values()) - shipped
    params = {k: p for c in contribs for k, p in c.evidence.params.items()}
    rows = []
    for i in range(len(deck.sizes)):
        candidates = set().union(*(w.get(i, set()) for w in winners.values()))
        (k, per), overruled = _decide(i, candidates, obs, shipped, tolerance, upstream, references.get(i))
        if k is None and not overruled:  # no score anywhere: the reference failed where it ran
            k, per = _floor_failed_pick(i, candidates, obs, winners)
        spoof = references.get(i)
        spoof_failed = any((obs[d].get((spoof, i)) or {}).get("failed") for d in obs)
        fallback = k is None and bool(overruled) and spoof in params and not spoof_failed
        if fallback:  # every candidate overruled: the shipped kernel keeps the size, where it failed nowhere
            k = references[i]
            per = {d: obs[d][(k, i)] for d in sorted(obs) if (k, i) in obs[d] and obs[d][(k, i)]["score"]}
            k = k if per else None
        row = _row(i, k, per, roof, winners, tolerance)
        if overruled:
            row["overruled"] = overruled
        if fallback and k:
            row["kept_by_shipped_kernel"] = True
        elif k is not None and k == native.get(i) and k != references.get(i):
            # upstream's own kernel for the GPU keeps the size (navi31 and navi33 share kernels: it may be a
            # spoof kernel of another size)
            row["kept_by_native"] = True
        rows.append(row)
    groups = runtime_groups(deck.sizes, rows)
    kernels_at: dict[int, set[str]] = defaultdict(set)
    wanted = {i for g in groups.values() for i in g}
    for d in obs:
        for k, i in obs[d]:
            if i in wanted:
                kernels_at[i].add(k)
    for key, group in groups.items():  # what rocBLAS serves: one kernel per key (oto.measurement.dispatch)
        k = _served_kernel(group, kernels_at, references, obs, tolerance)
        for i in group:
            if k is not None and rows[i]["winner"] != k:
                per = {d: obs[d][(k, i)] for d in sorted(obs) if (obs[d].get((k, i)) or {}).get("score")}
                was = rows[i]["winner"]
                rows[i] = _row(i, k, per, roof, winners, tolerance)
                rows[i]["one_kernel_for"] = {"key": list(key), "sizes": list(group), "was": was}
    return rows, params, winners, obs


def runtime_groups(sizes: Sequence[Sequence[int]], rows: Sequence[Mapping]) -> dict[tuple, list[int]]:
    """The deck sizes rocBLAS serves one kernel (the same runtime key: oto.measurement.dispatch) whose merged
    rows have a winner with a score, two or more per key."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, s in enumerate(sizes):
        if rows[i].get("winner") and rows[i].get("score") is not None:
            groups[runtime_key(s)].append(i)
    return {k: g for k, g in groups.items() if len(g) > 1}


def _served_kernel(
    group: list[int],
    kernels_at: Mapping[int, set[str]],
    references: Mapping[int, str],
    obs: Mapping,
    tolerance: float,
) -> str | None:
    """The kernel a group of sizes takes: among the kernels with a score on some device at every size of
    the group that no device saw fail or measured slower than the spoof there, the best geomean over the
    sizes of its score (the geomean over the devices, as :func:`_decide` ranks a size's candidates); ties go
    to the lowest id. None: none."""
    best: tuple[float, str] | None = None
    for k in sorted(set.intersection(*(kernels_at[i] for i in group))):
        total = 0.0
        for i in group:
            per = {d: obs[d][(k, i)] for d in sorted(obs) if (k, i) in obs[d]}
            scored = [v["score"] for v in per.values() if v["score"]]
            # a device saw it fail, or measured it slower than the spoof: vetoed (not for being slower than
            # some other shipped kernel at one size: a group is served one kernel whatever the rows say)
            if not scored or overruled_by(k, i, per, obs, set(), tolerance, frozenset(), references.get(i)):
                break
            total += math.log(geo(scored))
        else:
            if best is None or total > best[0]:
                best = (total, k)
    return best[1] if best else None


def agreement(obs: Mapping[str, Mapping[tuple[str, int], dict]]) -> dict[str, Any]:
    """How well replicated measurements (same kernel and size on two or more devices) agree."""
    devices = sorted(obs)
    diffs, overlaps = [], []
    cells = 0
    keys = set().union(*(set(obs[d]) for d in devices)) if devices else set()
    for key in keys:
        there = [obs[d][key] for d in devices if key in obs[d] and obs[d][key]["score"]]
        if len(there) < 2:
            continue
        cells += 1
        for a, b in combinations(there, 2):
            diffs.append(abs(math.exp(abs(math.log(a["score"] / b["score"]))) - 1))
            if None not in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"]):
                overlaps.append(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])
    return {
        "replicated": cells,
        "pairs": len(diffs),
        "median_difference": rounded(float(np.median(diffs))) if diffs else None,
        "p90_difference": rounded(float(np.percentile(diffs, 90))) if diffs else None,
        "intervals_overlap": rounded(sum(overlaps) / len(overlaps)) if overlaps else None,
    }


def _same_winner(winners: Mapping[str, Mapping[int, set[str]]], n: int) -> dict[str, Any]:
    same = []
    finished = [d for d in winners if winners[d]]
    for i in range(n):
        picks = [frozenset(winners[d][i]) for d in finished if winners[d].get(i)]
        if len(picks) >= 2:
            same.append(len(set(picks)) == 1)
    return {"same_winner": rounded(sum(same) / len(same)) if same else None, "sizes_compared": len(same)}


def per_device(
    deck: LibraryDeck,
    contribs: Sequence[Contribution],
    profiles: Mapping[str, Mapping],
    devices: Iterable[str],
) -> dict[str, dict[str, Any]]:
    """Each device's own (recomputed) view of the library: what its finalize races found there."""
    lib = Library.parse(deck.name)
    sizes = np.asarray([s[:4] for s in deck.sizes], dtype=float).reshape(-1, 4)
    out = {}
    for d in sorted(devices):
        mine = [c for c in contribs if c.device == d]
        rows = [r for c in mine for r in (c.evidence.final or []) if r.get("winner")]
        # the realistic roofline, as the tuning run's report has it: the launch overhead counted
        # (oto.reporting.figures.realistic_roofline)
        ceilings = roofline_gflops(profiles[d], lib.family, *sizes.T)
        launch_us = (profiles[d].get("timing") or {}).get("launch_us")
        fpm = lib.family.flops_per_mac
        roof = [
            realistic_roofline(float(c), s, fpm, launch_us)[0] if launch_us and c > 0 else float(c)
            for c, s in zip(ceilings, deck.sizes, strict=True)
        ]
        pct = [100 * r["gflops"] / roof[r["size_index"]] for r in rows if r.get("gflops")]
        out[d] = {
            "finished": any(c.evidence.final for c in mine),
            "bundles": len(mine),
            "sizes_with_winner": len({r["size_index"] for r in rows}),
            "geomean_score": rounded(geo(r["score"] for r in rows)),
            "median_gflops": rounded(float(np.median([r["gflops"] for r in rows]))) if rows else None,
            "median_pct_roofline": rounded(float(np.median(pct))) if pct else None,
            "theoretical_gflops": rounded(family_peak_gflops(profiles[d], lib.family)),
        }
    return out


def merge_library(
    deck: LibraryDeck,
    contribs: Sequence[Contribution],
    profiles: Mapping[str, Mapping],
    tolerance: float,
    native: Mapping[int, str] | None = None,
) -> dict[str, Any] | None:
    """The merged final of one library (final.yaml format; per-device figures under ``devices``, overruled
    candidates under ``overruled``), or None when no device finished it. ``native``: as for
    :func:`merged_rows`."""
    finished = [c for c in contribs if c.evidence.final]
    if not finished:
        return None
    lib = Library.parse(deck.name)
    rows, params, winners, obs = merged_rows(deck, contribs, profiles, tolerance, native)
    summary = summarise(rows, Counter())
    provs = [(c.claimed or {}).get("provenance") or {} for c in finished]
    return {
        "library": deck.name,
        "family": lib.family.code,
        "pattern": lib.pattern,
        "provenance": {
            "numbers": provs[0].get("numbers"),
            "backend": sorted({str(p.get("backend")) for p in provs}),
            "merged_from": sorted({c.bundle for c in contribs}),
            "devices": sorted(obs),
            "recomputed_from": "each bundle's samples (finalize races and tuning generations)",
        },
        "generations": max(int((c.claimed or {}).get("generations") or 0) for c in finished),
        "converged": all(bool((c.claimed or {}).get("converged")) for c in finished),
        "convergence": {"converged": None, "reason": f"merged from {len(obs)} device(s)", "history": []},
        "tuning_summary": {},
        "sizes": deck.sizes,
        "per_size": rows,
        "kernels": {k: params[k] for k in sorted({r["winner"] for r in rows if r["winner"]})},
        "shipped_kernels": len({int(s[0]) for s in deck.shipped if s is not None}),
        "summary": summary,
        "verdict": library_verdict(summary, tolerance),
        "fleet": {
            "devices": per_device(deck, contribs, profiles, obs),
            "agreement": {**agreement(obs), **_same_winner(winners, len(deck.sizes))},
        },
    }
