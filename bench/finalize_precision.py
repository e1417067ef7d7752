"""Why finalize's measured workload figure departs from the noise-free one (issue #31), and what racing the
workload's heavy sizes to a precision costs (``benchmark.racing.workload_precision``).

Per library the workload calls, per size it calls: the size's share of the library's workload time
(calls × the floor's noise-free time), the measured score (floor / winner, final.yaml, simulated launches
with noise) with its 95% interval and the noise-free ratio (the simulator's ``true_time_us`` of the floor and
of the shipped winner on the run's own chip: ``bench/budget_headroom.py`` ``run_gpu``), the measured winner
time against its true time, the launches finalize spent there (winner, floor, all kernels) and why the
race at the size stopped. Per library: the measured workload speed-up (Σ calls × floor / Σ calls × winner,
measured, as ``bench/budget_bench.py`` computes it), the noise-free one, and the finalize race's launches
(in all, at the called sizes, at the heavy sizes: share ≥ ``--heavy``).

    python bench/finalize_precision.py --results DIR [--heavy 0.1] [--json OUT]
    python bench/finalize_precision.py --results DIR --refinalize OUT [--precision 0 0.01 ...]

``--refinalize``: finalize again, in OUT (never in the run's folder), every library the workload calls from
the run's own last selection and deck, once per ``--precision`` value (0: off, the race as it was), each
job timed (wall seconds, launches, simulated GPU seconds of its race), then the same tables on each: the
generations stay the run's, only finalize changes. The run's config is its ``config/config.yaml`` merged with
its ``bench.yaml`` (as ``bench/budget_bench.py`` runs it).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "bench"))

from budget_headroom import LibraryHeadroom, run_gpu  # noqa: E402
from oto.config import validate_config  # noqa: E402
from oto.deck.model import read_library_yaml  # noqa: E402
from oto.gemm import gemm_flops  # noqa: E402
from oto.measurement.budget import generation_gpu_seconds  # noqa: E402
from oto.tensile import legality  # noqa: E402


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def run_config(results: Path) -> dict:
    """The validated config the run used: its config/config.yaml with its bench.yaml over it."""
    folder = results.parents[1]
    config = yaml.safe_load((folder / "config" / "config.yaml").read_text())
    if (folder / "bench.yaml").exists():
        config = _merge(config, yaml.safe_load((folder / "bench.yaml").read_text()) or {})
    return validate_config(config, str(folder / "config" / "config.yaml"))


def median_state_ratios(h: LibraryHeadroom, final: dict, limits, samples: pd.DataFrame, drift: float):
    """Per called size the noise-free floor / winner ratio in the race's median thermal state (its median
    clock reading), where the scores are taken (oto.measurement.scoring): a memory-bound kernel slows less
    with the clock than an ALU-bound one (the simulator's drift sensitivity 0.3 + 0.7 × ALU share), so
    where the floor and the winner differ in ALU share the ratio there is not the boost-clock one."""
    from oto.hardware.simulated.noise import NoiseModel

    clock = pd.to_numeric(samples.loc[samples["status"] == "ok", "clock_mhz"], errors="coerce").median()
    if not np.isfinite(clock):
        return np.full(len(h.index), np.nan)
    noise = NoiseModel(0, "median-state", drift=drift)
    ratio = clock / h.gpu.arch.clock_mhz
    refs = h.deck.references(h.index, limits)
    kernels = final.get("kernels") or {}
    winner = {int(r["size_index"]): r.get("winner") for r in final["per_size"]}

    def at_median(params, j):
        m, n, b, k = (np.array([x[j]]) for x in h.mnbk)
        bd = h.gpu.breakdown(h.lib.family, params, m, n, b, k, h.lib.pattern)
        return float(bd["time_us"][0] * noise.factor_at_clock(ratio, bd["alu_fraction"])[0])

    out = []
    for j, i in enumerate(h.index):
        floor = at_median(refs[i]["params"], j)
        win = at_median(kernels[winner[i]], j) if winner.get(i) in kernels else floor
        out.append(floor / win)
    return np.array(out)


def library_sizes(h: LibraryHeadroom, final: dict, samples: pd.DataFrame, median_state) -> list[dict]:
    """One row per size the workload calls: its share, measured and true ratios, launches, stop."""
    rows = {int(r["size_index"]): r for r in final["per_size"]}
    true_final = h.final()
    total = float(np.sum(h.calls * h.floor))
    ok = samples[samples["status"] == "ok"]
    per = ok.groupby(["size_index", "kernel_id"]).size()
    every = samples.groupby("size_index").size()
    out = []
    for j, i in enumerate(h.index):
        r = rows.get(i, {})
        m, n, b, k = (int(v) for v in h.deck.sizes[i][:4])
        gflops, score = r.get("gflops"), r.get("score")
        # as bench/budget_bench.py weighs: the median thermal state's time where final.yaml has it
        t_win = r.get("time_us_median_state") or (
            gemm_flops(h.lib.family, m, n, b, k) / (float(gflops) * 1e3) if gflops else math.nan
        )
        winner, shipped = r.get("winner"), r.get("shipped")
        lo, hi = r.get("ci_low"), r.get("ci_high")
        half = (math.log(hi) - math.log(lo)) / 2 if lo and hi and lo > 0 else math.nan
        out.append(
            {
                "size_index": i,
                "size": [m, n, b, k],
                "calls": int(h.calls[j]),
                "share": float(h.calls[j] * h.floor[j]) / total if total else math.nan,
                "winner_is_floor": winner == shipped,
                "score": float(score) if score is not None else math.nan,
                "half_log_ci": half,
                "true_ratio": float(h.floor[j] / true_final[j]),
                "median_state_ratio": float(median_state[j]),
                "t_win_us": t_win,
                "true_win_us": float(true_final[j]),
                "true_floor_us": float(h.floor[j]),
                "winner_launches": int(per.get((i, winner), 0)) if winner else 0,
                "floor_launches": int(per.get((i, shipped), 0)) if shipped else 0,
                "launches": int(every.get(i, 0)),
                "race": r.get("race"),
            }
        )
    return out


def library_figures(results: Path, lib_dir: Path, gpu, limits, heavy: float) -> dict | None:
    h = LibraryHeadroom(lib_dir, gpu, limits, None)
    if not h.index or not (lib_dir / "final.yaml").exists():
        return None
    final = yaml.safe_load((lib_dir / "final.yaml").read_text())
    samples = pd.read_csv(lib_dir / "final_samples.csv")
    drift = float(run_config(results)["sim"]["drift"]) if (results.parents[1] / "config").is_dir() else 0.25
    sizes = library_sizes(h, final, samples, median_state_ratios(h, final, limits, samples, drift))
    measured = [s for s in sizes if math.isfinite(s["t_win_us"]) and math.isfinite(s["score"])]
    m_floor = sum(s["calls"] * s["score"] * s["t_win_us"] for s in measured)
    m_win = sum(s["calls"] * s["t_win_us"] for s in measured)
    # the measured weights with the true ratios: what the scores' errors leave of the gap is the weights'
    m_true = sum(s["calls"] * s["true_ratio"] * s["t_win_us"] for s in measured)
    m_state = sum(s["calls"] * s["median_state_ratio"] * s["t_win_us"] for s in measured)
    for s in measured:  # a size's part of measured / measured-with-true-ratios - 1
        s["gap"] = (
            s["calls"] * s["t_win_us"] * (s["score"] - s["true_ratio"]) / m_true if m_true else math.nan
        )
    t_floor = float(np.sum(h.calls * h.floor))
    t_win = float(np.sum(h.calls * h.final()))
    called = {s["size_index"] for s in sizes}
    heavy_sizes = {s["size_index"] for s in sizes if s["share"] >= heavy}
    w = final.get("workload") or {}
    return {
        "library": h.deck.name,
        "calls": int(h.calls.sum()),
        "measured": m_floor / m_win if m_win else math.nan,
        "noise_free": t_floor / t_win if t_win else math.nan,
        "measured_weights_true_ratios": m_true / m_win if m_win else math.nan,
        "measured_weights_median_state_ratios": m_state / m_win if m_win else math.nan,
        "saved_us": w.get("saved_us"),
        "saved_ci_us": w.get("saved_ci_us"),
        "launches": len(samples),
        "launches_called": int(samples["size_index"].isin(called).sum()),
        "launches_heavy": int(samples["size_index"].isin(heavy_sizes).sum()),
        "deck_sizes": len(final["per_size"]),
        "called_sizes": len(called),
        "heavy_sizes": len(heavy_sizes),
        "race_gpu_s": generation_gpu_seconds(lib_dir / "final_samples.csv"),
        "sizes": sizes,
    }


def figures(results: Path, heavy: float) -> list[dict]:
    profile = json.loads((results / "arch_profile.json").read_text())["profile"]
    gpu, limits = run_gpu(results), legality.Limits.from_profile(profile)
    libs = [
        library_figures(results, d.parent, gpu, limits, heavy)
        for d in sorted(results.glob("Cijk_*/deck.yaml"))
    ]
    return [f for f in libs if f is not None]


def _lib(f: dict) -> str:
    return f["library"].removeprefix("Cijk_")


def print_tables(libs: list[dict], title: str) -> None:
    print(f"\n### {title}\n")
    print(
        "| library | calls | measured | noise-free | measured / noise-free | of which the scores' | the "
        "weights' | scores / median-state truth | saved µs/pass (95%) | launches: all | at called sizes | "
        "at heavy sizes (n) | race GPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in libs:
        lo, hi = f["saved_ci_us"] or (math.nan, math.nan)
        m, t, mt = f["measured"], f["noise_free"], f["measured_weights_true_ratios"]
        print(
            f"| {_lib(f)} | {f['calls']} | {m:.4f}× | {t:.4f}× | {m / t:.4f} | {m / mt:.4f} | {mt / t:.4f} | "
            f"{m / f['measured_weights_median_state_ratios']:.4f} | "
            f"{f['saved_us']:.1f} ({lo:.1f} to {hi:.1f}) | {f['launches']} | {f['launches_called']} | "
            f"{f['launches_heavy']} ({f['heavy_sizes']}) | {f['race_gpu_s']:.2f} |"
        )
    print(
        "\nPer called size (share: of the library's workload time at the floor, noise-free; ± the 95% "
        "half-width of the measured score, in log; gap: the size's part of the scores' share above; winner "
        "time: the measured one the figure weighs with against the true one at the boost clock):\n"
    )
    print(
        "| library | size m,n,b,k | calls | share | score ± | noise-free ratio | measured/true | gap "
        "| median-state ratio | measured/it | winner time meas./true | launches winner / floor / all | race |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in libs:
        for s in sorted(f["sizes"], key=lambda s: -s["share"]):
            if s["share"] < 0.01:
                continue
            print(
                f"| {_lib(f)} | {','.join(map(str, s['size']))} | {s['calls']} | {100 * s['share']:.1f}% | "
                f"{s['score']:.4f} ± {100 * s['half_log_ci']:.1f}% | {s['true_ratio']:.4f} | "
                f"{s['score'] / s['true_ratio']:.4f} | {100 * s.get('gap', math.nan):+.2f}% | "
                f"{s['median_state_ratio']:.4f} | {s['score'] / s['median_state_ratio']:.4f} | "
                f"{s['t_win_us'] / s['true_win_us']:.4f} | {s['winner_launches']} / {s['floor_launches']} / "
                f"{s['launches']} | {s['race']} |"
            )
    rest = [s for f in libs for s in f["sizes"] if s["share"] < 0.01]
    if rest:
        print(f"\n({len(rest)} called sizes under 1% of their library's workload time left out)")


def refinalize(results: Path, out: Path, precision: float) -> list[dict]:
    """Finalize every called library again into ``out``/results/<arch> (deck, profile and the last selection
    copied from the run), with ``benchmark.racing.workload_precision`` = ``precision``; per job its wall
    seconds and launches."""
    from oto.stages import finalize

    config = run_config(results)
    config["benchmark"]["racing"]["workload_precision"] = precision
    target = out / "results" / results.name
    target.mkdir(parents=True, exist_ok=True)
    for name in ("arch_profile.json",):
        (target / name).write_bytes((results / name).read_bytes())
    profile = json.loads((results / "arch_profile.json").read_text())["profile"]
    jobs = []
    for deck_path in sorted(results.glob("Cijk_*/deck.yaml")):
        lib = deck_path.parent
        calls = read_library_yaml(deck_path).calls
        if not calls or not any(calls):
            continue
        last = max(lib.glob("gen*/selection.yaml"), key=lambda p: int(p.parent.name[3:]))
        (target / lib.name).mkdir(exist_ok=True)
        (target / lib.name / "deck.yaml").write_bytes(deck_path.read_bytes())
        for sel in lib.glob("gen*/selection.yaml"):  # budget_headroom reads every generation's
            (target / lib.name / sel.parent.name).mkdir(exist_ok=True)
            (target / lib.name / sel.parent.name / "selection.yaml").write_bytes(sel.read_bytes())
        start = time.monotonic()
        doc = finalize.run(
            last,
            deck_path,
            profile,
            config,
            target / lib.name / "final_work",
            target,
            target / lib.name / "final.yaml",
            target / lib.name / "final_samples.csv",
        )
        wall = time.monotonic() - start
        launches = len(pd.read_csv(target / lib.name / "final_samples.csv", usecols=["seq"]))
        jobs.append(
            {"library": lib.name, "wall_s": wall, "launches": launches, "per_size": len(doc["per_size"])}
        )
    return jobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, required=True, help="a finished run's results/<arch>")
    ap.add_argument("--heavy", type=float, default=0.1, help="share of a library's workload time: heavy")
    ap.add_argument("--refinalize", type=Path, help="finalize again in this folder (see the module doc)")
    ap.add_argument("--precision", type=float, nargs="+", default=[0.0], help="with --refinalize")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    doc: dict = {}
    print(f"load average at the start (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.refinalize is None:
        doc["run"] = figures(args.results, args.heavy)
        print_tables(doc["run"], f"{args.results} (finalize as the run did it; simulated)")
    else:
        for p in args.precision:
            out = args.refinalize / f"precision-{p:g}"
            jobs = refinalize(args.results, out, p)
            libs = figures(out / "results" / args.results.name, args.heavy)
            doc[f"precision {p:g}"] = {"jobs": jobs, "libraries": libs}
            wall, launches = sum(j["wall_s"] for j in jobs), sum(j["launches"] for j in jobs)
            each = ", ".join(
                f"{j['library'].removeprefix('Cijk_')} {j['wall_s']:.1f} s {j['launches']}" for j in jobs
            )
            print(f"\nworkload_precision {p:g}: {len(jobs)} finalize jobs, {wall:.1f} s wall in all, "
                  f"{launches} launches ({each})")  # fmt: skip
            print_tables(
                libs, f"workload_precision {p:g} (refinalized from {args.results}'s generations; simulated)"
            )
    print(f"\nload average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
