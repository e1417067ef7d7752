"""Workflow benchmarks: the default demo end to end, and the dry-run of the full deck × 8 generations.

Prints one table row per scenario: wall time, peak RSS of the snakemake process tree, jobs, and the
target; then, for the demo, its jobs per rule × mean seconds per job (Snakemake's own record of every job's
start and end, .snakemake/metadata), split into the GPU's work (benchmark and finalize: the simulated
measurements) and the orchestration around it (every other job). Targets (issue #2, 2-core machine):
dry-run ≤ 10 s; demo ≤ 5 minutes; issue #18: orchestration small next to the benchmarks.

The floor under any one-process-per-job workflow is measured beside it (``--floor-jobs``, on by default): a
workflow of trivial ``script:`` jobs (Python start-up, Snakemake's script preamble, one file written) and of
trivial ``shell:`` jobs, each job's seconds recorded the same way.

    python bench/workflow_bench.py [--skip-demo] [--repeat N] [--tree DIR] [--floor-jobs N]

Runs get a private TMPDIR: the simulated GPU's lock (``oto-gpu0.lock`` in the temp folder, which serialises
benchmark jobs across processes) is then not shared with other oto runs or test suites on the machine.

``--tree`` times another checkout of oto (e.g. an earlier commit, for a before/after table): its files are
copied and its package comes first on PYTHONPATH, so its code runs, not this one's.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TARGET = "results/gfx90c/TensileLibrary.dat"
COPIED = ("Snakefile", "rules", "scripts", "config", "arch_profiles", "profiles", "workflow")


def scratch_copy(tree: Path, root: Path, overrides: dict | None = None) -> Path:
    work = root / "oto"
    work.mkdir()
    for name in COPIED:
        src = tree / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, work / name)
    if overrides:
        config = {**yaml.safe_load((tree / "config" / "config.yaml").read_text()), **overrides}
        (work / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    return work


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB of the child process tree (its largest process), and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return wall, peak, proc.stdout


def total_jobs(stdout: str) -> str:
    m = re.search(r"^total\s+(\d+)", stdout, re.M)
    return m.group(1) if m else "?"


def job_durations(work: Path) -> dict[str, list[float]]:
    """Per rule, each job's duration as Snakemake recorded it (oto.run.estimate.recorded_durations)."""
    from oto.run.estimate import recorded_durations

    return recorded_durations(work / ".snakemake" / "metadata")


FLOOR_SNAKEFILE = """
rule scripts:
    input:
        expand("script/{i}.txt", i=range(JOBS)),


rule shells:
    input:
        expand("shell/{i}.txt", i=range(JOBS)),


rule script_job:
    output:
        "script/{i}.txt",
    script:
        "touch.py"


rule shell_job:
    output:
        "shell/{i}.txt",
    shell:
        "touch {output}"
"""


def floor(root: Path, jobs: int, env: dict, snakemake: list[str]) -> dict[str, tuple[float, float]]:
    """Per kind of trivial job (a ``script:`` that writes its output, a ``shell: touch``): seconds per job as
    Snakemake records them, and the workflow's wall time per job (its scheduling between jobs included; its
    own start-up, a run with nothing to do, taken off).
    What one process per job costs before any work."""
    work = root / "floor"
    work.mkdir()
    (work / "Snakefile").write_text(FLOOR_SNAKEFILE.replace("JOBS", str(jobs)))
    (work / "touch.py").write_text("open(snakemake.output[0], 'w').close()\n")
    out = {}
    for kind in ("scripts", "shells"):
        wall = timed([*snakemake, kind, "--cores", "1", "--quiet", "all"], work, env)[0]
        wall -= timed([*snakemake, kind, "--cores", "1", "--quiet", "all"], work, env)[0]  # nothing to do
        durations = job_durations(work)[f"{kind[:-1]}_job"]
        out[kind[:-1]] = (sum(durations) / len(durations), wall / jobs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-demo", action="store_true", help="time the dry-run only")
    ap.add_argument("--repeat", type=int, default=3, help="dry-run repetitions (median reported)")
    ap.add_argument("--tree", type=Path, default=REPO, help="checkout of oto to time (default: this one)")
    ap.add_argument(
        "--floor-jobs", type=int, default=40, help="trivial script and shell jobs for the floor (0: skip)"
    )
    args = ap.parse_args()
    tree = args.tree.resolve()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree / "workflow"), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    snakemake = [sys.executable, "-m", "snakemake"]
    rows, per_rule, floor_rules = [], {}, {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        env["TMPDIR"] = str(Path(tmp) / "tmp")
        (Path(tmp) / "tmp").mkdir()
        (Path(tmp) / "dry").mkdir()
        work = scratch_copy(tree, Path(tmp) / "dry", {"families": "all", "max_generations": 8})
        runs = [timed([*snakemake, TARGET, "-n", "--quiet", "rules"], work, env) for _ in range(args.repeat)]
        runs.sort(key=lambda r: r[0])
        wall, peak, out = runs[len(runs) // 2]
        rows.append(("dry-run, families: all × 8 generations", wall, peak, total_jobs(out), "≤ 10 s"))
        if not args.skip_demo:
            (Path(tmp) / "demo").mkdir()
            work = scratch_copy(tree, Path(tmp) / "demo")
            wall, peak, out = timed([*snakemake, "--cores", "1", TARGET], work, env)
            per_rule = job_durations(work)
            jobs = sum(len(v) for v in per_rule.values())
            rows.append(("default demo, end to end (--cores 1)", wall, peak, f"{jobs} jobs", "≤ 300 s"))
        if args.floor_jobs > 0:
            floor_rules = floor(Path(tmp), args.floor_jobs, env, snakemake)
    print(f"tree {tree}; load average at the start {load:.1f}")
    print(f"{'scenario':45s} {'wall s':>8s} {'peak MB':>8s} {'jobs':>12s}  target")
    for name, wall, peak, jobs, target in rows:
        print(f"{name:45s} {wall:8.2f} {peak:8.0f} {jobs:>12s}  {target}")
    if per_rule:
        print(f"\n{'rule':12s} {'jobs':>5s} {'s per job':>10s} {'s total':>8s}")
        for rule, ds in sorted(per_rule.items(), key=lambda kv: -sum(kv[1])):
            print(f"{rule:12s} {len(ds):5d} {sum(ds) / len(ds):10.2f} {sum(ds):8.1f}")
        from oto.stages import gpu_stages  # the stages declared gpu=True

        gpu = sum(sum(ds) for r, ds in per_rule.items() if r in gpu_stages())
        other = [d for r, ds in per_rule.items() if r not in gpu_stages() for d in ds]
        print(
            f"\nGPU work (benchmark + finalize jobs): {gpu:.1f} s; orchestration (the other {len(other)} "
            f"jobs): {sum(other):.1f} s, {sum(other) / len(other):.2f} s per job"
        )
    for kind, (recorded, wall) in floor_rules.items():
        line = f"floor, trivial {kind} jobs: {recorded:.3f} s per job recorded, {wall:.3f} s of wall per job"
        if per_rule and kind == "script":
            line += f"; x {len(other)} orchestration jobs = {len(other) * recorded:.1f} s recorded"
        print(line)


if __name__ == "__main__":
    main()
