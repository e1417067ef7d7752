"""The time budget (config ``budget``, issue #31) vs equal generations, at equal GPU time, on the simulator.

Equal: the demo config (every library max_generations generations, no budget). Budgeted: the same config with
``budget.hours`` = the GPU time the equal run's generations recorded (samples.csv time_us, simulated) and
``max_generations`` doubled as the cap, so the budget decides who gets the generations. Figures per run: GPU
seconds the generations recorded, and the deck-weighted speed-up over the shipped kernels: Σ weight × shipped
time / Σ weight × winner's time over every size of every library's final.yaml (weights: the deck's calls, else
its weights; the demo deck weighs every size 1), plus which libraries the budget starved.

    python bench/budget_bench.py [--equal-results DIR] [--workdir DIR]

``--equal-results``: a finished demo's results/<arch> folder of this code to take the equal run from (saves
one run). Each run works in a fresh copy of this checkout (git archive HEAD) with its own TMPDIR.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from oto.deck.model import read_library_yaml  # noqa: E402
from oto.measurement.budget import generation_gpu_seconds, size_flops  # noqa: E402

TARGET = "results/gfx90c/TensileLibrary.dat"


def run(workdir: Path, extra_config: dict | None) -> tuple[Path, float]:
    """A fresh copy of HEAD, the demo target run in it; (its results/gfx90c, wall seconds)."""
    workdir.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive.stdout, check=True)
    cmd = ["snakemake", "--cores", "1", TARGET]
    if extra_config:
        (workdir / "bench.yaml").write_text(yaml.safe_dump(extra_config))
        cmd += ["--configfile", "config/config.yaml", "bench.yaml"]
    env = {**os.environ, "TMPDIR": str(workdir / "tmp")}
    (workdir / "tmp").mkdir()
    start = time.monotonic()
    with open(workdir / "run.log", "w") as log:
        subprocess.run(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return workdir / "results" / "gfx90c", time.monotonic() - start


def figures(results: Path) -> dict:
    gpu_s = sum(generation_gpu_seconds(p) for p in glob.glob(f"{results}/*/gen*/samples.csv"))
    shipped_t = winner_t = 0.0
    gens, starved = {}, {}
    for final_path in sorted(results.glob("Cijk_*/final.yaml")):
        final = yaml.safe_load(final_path.read_text())
        deck = read_library_yaml(final_path.parent / "deck.yaml")
        weights = deck.calls if deck.calls is not None else deck.weights
        for row in final["per_size"]:
            i = int(row["size_index"])
            if not (row.get("gflops") and row.get("shipped_gflops")):
                continue
            flops = size_flops(final["sizes"][i])
            shipped_t += weights[i] * flops / float(row["shipped_gflops"])
            winner_t += weights[i] * flops / float(row["gflops"])
        lib = final["library"]
        proposals = final_path.parent.glob("gen*/proposals.yaml")
        proposals = sorted(proposals, key=lambda p: int(p.parent.name[3:]))
        reasons = [str(yaml.safe_load(p.read_text()).get("reason", "")) for p in proposals]
        gens[lib] = sum(1 for r in reasons if not r.startswith(("starved", "converged")))
        if any(r.startswith("starved") for r in reasons):
            starved[lib] = next(r for r in reasons if r.startswith("starved"))
    return {"gpu_s": gpu_s, "speedup": shipped_t / winner_t, "generations": gens, "starved": starved}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--equal-results", type=Path)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="oto-budget-bench-"))
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    if args.equal_results:
        equal_dir, equal_wall = args.equal_results, float("nan")
    else:
        equal_dir, equal_wall = run(root / "equal", None)
    equal = figures(equal_dir)
    cap = 2 * int(config["max_generations"])
    budget = {"budget": {"hours": equal["gpu_s"] / 3600}, "max_generations": cap}
    budget_dir, budget_wall = run(root / "budgeted", budget)
    budgeted = figures(budget_dir)
    print("| run | GPU s recorded | deck-weighted speed-up | generations run per library | wall s |")
    print("|---|---|---|---|---|")
    for name, f, wall in (("equal", equal, equal_wall), ("budgeted", budgeted, budget_wall)):
        gens = ", ".join(f"{lib.removeprefix('Cijk_')} {n}" for lib, n in f["generations"].items())
        print(f"| {name} | {f['gpu_s']:.1f} | {f['speedup']:.4f}× | {gens} | {wall:.0f} |")
    print(f"\nbudget: {budget['budget']['hours'] * 3600:.1f} s, max_generations {budget['max_generations']}")
    print(f"budgeted / equal speed-up: {budgeted['speedup'] / equal['speedup']:.4f}")
    for lib, why in budgeted["starved"].items():
        print(f"starved {lib}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
