"""How well the simulated GPU agrees with real hardware: recorded GFLOPS of shipped logic files.

    python bench/sim_fidelity.py --logic DIR --profile arch_profiles/X.yaml [--json OUT] [--physics FILE]

Every exact row ``[[M, N, batch, K, ...], [solution, GFLOPS]]`` of a shipped Tensile logic file is what the
solution that won that size measured on the real GPU the file was tuned for. The benchmark simulates every
row's winner (and every other solution of its file, for the ranks) on the arch profile and prints, per
family and overall, separately for the rows of the files the physics was fitted on (``fit``: the file names
``oto calibrate`` recorded in the physics file) and for every other file (``held back``: never fitted):

* ``within 25%``: share of rows whose simulated GFLOPS are within 0.75-1.25x the recorded ones;
* ``median ratio`` and its IQR: simulated / recorded GFLOPS;
* ``eff rho``: Spearman rank correlation of the % of peak, simulated vs recorded, on rows of >= 1 GFLOP (the
  size dependence alone would give a high correlation of raw GFLOPS over 13 decades of work);
* ``winner pct``: the shipped winner's rank among its file's solutions that can run the size (their
  AssertElementMultiple hold) under the simulator, as the share of those rivals simulated faster (0 = first);
  median over rows, and the share of rows where it is first and in the top 10%.

GFLOPS use oto's flop count (8 per complex MAC); the recorded complex GFLOPS (Tensile's client counts 2) are
converted through the launch time they imply (``oto.hardware.simulated.calibration.recorded_time_us``).

Every figure is printed twice: **raw** (the simulator as shipped: the profile's chip) and
**campaign-adjusted** (rows of the later measurement campaign, told apart by their winners' Tensile
generation, simulated at that campaign's operating point as ``oto calibrate`` fitted it on the fit split:
``calibration.CAMPAIGNS``, docs/simulator.md; only for the folder the physics was fitted on). Ranks compare
solutions at one size and are the same in both. Each campaign's rows are also reported on their own, raw.
Targets (issue #15, held-back vega10 files): >= 75% within 25%, eff rho >= 0.7, winner pct median <= 5%, every
family's median ratio within 0.85-1.15. The numbers are simulated against recorded real measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from oto.hardware.profile import load_profile  # noqa: E402
from oto.hardware.simulated.calibration import (  # noqa: E402
    fidelity,
    figures,
    load_campaigns,
    load_recorded,
    rows_frame,
)
from oto.hardware.simulated.performance import MODEL_VERSION, PHYSICS_FILE, Physics, SimGPU  # noqa: E402

TARGETS = {"within_25pct": 0.75, "efficiency_spearman": 0.7, "winner_rank_percentile_median": 5.0}
FAMILY_MEDIAN = (0.85, 1.15)


def _fmt(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(title: str, fid: dict) -> str:
    lines = [
        f"### {title}",
        "",
        "| family | rows | within 25% | median ratio (IQR) | eff rho (rows >= 1 GFLOP) | winner pct median | "
        "winner first | winner top 10% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, f in [*fid["families"].items(), ("**overall**", fid["overall"])]:
        lines.append(
            f"| {name} | {f['rows']} | {_fmt(f['within_25pct'] * 100, '.1f')}% | "
            f"{_fmt(f['median_ratio'], '.3f')} "
            f"({_fmt(f['ratio_q25'], '.2f')}-{_fmt(f['ratio_q75'], '.2f')}) | "
            f"{_fmt(f['efficiency_spearman'], '.3f')} ({f['efficiency_rows']}) | "
            f"{_fmt(f.get('winner_rank_percentile_median'), '.1f')}% | "
            f"{_fmt(f.get('winner_first_share', math.nan) * 100, '.1f')}% | "
            f"{_fmt(f.get('winner_top10pct_share', math.nan) * 100, '.1f')}% |"
        )
    return "\n".join(lines)


def verdict(fid: dict) -> list[str]:
    """One line per target of issue #15."""
    o = fid["overall"]
    out = [
        f"within 25%: {o['within_25pct'] * 100:.1f}% (target >= 75%): "
        + ("met" if o["within_25pct"] >= TARGETS["within_25pct"] else "NOT met"),
        f"efficiency rank correlation: {o['efficiency_spearman']:.3f} (target >= 0.7): "
        + ("met" if o["efficiency_spearman"] >= TARGETS["efficiency_spearman"] else "NOT met"),
        f"winner's median rank percentile: {o['winner_rank_percentile_median']:.1f}% (target <= 5%): "
        + (
            "met"
            if o["winner_rank_percentile_median"] <= TARGETS["winner_rank_percentile_median"]
            else "NOT met"
        ),
    ]
    lo, hi = FAMILY_MEDIAN
    off = {k: f["median_ratio"] for k, f in fid["families"].items() if not lo <= f["median_ratio"] <= hi}
    out.append(
        "every family's median ratio in 0.85-1.15: "
        + ("met" if not off else "NOT met: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(off.items())))
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logic", required=True, help="folder of shipped logic files")
    ap.add_argument("--profile", required=True, help="arch profile of the GPU the files were measured on")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument(
        "--physics", default=str(PHYSICS_FILE), help="physics constants (default: the shipped fit)"
    )
    args = ap.parse_args(argv)

    t0 = time.time()
    profile = load_profile(args.profile)
    doc = json.loads(Path(args.physics).read_text())
    physics = Physics.load(args.physics)
    campaigns = load_campaigns(args.physics)
    fitted = set(doc.get("fitted_on", {}).get("fit_files", []))
    fitted_logic = doc.get("fitted_on", {}).get("logic")
    files = load_recorded(args.logic)
    gpu = SimGPU(profile, physics=physics)
    same_folder = Path(args.logic).resolve().name == fitted_logic
    # The campaign operating points describe the boards of the folder the physics was fitted on; another
    # folder (another chip's files) gets raw figures only.
    campaigns = campaigns if same_folder else {}
    df = rows_frame(gpu, files, campaign_factors=campaigns or None)
    df["split"] = [
        "fit" if (same_folder and name in fitted) else "held_back" for name in df["file"]
    ]  # a file is "fit" only in the folder the physics was fitted on
    out = {
        "model_version": MODEL_VERSION,
        "profile": args.profile,
        "logic": str(args.logic),
        "physics": args.physics,
        "numbers": "simulated, compared with recorded real GFLOPS",
        "campaigns": campaigns,
        "splits": {},
        "splits_campaign_adjusted": {},
        "by_campaign": {},
    }
    print(f"sim fidelity: {len(files)} files, {len(df)} rows, {args.profile}, model {MODEL_VERSION}")
    print(f"campaign operating points (fitted with the physics): {campaigns}")
    print("rows per campaign: " + ", ".join(f"{c} {n}" for c, n in df["campaign"].value_counts().items()))
    views = [(False, "splits", "raw")]
    if campaigns:
        views.append((True, "splits_campaign_adjusted", "campaign-adjusted"))
    for adjusted, key, label in views:
        for split in ("fit", "held_back"):
            part = df[df["split"] == split]
            if part.empty:
                continue
            fid = fidelity(part, adjusted)
            fid["files"] = sorted(set(part["file"]))
            out[key][split] = fid
            print()
            print(table(f"{label}, {split.replace('_', ' ')}: {len(fid['files'])} files", fid))
        if "held_back" in out[key]:
            print()
            for line in verdict(out[key]["held_back"]):
                print(f"- {label}, held back: {line}")
    # Each campaign's rows on their own, raw (the first campaign's board is the chip the profile describes).
    print()
    print("| split | campaign | rows | within 25% | median ratio (IQR) | eff rho | winner pct median |")
    print("|---|---|---|---|---|---|---|")
    for split in ("fit", "held_back"):
        for campaign, part in sorted(df[df["split"] == split].groupby("campaign"), key=lambda x: x[0]):
            f = figures(part)
            out["by_campaign"].setdefault(split, {})[campaign] = f
            iqr = f"{_fmt(f['ratio_q25'], '.2f')}-{_fmt(f['ratio_q75'], '.2f')}"
            print(
                f"| {split} | {campaign} | {f['rows']} | {f['within_25pct'] * 100:.1f}% | "
                f"{_fmt(f['median_ratio'], '.3f')} ({iqr}) | {_fmt(f['efficiency_spearman'], '.3f')} | "
                f"{_fmt(f.get('winner_rank_percentile_median'), '.1f')}% |"
            )
    out["all"] = fidelity(df)
    if campaigns:
        out["all_campaign_adjusted"] = fidelity(df, True)
    out["wall_s"] = round(time.time() - t0, 1)
    print(f"\n{out['wall_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
