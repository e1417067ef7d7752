"""Search-strategy benchmark on recorded Kernel Tuner spaces: oto's strategies vs Kernel Tuner's, one run.

    python bench/search_bench.py [--seeds 20] [--budget 400] [--kt STRAT,...] [--json OUT]

For every replay file in ../shared/reference/replay/ it runs oto's default strategy (and random search) with
``oto.search.replay_scorer`` and Kernel Tuner's strategies in its simulation mode (``tune_cache``) on the same
cache, seeds 0..S-1 each, and prints the mean fraction of the optimum after 25/50/100/200/400 evaluations and
the share of seeds that reached 95% and 99%. Evaluations are counted as Kernel Tuner counts them (unique
configurations of the space; the curves use recorded times for both sides). Needs the ``bench`` extra
(``pip install -e .[bench]``) for Kernel Tuner; without it only oto's rows are printed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small GP solves: threading only adds contention

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from oto.search.replay_scorer import CHECKPOINTS, run_seed, summarise  # noqa: E402
from oto.search.strategies import DEFAULT_STRATEGY  # noqa: E402
from oto.search.tuning_cache import load_cache

REPLAY = Path(__file__).resolve().parents[2] / "shared" / "reference" / "replay"
KT_DEFAULT = (
    "adaptive_tabu_greywolf",
    "hybrid_vndx",
    "genetic_algorithm",
    "simulated_annealing",
    "random_sample",
)


def _oto_seed(args):
    path, strategy, budget, seed = args
    return run_seed(load_cache(path), strategy, budget, seed)


def kt_curve(json_path: Path, strategy: str, budget: int, seed: int, keys, times, optimum) -> list[float]:
    from kernel_tuner.interface import tune_cache

    np.random.seed(seed)
    random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = tune_cache(
            str(json_path),
            strategy=strategy,
            strategy_options={"max_fevals": budget},
            verbose=False,
            quiet=True,
        )
    curve, seen, best = [], set(), np.inf
    for r in results:
        key = tuple(r[k] for k in keys)
        if key in seen:
            continue
        seen.add(key)
        t = times.get(key)
        if t is not None:
            best = min(best, t)
        curve.append(optimum / best)
    return curve[:budget]


def row(name: str, curves: list[list[float]], budget: int, seconds: float) -> dict:
    s = summarise(curves, budget)
    return {
        "strategy": name,
        **{f"@{c}": s[f"fraction_at_{c}"]["mean"] for c in CHECKPOINTS if c <= budget},
        "95%": s["share_reaching_95"],
        "99%": s["share_reaching_99"],
        "s/seed": seconds / max(len(curves), 1),
    }


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n### {title}\n")
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [r[c] if isinstance(r[c], str) else f"{r[c]:.3f}" for c in cols]
        print("| " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--oto", default=f"{DEFAULT_STRATEGY},random", help="oto strategies, comma-separated")
    ap.add_argument("--kt", default=",".join(KT_DEFAULT), help="Kernel Tuner strategies ('' for none)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", type=Path, help="write all curves here")
    args = ap.parse_args(argv)
    files = sorted(REPLAY.glob("*.json.gz"))
    if not files:
        print(f"no replay files under {REPLAY}", file=sys.stderr)
        return 2
    kt = [s for s in args.kt.split(",") if s]
    if kt:
        try:
            import kernel_tuner  # noqa: F401
        except ImportError:
            print("kernel_tuner not installed (pip install -e .[bench]): oto rows only", file=sys.stderr)
            kt = []
    out = {}
    tmp = Path(tempfile.mkdtemp(prefix="oto-search-bench-"))
    try:
        for path in files:
            cache = load_cache(path)
            keys = [p.values for p in cache.space.parameters]
            times = {tuple(v[i] for v, i in zip(keys, idx, strict=True)): t for idx, t in cache.times.items()}
            rows, curves_out = [], {}
            for strat in [s for s in args.oto.split(",") if s]:
                t0 = time.time()
                with ProcessPoolExecutor(args.jobs) as pool:
                    curves = list(
                        pool.map(_oto_seed, [(path, strat, args.budget, s) for s in range(args.seeds)])
                    )
                rows.append(row(f"oto {strat}", curves, args.budget, time.time() - t0))
                curves_out[f"oto:{strat}"] = curves
            if kt:
                plain = tmp / path.name.removesuffix(".gz")
                with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst)  # Kernel Tuner reads plain .json caches only
                names = [p.name for p in cache.space.parameters]
                for strat in kt:
                    t0 = time.time()
                    curves = [
                        kt_curve(plain, strat, args.budget, s, names, times, cache.optimum)
                        for s in range(args.seeds)
                    ]
                    rows.append(row(f"kt {strat}", curves, args.budget, time.time() - t0))
                    curves_out[f"kt:{strat}"] = curves
            title = f"{path.name}: {cache.space.size()} configs, {args.seeds} seeds, budget {args.budget}"
            print_table(title, rows)
            out[path.name] = {"optimum": cache.optimum, "rows": rows, "curves": curves_out}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
