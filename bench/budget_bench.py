"""The time budget (config ``budget``, issue #31) vs equal generations, at equal GPU time, on the simulator.

Equal: the demo config (every library max_generations generations, no budget), with the workload deck
``--workload`` layered on the shipped footprint (config ``deck.workload``). Budgeted: the same config with
``budget.hours`` = the GPU time the equal run's generations recorded (samples.csv time_us, simulated) and
``max_generations`` doubled as the cap, so the budget decides who gets the generations. ``--families all``
runs the full deck (every library of the stock deck) instead of the demo's families, ``--generations N``
gives the equal run N generations each (default: the config's). Figures per run and per library, over every
size of every library's final.yaml:

* workload-weighted speed-up: Σ calls × floor time / Σ calls × winner's time (the sizes the workload calls;
  the floor is the shipped kernel the size races, its time ``score`` × the winner's, both measured in the
  same race; the winner's time its median in the race's median thermal state, final.yaml's
  ``time_us_median_state``, where finalize recorded it, else from its GFLOPS at the peak state: both runs
  must be finalized by the same code), and the expected time saved on one pass of the workload: Σ calls ×
  (floor − winner time);
* deck-weighted speed-up: the same with the deck's weights (the workload's share plus the footprint's);
* generations run, GPU seconds spent, and which libraries the budget starved and why.

    python bench/budget_bench.py --workload bench/data/workload_ridft_rocblas_profile.yaml \
        [--families all] [--generations N] [--cores N] [--equal-results DIR] [--workdir DIR] [--cap N] \
        [--seed N] [--json OUT]

``--workload-source`` is rocblas-log or tunableop (from the file's name when left out). ``--equal-results``:
a finished equal run's results/<arch> of this code with the same workload (saves one run). Each run works in
a fresh copy of this checkout's HEAD (git archive) with its own TMPDIR.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "bench"))

from oto.deck.model import read_library_yaml  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.measurement.budget import generation_gpu_seconds, size_flops  # noqa: E402

TARGET = "results/gfx90c/TensileLibrary.dat"


def workload_config(path: Path, source: str | None) -> dict:
    src = source or ("tunableop" if path.suffix == ".csv" else "rocblas-log")
    return {"deck": {"workload": [{"source": src, "path": str(path.resolve())}]}}


def run(workdir: Path, extra_config: dict, cores: int = 1) -> tuple[Path, float]:
    """A fresh copy of HEAD, the demo target run in it; (its results/gfx90c, wall seconds)."""
    workdir.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive.stdout, check=True)
    (workdir / "bench.yaml").write_text(yaml.safe_dump(extra_config))
    cmd = ["snakemake", "--cores", str(cores), TARGET, "--configfile", "config/config.yaml", "bench.yaml"]
    env = {**os.environ, "TMPDIR": str(workdir / "tmp")}
    (workdir / "tmp").mkdir()
    start = time.monotonic()
    with open(workdir / "run.log", "w") as log:
        subprocess.run(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return workdir / "results" / "gfx90c", time.monotonic() - start


def library_figures(final: dict, deck) -> dict:
    """One library's workload- and deck-weighted floor and winner times (seconds per pass of the workload)."""
    calls = deck.calls or [0] * len(deck.sizes)
    t = {"calls_floor": 0.0, "calls_winner": 0.0, "deck_floor": 0.0, "deck_winner": 0.0}
    per_mac = Library.parse(final["library"]).family.flops_per_mac  # complex types count 8 flops a MAC
    for row in final["per_size"]:
        i = int(row["size_index"])
        if not (row.get("gflops") and row.get("score")):
            continue
        # the winner's time in the race's median thermal state, where its score is (final.yaml of a workload
        # deck since the finalnoise branch), else at the peak state from its GFLOPS
        state = row.get("time_us_median_state")
        winner = (
            float(state) * 1e-6
            if state
            else size_flops(final["sizes"][i], per_mac) / (float(row["gflops"]) * 1e9)
        )
        floor = float(row["score"]) * winner  # score = floor time / winner time, measured in one race
        t["calls_floor"] += calls[i] * floor
        t["calls_winner"] += calls[i] * winner
        t["deck_floor"] += deck.weights[i] * floor
        t["deck_winner"] += deck.weights[i] * winner
    return t


def true_times(results: Path) -> dict[str, tuple[float, float]]:
    """Per library the workload's noise-free simulated time (Σ calls × true_time_us, seconds) at the floor and
    at finalize's winners: what the measured race's noise cannot blur. Libraries without a final.yaml are
    left out."""
    from budget_headroom import LibraryHeadroom, run_gpu  # noqa: PLC0415 (it imports this module)
    from oto.tensile import legality

    profile = json.loads((results / "arch_profile.json").read_text())["profile"]
    gpu, limits = run_gpu(results), legality.Limits.from_profile(profile)
    out = {}
    for deck_path in sorted(results.glob("Cijk_*/deck.yaml")):
        if not (deck_path.parent / "final.yaml").exists():
            continue
        h = LibraryHeadroom(deck_path.parent, gpu, limits, None)
        out[h.deck.name] = (float((h.calls * h.floor).sum()) / 1e6, float((h.calls * h.final()).sum()) / 1e6)
    return out


SPEED_KEYS = ("calls_floor", "calls_winner", "deck_floor", "deck_winner", "true_floor", "true_winner")


def figures(results: Path) -> dict:
    """Every library's generations and GPU seconds (samples.csv), and its speed-ups from final.yaml. A
    library the workload does not call may lack a final.yaml (a full-deck run that finalized only the called
    libraries: their finalize races decide no workload figure); it then counts in the GPU time and
    generations only. A called library without one is an error."""
    per_lib: dict[str, dict] = {}
    true = true_times(results)
    for deck_path in sorted(results.glob("Cijk_*/deck.yaml")):
        lib_dir = deck_path.parent
        deck = read_library_yaml(deck_path)
        calls = sum(deck.calls or [])
        if (lib_dir / "final.yaml").exists():
            final = yaml.safe_load((lib_dir / "final.yaml").read_text())
            f = library_figures(final, deck)
            f["true_floor"], f["true_winner"] = true[deck.name]
            f["finalized"] = True
            # which state the winners' times are in: the race's median (finalize since the finalnoise branch)
            median = any("time_us_median_state" in r for r in final["per_size"])
            f["times_at"] = "median" if median else "peak"
        elif calls:
            raise SystemExit(f"{lib_dir}/final.yaml: missing; the workload calls {deck.name} {calls} times")
        else:
            f = {**dict.fromkeys(SPEED_KEYS, 0.0), "finalized": False}
        proposals = sorted(lib_dir.glob("gen*/proposals.yaml"), key=lambda p: int(p.parent.name[3:]))
        reasons = [str(yaml.safe_load(p.read_text()).get("reason", "")) for p in proposals]
        f["generations"] = sum(1 for r in reasons if not r.startswith(("starved", "converged")))
        f["starved"] = next((r for r in reasons if r.startswith("starved")), "")
        f["converged"] = any(r.startswith("converged") for r in reasons)
        f["gpu_s"] = sum(generation_gpu_seconds(p) for p in glob.glob(f"{lib_dir}/gen*/samples.csv"))
        f["calls"] = calls
        per_lib[deck.name] = f
    total = {k: sum(f[k] for f in per_lib.values()) for k in (*SPEED_KEYS, "gpu_s")}
    return {"libraries": per_lib, "total": total}


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def times(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.4f}×"


def generation_counts(libs: list[dict]) -> str:
    """'2×40, 1×3': how many libraries ran how many generations, most generations first."""
    counts: dict[int, int] = {}
    for f in libs:
        counts[f["generations"]] = counts.get(f["generations"], 0) + 1
    return ", ".join(f"{g}×{n}" for g, n in sorted(counts.items(), reverse=True))


def table(equal: dict, budgeted: dict, collapse_uncalled: bool = False) -> str:
    """One row per library and a total; with ``collapse_uncalled`` the libraries the workload does not call
    share one row (their generations as 'generations×libraries'; on the full deck they are most of it)."""
    head = (
        "| library | calls | gens equal / budgeted | GPU s equal / budgeted | workload speed-up equal | "
        "budgeted | budgeted/equal | time saved per pass, s: equal | budgeted | noise-free workload speed-up "
        "equal | budgeted | deck speed-up equal | budgeted |"
    )
    lines = [head, "|" + "---|" * 13]
    rows = list(equal["libraries"].items())
    uncalled = [lib for lib, e in rows if collapse_uncalled and not e["calls"]]
    rows = [(lib, e) for lib, e in rows if lib not in uncalled]
    rows.sort(key=lambda r: -r[1]["calls"] if collapse_uncalled else 0)
    for lib, e in [*rows, ("**total**", equal["total"])]:
        b = budgeted["libraries"][lib] if lib in budgeted["libraries"] else budgeted["total"]
        gens = f"{e['generations']} / {b['generations']}" if "generations" in e else ""
        calls = e.get("calls", sum(f["calls"] for f in equal["libraries"].values()))
        ew, bw = ratio(e["calls_floor"], e["calls_winner"]), ratio(b["calls_floor"], b["calls_winner"])
        ed, bd = ratio(e["deck_floor"], e["deck_winner"]), ratio(b["deck_floor"], b["deck_winner"])
        if lib == "**total**" and uncalled:
            e_un = [equal["libraries"][u] for u in uncalled]
            b_un = [budgeted["libraries"][u] for u in uncalled]
            lines.append(
                f"| {len(uncalled)} libraries the workload does not call | 0 | {generation_counts(e_un)} / "
                f"{generation_counts(b_un)} | {sum(f['gpu_s'] for f in e_un):.0f} / "
                f"{sum(f['gpu_s'] for f in b_un):.0f} | – | – | – | 0 | 0 | – | – | – | – |"
            )
        if not e.get("finalized", True):
            ed = bd = float("nan")  # not finalized: no deck figure
        if lib == "**total**" and not all(f["finalized"] for f in equal["libraries"].values()):
            ed = bd = float("nan")  # the deck total would leave the unfinalized libraries out
        lines.append(
            f"| {lib.removeprefix('Cijk_')} | {calls} | {gens} | {e['gpu_s']:.0f} / {b['gpu_s']:.0f} | "
            f"{ew:.4f}× | {bw:.4f}× | {ratio(bw, ew):.4f} | {e['calls_floor'] - e['calls_winner']:.2f} | "
            f"{b['calls_floor'] - b['calls_winner']:.2f} | {ratio(e['true_floor'], e['true_winner']):.4f}× | "
            f"{ratio(b['true_floor'], b['true_winner']):.4f}× | {times(ed)} | {times(bd)} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", type=Path, required=True)
    ap.add_argument("--workload-source", choices=("tunableop", "rocblas-log"))
    ap.add_argument("--equal-results", type=Path)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--families", help="config families for both runs, e.g. all (default: the demo's)")
    ap.add_argument("--generations", type=int, help="the equal run's max_generations (default: the config's)")
    ap.add_argument("--cores", type=int, default=1, help="snakemake --cores of each run")
    ap.add_argument("--cap", type=int, help="budgeted max_generations (default: twice the equal run's)")
    ap.add_argument(
        "--budgeted-results",
        type=Path,
        help="a finished budgeted run's results/<arch> (its budget.hours must be the equal run's GPU time)",
    )
    ap.add_argument("--seed", type=int, help="config seed of both runs (default: the config's)")
    ap.add_argument("--sweep", type=int, default=0, help="the budgeted run's budget.sweep (default 0: none)")
    ap.add_argument(
        "--hours",
        type=float,
        help="the budgeted run's budget.hours instead of the equal run's GPU time (development only: a "
        "family subset given a full deck's night, where the libraries it leaves out take what it cannot use)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="oto-budget-bench-"))
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    workload = workload_config(args.workload, args.workload_source)
    if args.seed is not None:
        workload["seed"] = args.seed
    if args.families:
        workload["families"] = args.families if args.families == "all" else args.families.split(",")
    generations = args.generations or int(config["max_generations"])
    if args.equal_results:
        equal_dir, equal_wall = args.equal_results, float("nan")
    else:
        equal_dir, equal_wall = run(root / "equal", {**workload, "max_generations": generations}, args.cores)
    equal = figures(equal_dir)
    cap = args.cap or 2 * generations
    hours = args.hours or equal["total"]["gpu_s"] / 3600
    budget = {**workload, "budget": {"hours": hours, "sweep": args.sweep}, "max_generations": cap}
    if args.budgeted_results:
        budget_dir, budget_wall = args.budgeted_results, float("nan")
    else:
        budget_dir, budget_wall = run(root / "budgeted", budget, args.cores)
    budgeted = figures(budget_dir)
    states = {f.get("times_at") for run in (equal, budgeted) for f in run["libraries"].values() if f["calls"]}
    if len(states) > 1:  # a ratio of sums weighs its sizes by these times: both runs must weigh alike
        raise SystemExit(
            f"{equal_dir}, {budget_dir}: the called libraries' final.yaml weigh sizes by times in different "
            "thermal states (time_us_median_state in some, GFLOPS at the peak state in others): finalize "
            "both runs with the same code"
        )
    families = args.families or "the demo's"
    hours_from = "--hours" if args.hours else "the equal run's GPU time"
    print(f"workload {args.workload.name}; families {families}; equal: {generations} generations each (wall "
          f"{equal_wall:.0f} s); budgeted: {budget['budget']['hours'] * 3600:.1f} s ({hours_from}), sweep "
          f"{args.sweep}, max_generations {cap} (wall {budget_wall:.0f} s)\n")  # fmt: skip
    print(table(equal, budgeted, collapse_uncalled=len(equal["libraries"]) > 8))
    print(f"\nload average at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for lib, f in budgeted["libraries"].items():
        if f["starved"]:
            print(f"\nstarved {lib} ({f['calls']} calls): {f['starved']}")
    if args.json:
        args.json.write_text(json.dumps({"equal": equal, "budgeted": budgeted, "budget": budget}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
