"""Workflow benchmarks: the default demo end to end, and the dry-run of the full deck × 8 generations.

Prints one table row per scenario: wall time, peak RSS of the snakemake process tree, jobs, and the
target. Targets (issue #2, 2-core machine): dry-run ≤ 10 s; demo ≤ 5 minutes.

    python bench/workflow_bench.py [--skip-demo] [--repeat N]
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TARGET = "results/gfx90c/TensileLibrary.dat"
sys.path.insert(0, str(REPO / "tests"))
from workflow_helpers import make_workdir  # noqa: E402  (the tests' scratch-copy helper)


def scratch_copy(root: Path, overrides: dict | None = None) -> Path:
    config = None
    if overrides:
        config = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), **overrides}
    return make_workdir(root, config)


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB of the child process tree (its largest process), and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return wall, peak, proc.stdout


def total_jobs(stdout: str) -> str:
    m = re.search(r"^total\s+(\d+)", stdout, re.M)
    return m.group(1) if m else "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="dry-run repetitions (median reported)")
    args = ap.parse_args()
    snakemake = [sys.executable, "-m", "snakemake"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "dry").mkdir()
        work = scratch_copy(Path(tmp) / "dry", {"families": "all", "max_generations": 8})
        runs = [timed([*snakemake, TARGET, "-n", "--quiet", "rules"], work) for _ in range(args.repeat)]
        runs.sort(key=lambda r: r[0])
        wall, peak, out = runs[len(runs) // 2]
        rows.append(("dry-run, families: all × 8 generations", wall, peak, total_jobs(out), "≤ 10 s"))
        if not args.skip_demo:
            (Path(tmp) / "demo").mkdir()
            work = scratch_copy(Path(tmp) / "demo")
            wall, peak, out = timed([*snakemake, "--cores", "1", TARGET], work)
            jobs = len(list((work / ".snakemake" / "metadata").iterdir()))
            rows.append(("default demo, end to end (--cores 1)", wall, peak, f"{jobs} outputs", "≤ 300 s"))
    print(f"{'scenario':45s} {'wall s':>8s} {'peak MB':>8s} {'jobs':>12s}  target")
    for name, wall, peak, jobs, target in rows:
        print(f"{name:45s} {wall:8.2f} {peak:8.0f} {jobs:>12s}  {target}")


if __name__ == "__main__":
    main()
