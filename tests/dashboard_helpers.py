"""A small, hand-made results/<arch>/ tree in the stage contracts (docs/architecture.md), for the dashboard
and report tests: two DB libraries, one finished and one mid-run, with known figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from oto.measurement.scoring import SAMPLE_COLUMNS

PEAK = 100.8
TOL = 0.02
CONFIG = {"arch": "gfx90c", "seed": 7, "max_generations": 3, "benchmark": {"tie_tolerance": TOL}}
SIZES = [[64, 64, 1, 64], [128, 128, 1, 128], [256, 256, 1, 256], [512, 512, 1, 512]]
PROV = {"backend": "sim", "numbers": "simulated"}


def _w(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def per_size(scores, gflops, ceilings, gen):
    rows = []
    for i, (s, g, c) in enumerate(zip(scores, gflops, ceilings, strict=True)):
        verdict = "win" if s >= 1 + TOL else ("loss" if s <= 1 - TOL else "tie")
        rows.append(
            {
                "size_index": i,
                "winner": f"k{i}" if s else None,
                "score": s,
                "ci_low": s - 0.01 if s else None,
                "ci_high": s + 0.01 if s else None,
                "gflops": g,
                "ceiling_gflops": c,
                "pct_ceiling": 100 * g / c if g else None,
                "verdict": verdict,
                "generation": gen,
            }
        )
    return rows


def samples(n_ref: int, n_cand: int, drift_peak: float, proposer_ids: list[str]) -> pd.DataFrame:
    rows, seq = [], 0
    for r in range(n_ref):
        t = 100 * (1 + drift_peak * np.sin(np.pi * r / max(1, n_ref - 1)))
        rows.append((seq, "kref", "reference", 0, 64, 64, 1, 64, r, t, "ok", "", "simulated"))
        seq += 1
        for c in range(n_cand):
            kid = proposer_ids[c % len(proposer_ids)]
            status = "timeout" if (r == 0 and c == 0) else "ok"
            rows.append((seq, kid, "candidate", 0, 64, 64, 1, 64, r, 80.0, status, "", "simulated"))
            seq += 1
    cols = SAMPLE_COLUMNS
    return pd.DataFrame(rows, columns=cols)


def write_generation(lib_dir: Path, gen: int, scores, gflops, failures, converged=False, frozen=False):
    g = lib_dir / f"gen{gen}"
    ceilings = [10.0, 20.0, 40.0, PEAK]
    kernels = [
        {"id": "kref", "params": {}, "roles": ["reference"], "proposer": "shipped"},
        {"id": "ksym", "params": {}, "roles": ["candidate"], "proposer": "symbolic"},
        {"id": "kagt", "params": {}, "roles": ["candidate"], "proposer": "agent"},
    ]
    _w(
        g / "candidates.yaml",
        {
            "library": lib_dir.name,
            "generation": gen,
            "frozen": frozen,
            "sizes": SIZES,
            "kernels": kernels,
            "rejected": [
                {"id": "kbad", "params": {}, "proposer": "agent", "class": "illegal", "reason": "LDS"}
            ],
        },
    )
    _w(g / "build.yaml", {"kernels": [{"id": k["id"], "status": "ok"} for k in kernels], "provenance": PROV})
    samples(60, 3, 0.2, ["ksym", "kagt", "ksym"]).to_csv(g / "samples.csv", index=False)
    rows = per_size(scores, gflops, ceilings, gen)
    geo = float(np.exp(np.mean(np.log([s for s in scores if s]))))
    _w(
        g / "selection.yaml",
        {
            "library": lib_dir.name,
            "generation": gen,
            "frozen": frozen,
            "provenance": PROV,
            "sizes": SIZES,
            "per_size": rows,
            "kernels": {f"k{i}": {} for i in range(4)},
            "summary": {
                "geomean_score": geo,
                "pct_ceiling_median": float(np.median([r["pct_ceiling"] for r in rows])),
                "wins": sum(r["verdict"] == "win" for r in rows),
                "ties": sum(r["verdict"] == "tie" for r in rows),
                "losses": sum(r["verdict"] == "loss" for r in rows),
                "failures": failures,
            },
            "convergence": {
                "converged": converged,
                "reason": "converged" if converged else "still improving",
                "history": [geo],
            },
        },
    )


def make_results(root: Path, finished: bool = True) -> Path:
    """results/gfx90c with NN finished (final.yaml) and NT at gen1 of 3."""
    res = root / "results" / "gfx90c"
    _w(res / "ceilings.yaml", {"arch": "gfx90c", "families": {"DB": {"theoretical_gflops": PEAK}}})
    _w(
        res / "deck.yaml",
        {
            "provenance": {
                "deck_source": {"kind": "manifest"},
                "deck_of": "gfx900",
                "libraries_in_source": 46,
                "stats_of_source": {"unique_sizes": 23745, "solutions": 3066},
            },
            "libraries": {
                "Cijk_Ailk_Bljk_DB": {"family": "DB", "pattern": "NN", "solutions": 4, "sizes": 8},
                "Cijk_Ailk_Bjlk_DB": {"family": "DB", "pattern": "NT", "solutions": 4, "sizes": 8},
            },
        },
    )
    nn, nt = res / "Cijk_Ailk_Bljk_DB", res / "Cijk_Ailk_Bjlk_DB"
    write_generation(nn, 0, [1.5, 1.2, 1.0, 0.9], [5.0, 12.0, 20.0, 60.0], {"illegal": 1, "timeout": 1})
    write_generation(nn, 1, [1.6, 1.3, 1.01, 0.95], [6.0, 13.0, 22.0, 70.0], {"illegal": 2, "timeout": 2})
    write_generation(
        nn,
        2,
        [1.6, 1.3, 1.01, 0.95],
        [6.0, 13.0, 22.0, 70.0],
        {"illegal": 2, "timeout": 2},
        converged=True,
        frozen=True,
    )
    write_generation(nt, 0, [1.1, 1.0, 1.3, 1.4], [4.0, 9.0, 30.0, 80.0], {"illegal": 1})
    write_generation(nt, 1, [1.2, 1.05, 1.3, 1.5], [4.5, 10.0, 31.0, 85.0], {"illegal": 3, "crash": 1})
    (nt / "gen2").mkdir()  # gen2 in progress: no selection yet
    if finished:
        rows = per_size([1.7, 1.25, 1.0, 0.97], [6.5, 12.5, 21.0, 72.0], [10.0, 20.0, 40.0, PEAK], 2)
        # the second floor, the best shipped kernel: the last size kept it
        for r, ratio, v in zip(rows, [1.2, 1.0, 1.0, 1.0], ["win", "tie", "tie", "tie"], strict=True):
            r.update(vs_best_shipped=ratio, verdict_best_shipped=v, kept_by_best_shipped=r["size_index"] == 3)
        _w(
            nn / "final.yaml",
            {
                "library": nn.name,
                "family": "DB",
                "pattern": "NN",
                "provenance": PROV,
                "generations": 3,
                "converged": True,
                "convergence": {"converged": True, "reason": "converged", "history": [1.1, 1.2]},
                "sizes": SIZES,
                "per_size": rows,
                "kernels": {"k0": {}, "k1": {}, "k2": {}},
                "shipped_kernels": 2,
                "summary": {
                    "geomean_score": float(np.exp(np.mean(np.log([1.7, 1.25, 1.0, 0.97])))),
                    "pct_ceiling_median": 60.0,
                    "wins": 2,
                    "ties": 1,
                    "losses": 1,
                    "failures": {"illegal": 2, "timeout": 2},
                },
            },
        )
    return res
