"""CPU of single workflow jobs under two checkouts, alternated, on the same inputs.

Keep a finished run's job scripts: in a copy of its folder, force the jobs again with Snakemake's
``--skip-script-cleanup`` (their outputs come out the same), e.g.

    snakemake --cores 1 --config arch=gfx1103 --skip-script-cleanup --force \\
        results/gfx1103/Cijk_Alik_Bljk_I8II_BH_GB/gen1/samples.csv

and move ``.snakemake/scripts/*.py`` aside. Each kept script holds the job's pickled ``snakemake`` object and
the checkout's paths; this bench rewrites those paths (outside the pickle) to each checkout in turn and runs
the script in the run's folder as Snakemake would (a fresh ``python``), alternating the checkouts' order per
repetition, and prints the user + system CPU of every run. The kept measurements (``results/*/measurements``)
are removed before each run, so benchmark and finalize race as in a first run instead of reusing them.

    python bench/job_cpu_bench.py --work /tmp/run-copy --tree base=/tmp/base-clone --tree new=. \\
        --reps 3 kept/*.benchmark.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def job_script(script: Path, work: Path, tree: Path, out_dir: Path) -> Path:
    """The kept script with the run folder's checkout paths pointed at ``tree`` (never inside the pickle,
    whose strings are length-prefixed)."""
    text = script.read_text()
    head, sep, rest = text.partition("import pickle;")
    blob, sep2, tail = rest.partition("ub.');")

    def fix(s: str) -> str:
        for sub in ("rules", "scripts", "workflow"):
            s = s.replace(f"{work}/{sub}", f"{tree}/{sub}")
        return s

    out = out_dir / f"{tree.name}.{script.name}"
    out.write_text(fix(head) + sep + blob + sep2 + fix(tail))
    return out


def run_cpu(script: Path, work: Path) -> float:
    for kept in work.glob("results/*/measurements"):
        shutil.rmtree(kept)
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode()
    if status:
        raise SystemExit(f"{script} failed:\n{err[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="the run folder the scripts were kept in")
    ap.add_argument("--tree", action="append", required=True, help="NAME=checkout (two or more)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/job_cpu_bench"), help="rewritten scripts go here")
    ap.add_argument("scripts", nargs="+", type=Path)
    args = ap.parse_args(argv)
    trees = {n: Path(p).resolve() for n, p in (t.split("=", 1) for t in args.tree)}
    work = args.work.resolve()
    for script in args.scripts:
        cpu: dict[str, list[float]] = {n: [] for n in trees}
        for rep in range(args.reps):
            order = list(trees) if rep % 2 == 0 else list(trees)[::-1]
            for name in order:
                out_dir = args.out / name
                out_dir.mkdir(parents=True, exist_ok=True)
                cpu[name].append(run_cpu(job_script(script, work, trees[name], out_dir), work))
        shown = "  ".join(f"{n} {'/'.join(f'{x:.2f}' for x in v)} (min {min(v):.2f})" for n, v in cpu.items())
        print(f"{script.name}: {shown}", flush=True)


if __name__ == "__main__":
    main()
