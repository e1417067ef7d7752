"""Dashboard benchmark: refreshing the page of a full-deck run (46 libraries × 8 generations).

Builds a synthetic results tree with the shapes of a real run (per generation: 64 tuning sizes, 12
candidates + references, 5 repetitions → ~4,500 samples; selections with 48 observations; finals on every
deck size) and times ``write_dashboard``: cold (no cache), warm (nothing new) and after one more
generation — the refresh every select job does. Target: a refresh after one generation ≤ 10 s, so the
dashboard never holds up the tuning.

    python bench/dashboard_bench.py [--libraries N] [--generations N]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest  # noqa: E402
from oto.files import write_yaml  # noqa: E402
from oto.hardware.ceilings import ceilings_document  # noqa: E402
from oto.hardware.profile import load_profile  # noqa: E402
from oto.measurement.scoring import SAMPLE_COLUMNS  # noqa: E402
from oto.reporting.dashboard import write_dashboard  # noqa: E402

TUNING, CANDS, REPS = 64, 12, 5
PARAMS = {
    "ThreadTile": [4, 4],
    "WorkGroup": [16, 16, 1],
    "DepthU": 16,
    "VectorWidth": 2,
    "PrefetchGlobalRead": 1,
}


def samples(rng: np.random.Generator) -> pd.DataFrame:
    n = TUNING * (CANDS + 1) * REPS
    size = np.repeat(np.arange(TUNING), (CANDS + 1) * REPS)
    kern = np.tile(np.repeat(np.arange(CANDS + 1), REPS), TUNING)
    return pd.DataFrame(
        {
            "seq": np.arange(n),
            "kernel_id": [f"k{k:012d}" for k in kern],
            "role": np.where(kern == 0, "reference", "candidate"),
            "size_index": size,
            "m": 256,
            "n": 256,
            "batch": 1,
            "k": 256,
            "rep": np.tile(np.arange(REPS), n // REPS),
            "time_us": 100 * (1 + 0.2 * np.sin(np.arange(n) / 400)) * rng.uniform(0.7, 1.1, n),
            "status": np.where(rng.random(n) < 0.002, "timeout", "ok"),
            "reason": "",
            "source": "simulated",
        },
        columns=SAMPLE_COLUMNS,
    )


def per_size(rng, n, gen):
    s = rng.uniform(0.9, 1.6, n)
    g = rng.uniform(50, 900, n)
    return [
        {
            "size_index": i,
            "winner": f"k{1 + i % CANDS:012d}",
            "score": float(s[i]),
            "ci_low": float(s[i] - 0.02),
            "ci_high": float(s[i] + 0.02),
            "gflops": float(g[i]),
            "ceiling_gflops": 1612.8,
            "pct_ceiling": float(100 * g[i] / 1612.8),
            "verdict": "win" if s[i] > 1.02 else "tie",
            "generation": gen,
        }
        for i in range(n)
    ]


def write_generation(res: Path, name: str, gen: int, rng) -> None:
    d = res / name / f"gen{gen}"
    kernels = [
        {
            "id": f"k{k:012d}",
            "params": PARAMS,
            "roles": ["reference" if k == 0 else "candidate"],
            "proposer": "shipped" if k == 0 else ("agent" if k % 3 == 0 else "symbolic"),
        }
        for k in range(CANDS + 1)
    ]
    sizes = [[256, 256, 1, 256]] * TUNING
    write_yaml(
        d / "candidates.yaml",
        {
            "library": name,
            "generation": gen,
            "sizes": sizes,
            "kernels": kernels,
            "rejected": [{"id": "kx", "params": PARAMS, "class": "illegal"}],
        },
    )
    write_yaml(d / "build.yaml", {"kernels": [{"id": k["id"], "status": "ok"} for k in kernels]})
    samples(rng).to_csv(d / "samples.csv", index=False)
    write_yaml(
        d / "selection.yaml",
        {
            "library": name,
            "generation": gen,
            "frozen": False,
            "provenance": {"numbers": "simulated", "backend": "sim"},
            "sizes": sizes,
            "per_size": per_size(rng, TUNING, gen),
            "kernels": {k["id"]: PARAMS for k in kernels[1:]},
            "summary": {
                "geomean_score": 1.2,
                "pct_ceiling_median": 30.0,
                "wins": 40,
                "ties": 24,
                "losses": 0,
                "failures": {"timeout": gen + 1, "illegal": gen},
            },
            "convergence": {"converged": False, "reason": "still improving", "history": [1.1] * (gen + 1)},
            "observations": [
                {"id": f"o{i}", "params": PARAMS, "score": 1.1, "sizes_won": 1, "failure": ""}
                for i in range(48)
            ],
        },
    )


def build_tree(root: Path, n_libs: int, n_gens: int) -> tuple[Path, list[str]]:
    rng = np.random.default_rng(0)
    deck = read_manifest(SHIPPED_MANIFEST)
    names = list(deck.libraries)[:n_libs]
    res = root / "results" / "gfx90c"
    write_yaml(res / "ceilings.yaml", ceilings_document(load_profile(REPO / "arch_profiles" / "gfx90c.yaml")))
    libs = {
        n: {
            "family": deck.libraries[n].family,
            "pattern": deck.libraries[n].pattern,
            "solutions": len(deck.libraries[n].solutions),
            "sizes": len(deck.libraries[n].sizes),
        }
        for n in names
    }
    write_yaml(
        res / "deck.yaml",
        {
            "provenance": {"deck_of": "gfx900", "libraries_in_source": 46, "stats_of_source": deck.stats()},
            "libraries": libs,
        },
    )
    for name in names:
        for gen in range(n_gens):
            write_generation(res, name, gen, rng)
    return res, names


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--libraries", type=int, default=46)
    ap.add_argument("--generations", type=int, default=8)
    args = ap.parse_args()
    config = {
        "arch": "gfx90c",
        "seed": 1,
        "max_generations": args.generations + 1,
        "benchmark": {"tie_tolerance": 0.02},
    }
    with tempfile.TemporaryDirectory() as tmp:
        res, names = build_tree(Path(tmp), args.libraries, args.generations)
        rows = [("cold (no cache)", timed(lambda: write_dashboard(res, config)))]
        rows.append(("warm (nothing new)", timed(lambda: write_dashboard(res, config))))
        write_generation(res, names[0], args.generations, np.random.default_rng(1))
        rows.append(("after one more generation", timed(lambda: write_dashboard(res, config))))
        size = sum(
            p.stat().st_size for p in (res / "dashboard").rglob("*") if p.is_file() and "cache" not in p.parts
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"dashboard refresh, {args.libraries} libraries × {args.generations} generations "
        f"({args.libraries * args.generations} generations of ~{TUNING * (CANDS + 1) * REPS:,} samples)"
    )
    print(f"{'scenario':32s} {'wall s':>8s}  target")
    for name, wall in rows:
        print(f"{name:32s} {wall:8.2f}  {'≤ 10 s' if 'one more' in name else ''}")
    print(f"page + plots + data.json: {size / 1e6:.2f} MB; peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
