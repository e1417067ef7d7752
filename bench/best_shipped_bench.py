"""The second floor, the best shipped kernel (issue #28), on finished runs: after finalize, how many sizes
lose to it (target 0), the share of sizes where the final kernel beats it by >= 5%, and what the shortlist
of shipped kernels cost in GPU time, against the same run without it.

    python bench/best_shipped_bench.py RESULTS [--without RESULTS_WITHOUT] [--json OUT]

RESULTS is a run's ``results/<arch>`` folder made with the shortlist (``benchmark.best_shipped_shortlist``
> 0); RESULTS_WITHOUT the same configuration without it (the code before it, or the option at 0). GPU time
is what the timed launches would take on the GPU: each launch's recorded kernel time (simulated, replayed
or measured, as the run's samples say), summed over every generation's ``samples.csv`` and each library's
``final_samples.csv``; launches are counted too. The plan's cost model (Tensile's start-up, cool-down,
warm-ups) is ``oto plan``'s, for the record beside it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import yaml


def _launches(path: Path) -> tuple[int, float]:
    """(timed launches, summed kernel microseconds) of one samples file."""
    n, total = 0, 0.0
    with path.open() as fh:
        for row in csv.DictReader(fh):
            n += 1
            try:
                t = float(row["time_us"])
            except (TypeError, ValueError):
                continue
            if math.isfinite(t) and t > 0:
                total += t
    return n, total


def gpu_work(results: Path) -> dict[str, float]:
    out = {"tuning_launches": 0, "tuning_us": 0.0, "final_launches": 0, "final_us": 0.0}
    for f in sorted(results.glob("*/gen*/samples.csv")):
        n, t = _launches(f)
        out["tuning_launches"] += n
        out["tuning_us"] += t
    for f in sorted(results.glob("*/final_samples.csv")):
        n, t = _launches(f)
        out["final_launches"] += n
        out["final_us"] += t
    out["launches"] = out["tuning_launches"] + out["final_launches"]
    out["gpu_us"] = out["tuning_us"] + out["final_us"]
    return out


def shortlist_launches(results: Path) -> dict[str, float]:
    """In the finalize races: timed launches per (kernel, size) of the shortlisted shipped kernels and of the
    other candidates (the finalists), and references per candidate launch: what ``oto plan`` charges."""
    short_n = short_pairs = other_n = other_pairs = refs = cands = 0
    for f in sorted(results.glob("*/final.yaml")):
        doc = yaml.safe_load(f.read_text())
        listed = set((doc.get("best_shipped") or {}).get("positions") or {})
        seen: dict[tuple[str, str], int] = {}
        with (f.parent / "final_samples.csv").open() as fh:
            for row in csv.DictReader(fh):
                if row["role"] == "reference":
                    refs += 1
                    continue
                cands += 1
                key = (row["kernel_id"], row["size_index"])
                seen[key] = seen.get(key, 0) + 1
        for (kid, _), n in seen.items():
            if kid in listed:
                short_n, short_pairs = short_n + n, short_pairs + 1
            else:
                other_n, other_pairs = other_n + n, other_pairs + 1
    return {
        "shortlist_per_pair": short_n / short_pairs if short_pairs else None,
        "shortlist_pairs": short_pairs,
        "finalist_per_pair": other_n / other_pairs if other_pairs else None,
        "finalist_pairs": other_pairs,
        "references_per_candidate_launch": refs / cands if cands else None,
    }


def floors(results: Path) -> dict:
    """Per library and over the run: sizes, W/T/L against both floors, geomean against both, sizes that
    kept a shipped kernel, the share where the final kernel beats the best shipped one by >= 5%."""
    libs, every = {}, []
    for f in sorted(results.glob("*/final.yaml")):
        doc = yaml.safe_load(f.read_text())
        rows = doc["per_size"]
        every += rows
        libs[doc["library"]] = _figures(rows)
    return {"libraries": libs, "overall": _figures(every)}


def _geomean(xs) -> float | None:
    v = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else None


def _figures(rows) -> dict:
    judged = [r for r in rows if r.get("verdict_best_shipped")]
    beats = [r for r in judged if (r.get("vs_best_shipped") or 0) >= 1.05]
    return {
        "sizes": len(rows),
        "spoof_wtl": [sum(r["verdict"] == v for r in rows) for v in ("win", "tie", "loss")],
        "spoof_geomean": _geomean(r.get("score") for r in rows),
        "best_shipped_sizes": len(judged),
        "best_shipped_wtl": [
            sum(r["verdict_best_shipped"] == v for r in judged) for v in ("win", "tie", "loss")
        ],
        "best_shipped_geomean": _geomean(r.get("vs_best_shipped") for r in judged),
        "kept_by_best_shipped": sum(bool(r.get("kept_by_best_shipped")) for r in rows),
        "share_beats_5pct": len(beats) / len(judged) if judged else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--without", type=Path, help="the same run without the shortlist")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    doc = {"results": str(args.results), "floors": floors(args.results), "gpu": gpu_work(args.results)}
    doc["launches_per_pair"] = shortlist_launches(args.results)
    if args.without:
        base = gpu_work(args.without)
        doc["gpu_without"] = base
        doc["gpu_extra_share"] = doc["gpu"]["gpu_us"] / base["gpu_us"] - 1 if base["gpu_us"] else None
        doc["launches_extra_share"] = (
            doc["gpu"]["launches"] / base["launches"] - 1 if base["launches"] else None
        )
    o = doc["floors"]["overall"]
    print(f"{args.results}: {o['sizes']} deck sizes")
    print(f"  vs the spoof floor:        geomean {o['spoof_geomean']:.3f}x, W/T/L {o['spoof_wtl']}")
    if o["best_shipped_sizes"]:
        print(
            f"  vs the best shipped kernel: geomean {o['best_shipped_geomean']:.3f}x, W/T/L "
            f"{o['best_shipped_wtl']} over {o['best_shipped_sizes']} sizes; "
            f"{o['kept_by_best_shipped']} sizes kept a shipped kernel; beats it by >= 5% at "
            f"{100 * o['share_beats_5pct']:.1f}% of sizes"
        )
    for name, f in doc["floors"]["libraries"].items():
        print(
            f"    {name:24s} {f['sizes']:5d} sizes  spoof {f['spoof_geomean']:.3f}x {f['spoof_wtl']}  "
            f"best shipped {(f['best_shipped_geomean'] or float('nan')):.3f}x {f['best_shipped_wtl']}  kept "
            f"{f['kept_by_best_shipped']}  beats>=5% {100 * (f['share_beats_5pct'] or 0):.1f}%"
        )
    g = doc["gpu"]
    print(
        f"  GPU work: {g['launches']:,} launches ({g['final_launches']:,} in finalize), "
        f"{g['gpu_us'] / 1e6:.1f} s of kernel time ({g['final_us'] / 1e6:.1f} s in finalize)"
    )
    lp = doc["launches_per_pair"]
    if lp["shortlist_pairs"]:
        print(
            f"  finalize launches per (kernel, size): shortlisted {lp['shortlist_per_pair']:.2f} over "
            f"{lp['shortlist_pairs']} pairs, finalists {lp['finalist_per_pair']:.2f} over "
            f"{lp['finalist_pairs']}; "
            f"{lp['references_per_candidate_launch']:.2f} reference launches per candidate launch"
        )
    if args.without:
        b = doc["gpu_without"]
        print(
            f"  without the shortlist ({args.without}): {b['launches']:,} launches, "
            f"{b['gpu_us'] / 1e6:.1f} s; "
            f"the shortlist adds {100 * doc['launches_extra_share']:.1f}% launches, "
            f"{100 * doc['gpu_extra_share']:.1f}% kernel time"
        )
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
