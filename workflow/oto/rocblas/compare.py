"""compare: a paired, interleaved A/B of library installations through rocBLAS's own client.

The arms (:class:`oto.rocblas.clients.Arm`: the tuned library, the stock spoof, the upstream path) are
timed size by size in the same sweeps: each repetition visits every size in a freshly permuted order, and at
each size runs every arm back to back in a freshly permuted order (as Tensile's client runs every solution
of a problem back to back), so each arm's time at a size is taken seconds from the others'. The samples are
the tuning races' own (``oto.measurement.scoring`` columns: an arm is a kernel, the baseline arm the
reference) and are scored by the races' own statistics (:func:`oto.measurement.scoring.score_samples`): the
drift is estimated from the baseline's timeline and every sample brought to the batch's median state, and a
size's speed-up is the median ratio baseline time / arm time with its bootstrap interval widened to a robust
t-interval. A call that crashes, hangs or prints nothing readable is a failed sample of its arm and size
(with the reason); it costs nothing else.

Per family (:func:`family_summary`): how many sizes, the median speed-up with its interval
(:func:`oto.measurement.scoring.median_cis` over the sizes), the geometric mean, the 10th and 90th
percentiles, wins/ties/losses (:func:`oto.measurement.selection.verdict`), and every regression: a size the
verdict calls a loss, its speed-up below 1 by more than the tie tolerance and its whole interval below 1. (A
whole interval below 1 alone is no regression: with hundreds of tied sizes a 95% interval misses 1 on a few
by chance, as the gfx1103 demo showed with the same kernel in both arms at 0.991x.) The arms are timed, not
validated: a size where the baseline's kernel gave wrong results in finalize's race is left out of the
figures and listed (``baseline_failed``), as no speed-up over a wrong answer counts. A baseline's own failed
calls (a crash, a hang) are listed too (``baseline_calls_failed``, :func:`failed_calls`): its speed-up
figures cannot show them, and the spoof is what hangs some RDNA3 APUs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from oto.gemm import Library, gemm_flops
from oto.measurement.scoring import SAMPLE_COLUMNS, median_cis, score_samples
from oto.measurement.selection import geomean, verdict
from oto.rocblas.clients import Arm, ClientRunner

# a client result's status as a sample status (scoring's classes)
_SAMPLE_STATUS = {"ok": "ok", "timeout": "timeout", "too_large": "too_large", "gpu_reset": "gpu_reset"}


def interleaved_schedule(
    n_sizes: int, arms: Sequence[str], repetitions: int, seed: int
) -> list[tuple[int, int, str]]:
    """(repetition, size index, arm) in the order to run them (see the module doc)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(int(repetitions)):
        for i in rng.permutation(n_sizes):
            for a in rng.permutation(len(arms)):
                out.append((r, int(i), arms[int(a)]))
    return out


def run_compare(
    runner: ClientRunner,
    arms: Sequence[Arm],
    library: str,
    sizes: Sequence[Sequence[int]],
    repetitions: int,
    seed: int,
) -> pd.DataFrame:
    """The interleaved calls of every arm at every size, as samples (see the module doc). Columns: scoring's
    sample columns (``kernel_id`` the arm, ``role`` empty until scored), ``numbers`` and ``kernel`` (the
    kernel the arm ran there)."""
    by_name = {a.name: a for a in arms}
    rows = []
    schedule = interleaved_schedule(len(sizes), list(by_name), repetitions, seed)
    calls = [(by_name[name], library, tuple(int(x) for x in sizes[i][:4])) for _, i, name in schedule]
    results = runner.run_calls(calls, verify=False)  # type: ignore[arg-type]
    for seq, ((rep, i, name), (_, _, size), res) in enumerate(zip(schedule, calls, results, strict=True)):
        status = _SAMPLE_STATUS.get(res.status, "crash")
        ok = status == "ok" and math.isfinite(res.time_us) and res.time_us > 0
        reason = res.reason if res.status != "ok" else ("" if ok else "the client reported no time")
        rows.append({
            "seq": seq, "kernel_id": name, "role": "", "size_index": i, "m": size[0], "n": size[1],
            "batch": size[2], "k": size[3], "rep": rep, "time_us": res.time_us if ok else math.nan,
            "status": status if ok or status != "ok" else "crash", "reason": reason, "source": res.numbers,
            "numbers": res.numbers, "kernel": res.kernel_id,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=[*SAMPLE_COLUMNS, "numbers", "kernel"])


def compare_scores(
    samples: pd.DataFrame,
    library: str,
    sizes: Sequence[Sequence[int]],
    baseline: str,
    bootstrap: int = 400,
    seed: int = 0,
) -> pd.DataFrame:
    """Every other arm's speed-up over ``baseline`` per size (scoring's columns: ``kernel_id`` the arm,
    ``score`` baseline time / arm time at the batch's median drift state, ``ci_low``..``ci_high``)."""
    s = samples.copy()
    s["role"] = np.where(s["kernel_id"] == baseline, "reference", "candidate")
    fam = Library.parse(library).family
    flops = {i: gemm_flops(fam, *(int(x) for x in sz[:4])) for i, sz in enumerate(sizes)}
    scores = score_samples(s, flops, bootstrap, seed)
    return scores[scores["kernel_id"] != baseline].reset_index(drop=True)


def family_summary(
    scores: Mapping[str, pd.DataFrame],
    arm: str,
    tie_tolerance: float = 0.02,
    bootstrap: int = 400,
    seed: int = 0,
    baseline_wrong: Mapping[str, Mapping[int, str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per family, ``arm``'s speed-up distribution over the sizes of its libraries (``scores``: library ->
    :func:`compare_scores` rows) and every regression (see the module doc). ``baseline_wrong``: library →
    {size: why} where the baseline's kernel is known to give wrong results; those sizes are left out of the
    figures and listed as ``baseline_failed``."""
    by_family: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for library, table in scores.items():
        fam = Library.parse(library).family.code
        for row in table[table["kernel_id"] == arm].to_dict("records"):
            by_family.setdefault(fam, []).append((library, row))
    wrong = baseline_wrong or {}
    out: dict[str, dict[str, Any]] = {}
    rng = np.random.default_rng(seed)
    for fam, entries in sorted(by_family.items()):
        left_out = [(lib, r) for lib, r in entries if int(r["size_index"]) in wrong.get(lib, {})]
        entries = [(lib, r) for lib, r in entries if int(r["size_index"]) not in wrong.get(lib, {})]
        ok = [(lib, r) for lib, r in entries if r["status"] == "ok" and np.isfinite(r["score"])]
        failed = [
            {"library": lib, "size_index": int(r["size_index"]), "status": r["status"], "reason": r["reason"]}
            for lib, r in entries
            if r["status"] != "ok" or not np.isfinite(r["score"])
        ]
        values = np.array([r["score"] for _, r in ok], dtype=float)
        verdicts = [verdict(r["score"], r["ci_low"], r["ci_high"], tie_tolerance) for _, r in ok]
        lo, hi = median_cis([values], rng, bootstrap)[0] if len(values) else (math.nan, math.nan)
        regressions = [
            {"library": lib, "size_index": int(r["size_index"]), "speedup": round(float(r["score"]), 4),
             "ci_low": round(float(r["ci_low"]), 4), "ci_high": round(float(r["ci_high"]), 4)}
            for (lib, r), v in zip(ok, verdicts, strict=True)
            if v == "loss"
        ]  # fmt: skip
        out[fam] = {
            "sizes": len(entries) + len(left_out),
            "measured": len(ok),
            "median_speedup": round(float(np.median(values)), 4) if len(values) else None,
            "median_ci": [round(float(lo), 4), round(float(hi), 4)] if len(values) > 1 else None,
            "geomean_speedup": round(geomean(values.tolist()), 4) if len(values) else None,
            "p10": round(float(np.percentile(values, 10)), 4) if len(values) else None,
            "p90": round(float(np.percentile(values, 90)), 4) if len(values) else None,
            "wins": verdicts.count("win"),
            "ties": verdicts.count("tie"),
            "losses": verdicts.count("loss"),
            "regressions": regressions,
            "failed": failed,
            "baseline_failed": [
                {"library": lib, "size_index": (i := int(r["size_index"])), "reason": wrong[lib][i]}
                for lib, r in left_out
            ],
        }
    return out


def tally(counts: Mapping[str, int]) -> str:
    """Counts by kind, as the reports list them: "crash 1, timeout 2"."""
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))


def tuned_failures_note(failed: Sequence[Mapping[str, Any]], where: str = "") -> str:
    """The sizes of a family where the tuned library's own calls failed (compare's ``failed``), as the
    acceptance report and the upstream kit's PR.md say them; ``where`` names the sizes where a report can."""
    kinds = tally(Counter(str(f["status"]) for f in failed))
    return (
        f"{len(failed)} size(s) where the tuned library's calls failed or did not run "
        f"({kinds}{': ' + where if where else ''}); the figures leave them out"
    )


def failed_calls(samples: pd.DataFrame, arm: str) -> dict[str, list[dict[str, Any]]]:
    """Per family, the calls of ``arm`` that failed (crash, hang, no readable time), one entry per library,
    size and status with their count and first reason: a baseline's own failures, which its speed-up figures
    cannot show (the spoof hangs some RDNA3 APUs: ROCm/rocm-libraries#6320)."""
    bad = samples[(samples["kernel_id"] == arm) & (samples["status"] != "ok")]
    out: dict[str, list[dict[str, Any]]] = {}
    for (library, size, status), group in bad.groupby(["library", "size_index", "status"], sort=True):
        fam = Library.parse(str(library)).family.code
        out.setdefault(fam, []).append(
            {"library": str(library), "size_index": int(size), "status": str(status), "calls": len(group),
             "reason": str(group["reason"].iloc[0])}
        )  # fmt: skip
    return out


def compare_document(
    summaries: Mapping[str, Mapping[str, Any]], arm: str, samples: pd.DataFrame, client: Mapping[str, Any]
) -> dict[str, Any]:
    """compare's results as one document (``compare.yaml``): the kind of numbers (from the samples), the
    client, and ``arm``'s :func:`family_summary` against each baseline (``summaries``: baseline -> it)."""
    numbers = sorted(set(samples["numbers"])) if len(samples) else [str(client.get("numbers", "unknown"))]
    return {
        "numbers": numbers[0] if len(numbers) == 1 else "+".join(numbers),
        "client": dict(client),
        "arm": arm,
        "against": {k: dict(v) for k, v in summaries.items()},
    }
