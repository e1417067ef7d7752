"""The spoof floor and the best reachable kernel on a simulated arch, per family and over the whole deck.

    python bench/spoof_headroom.py --logic ../shared/reference/rocblas-vega10 \
        --profile arch_profiles/gfx90c.yaml [--json OUT]

The spoof floor of a size is the solution the shipped logic file picks there (what a gfx90c owner gets with
HSA_OVERRIDE_GFX_VERSION=9.0.0); the best reachable kernel is the fastest of a legal grid of oto's knobs
(ThreadTile {2,4,8}^2, WorkGroup {8,16,32}^2 x LocalSplitU {1,2}, DepthU {8,16,32}, PrefetchGlobalRead {1,2},
VectorWidth {2,4,8} (1 for 16-byte types), GlobalSplitU {1,4}; every candidate through oto.tensile.legality
and the simulated build) and the spoof itself. Per family it prints, at M=N=K=4096 (batch 1; the spoof is the
winner of the file's row nearest in log size), the spoof's and the best kernel's GFLOPS and % of peak, and
over every row of the deck the distribution of best / spoof. Numbers are **simulated** (calibrated model).
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

from oto.gemm import Library  # noqa: E402
from oto.hardware.profile import load_profile  # noqa: E402
from oto.hardware.simulated.calibration import load_recorded  # noqa: E402
from oto.hardware.simulated.performance import MODEL_VERSION, SimGPU  # noqa: E402
from oto.search.lattice import fork_lattice  # noqa: E402
from oto.tensile import legality  # noqa: E402

BIG = (4096.0, 4096.0, 1.0, 4096.0)


def grid(lib: Library, gpu: SimGPU, limits: legality.Limits) -> list[dict]:
    """The legal grid: oto's fork lattice (oto.search.lattice, the knobs above) less what the simulated
    build rejects."""
    return [p for p in fork_lattice(lib, limits) if gpu.build_outcome(lib.family, p, lib.pattern)[0] == "ok"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logic", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    profile = load_profile(args.profile)
    gpu = SimGPU(profile)
    limits = legality.Limits.from_profile(profile)
    files = load_recorded(args.logic)
    spaces: dict[tuple[str, str], list[dict]] = {}
    ratios: dict[str, list[np.ndarray]] = {}
    big: dict[str, dict] = {}
    for f in files:
        lib, fam = f.library, f.library.family
        key = (fam.code.removesuffix("_GB"), lib.pattern)
        if key not in spaces:
            spaces[key] = grid(lib, gpu, limits)
        m, n, b, k = f.sizes.T
        built = f.solutions_as_built()  # the spoof runs the file as today's Tensile builds it
        spoof = np.array(
            [gpu.true_time_us(fam, built[w], mm, nn, bb, kk, lib.pattern)[()]
             for w, mm, nn, bb, kk in zip(f.winner, m, n, b, k, strict=True)]
        )  # fmt: skip
        best = spoof.copy()
        for p in spaces[key]:
            best = np.minimum(best, gpu.true_time_us(fam, p, m, n, b, k, lib.pattern))
        ratios.setdefault(fam.code, []).append(spoof / best)
        # the spoof at M=N=K=4096: the winner of the row nearest in log size
        near = int(np.argmin(np.sum(np.log(f.sizes / np.array(BIG)) ** 2, axis=1)))
        t_spoof = float(gpu.true_time_us(fam, built[f.winner[near]], *BIG, lib.pattern)[()])
        t_best = min(
            [t_spoof] + [float(gpu.true_time_us(fam, p, *BIG, lib.pattern)[()]) for p in spaces[key]]
        )
        flops = fam.flops_per_mac * float(np.prod(BIG))
        peak = gpu.peak_gflops(fam)
        row = big.setdefault(fam.code, {"spoof_gflops": [], "best_gflops": [], "peak_gflops": peak})
        row["spoof_gflops"].append(flops / t_spoof / 1e3)
        row["best_gflops"].append(flops / t_best / 1e3)
    out = {"model_version": MODEL_VERSION, "profile": args.profile, "numbers": "simulated", "families": {}}
    print(f"spoof headroom on {args.profile} (model {MODEL_VERSION}), {len(files)} libraries\n")
    print("| family | peak GFLOPS | spoof @4096 GFLOPS (% peak) | best @4096 GFLOPS (% peak) | deck rows | "
          "best/spoof median | p90 | p99 | max |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    allr = []
    for fam in sorted(ratios):
        r = np.concatenate(ratios[fam])
        allr.append(r)
        bg = big[fam]
        s, bst, pk = (
            float(np.median(bg["spoof_gflops"])),
            float(np.median(bg["best_gflops"])),
            bg["peak_gflops"],
        )
        q = np.percentile(r, [50, 90, 99])
        out["families"][fam] = {
            "peak_gflops": pk, "spoof_4096_gflops": s, "best_4096_gflops": bst, "rows": len(r),
            "ratio_median": q[0], "ratio_p90": q[1], "ratio_p99": q[2], "ratio_max": float(r.max()),
        }  # fmt: skip
        print(f"| {fam} | {pk:.0f} | {s:.1f} ({100 * s / pk:.1f}%) | {bst:.1f} ({100 * bst / pk:.1f}%) | "
              f"{len(r)} | {q[0]:.2f} | {q[1]:.2f} | {q[2]:.2f} | {r.max():.2f} |")  # fmt: skip
    r = np.concatenate(allr)
    q = np.percentile(r, [50, 90, 99])
    out["overall"] = {"rows": len(r), "ratio_median": q[0], "ratio_p90": q[1], "ratio_p99": q[2],
                      "ratio_max": float(r.max()), "share_above_2_7": float(np.mean(r > 2.7))}  # fmt: skip
    print(f"| **deck** | | | | {len(r)} | {q[0]:.2f} | {q[1]:.2f} | {q[2]:.2f} | {r.max():.2f} |")
    print(f"\nrows above 2.7x: {100 * np.mean(r > 2.7):.1f}%; {time.time() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
