"""How many measurements a chip-constant fit needs: the learning curve of ``oto calibrate --chip``.

    python bench/chip_learning_curve.py --logic DIR --profile arch_profiles/X.yaml [--rows 100,300,1000,3000]
        [--seeds 0,1,2] [--campaigns] [--json OUT]

The files are split by ``calibration.chip_split`` (docs/simulator.md, "Judging a chip fit"). For each N, the
chip constants are fitted (physics held, as ``oto calibrate --chip --rows N --seed S --per-file 1000000``)
on N rows drawn uniformly from the fit half with each seed, and the fitted profile is judged on the held-back
half: rows within ±25% and the efficiency rank correlation (``calibration.fidelity``, the figures of
``bench/sim_fidelity.py``). The same for the profile as given ("before") and for the full fit (``--per-file
250``, the fit half's rows, at most 250 per file). The *gain* of a fit is its held-back within-±25% share
minus the before figure's; the bench names the fewest rows whose median gain over the seeds reaches 90% of
the full fit's gain (the number ``oto calibrate --bundles`` quotes when a night gave too few). Numbers are
simulated, against recorded real GFLOPS.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from oto.hardware.profile import load_profile  # noqa: E402
from oto.hardware.simulated.calibration import (  # noqa: E402
    at_bounds,
    chip_knobs,
    chip_split,
    fidelity,
    fit,
    load_recorded,
    read_flop_counts,
    rows_frame,
    sample_rows,
)
from oto.hardware.simulated.performance import MODEL_VERSION, Physics, SimGPU, physics_file  # noqa: E402

GAIN_SHARE = 0.9  # the fewest rows reaching this share of the full fit's gain


def judge(profile: dict, physics: Physics, files: list) -> dict:
    o = fidelity(rows_frame(SimGPU(profile, physics=physics), files, ranks=False))["overall"]
    return {"within_25pct": o["within_25pct"], "efficiency_spearman": o["efficiency_spearman"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logic", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--rows", default="100,300,1000,3000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument(
        "--campaigns", action="store_true", help="fit each campaign's board (as --chip --campaigns)"
    )
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    profile = load_profile(args.profile)
    physics = Physics.load(physics_file(profile))
    files = load_recorded(args.logic)
    read_flop_counts(files, profile)
    fit_half, held = chip_split(files)
    total = sum(len(f.winner) for f in fit_half)

    def run(sample: list, per_file: int) -> dict:
        knobs = chip_knobs(sample, profile, campaigns=args.campaigns)
        res = fit(sample, profile, physics, knobs=knobs, iterations=args.iterations, per_file=per_file)
        return {**judge(res.profile, physics, held), "rows": res.rows, "converged": res.converged,
                "at_bound": sorted(at_bounds(res.values, knobs)), "values": res.values}  # fmt: skip

    out = {"model_version": MODEL_VERSION, "profile": args.profile, "logic": str(args.logic),
           "fit_rows": total, "held_back_rows": sum(len(f.winner) for f in held)}  # fmt: skip
    out["before"] = judge(profile, physics, held)
    print(f"learning curve on {args.profile} (model {MODEL_VERSION}): fit half {total} rows, held back "
          f"{out['held_back_rows']} rows; before: {out['before']['within_25pct'] * 100:.1f}% within 25%, "
          f"rho {out['before']['efficiency_spearman']:.3f}", flush=True)  # fmt: skip
    out["full"] = run(fit_half, 250)
    full_gain = out["full"]["within_25pct"] - out["before"]["within_25pct"]
    full = out["full"]
    print(f"full fit ({full['rows']} rows): {full['within_25pct'] * 100:.1f}%, rho "
          f"{full['efficiency_spearman']:.3f}, gain {full_gain * 100:+.1f} points", flush=True)  # fmt: skip
    out["curve"] = {}
    print("\n| rows | seed | held back within 25% | eff rho | gain (points) | share of the full gain |")
    print("|---|---|---|---|---|---|")
    fewest = None
    for n in (int(x) for x in args.rows.split(",")):
        runs = []
        for seed in (int(x) for x in args.seeds.split(",")):
            r = run(sample_rows(fit_half, n, seed), 1_000_000)
            r["gain"] = r["within_25pct"] - out["before"]["within_25pct"]
            runs.append(r)
            share = r["gain"] / full_gain if full_gain else float("nan")
            print(f"| {n} | {seed} | {r['within_25pct'] * 100:.1f}% | {r['efficiency_spearman']:.3f} | "
                  f"{r['gain'] * 100:+.1f} | {share:.2f} |", flush=True)  # fmt: skip
        median_gain = float(np.median([r["gain"] for r in runs]))
        out["curve"][n] = {"runs": runs, "median_gain": median_gain}
        if fewest is None and full_gain > 0 and median_gain >= GAIN_SHARE * full_gain:
            fewest = n
    out["fewest_rows_for_90pct_of_the_gain"] = fewest
    print(f"\nfewest rows whose median gain reaches {GAIN_SHARE:.0%} of the full fit's: {fewest}")
    out["wall_s"] = round(time.time() - t0, 1)
    print(f"{out['wall_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
