"""CPU of whole demos per rule: gfx90c's and gfx1103's, in fresh clones of one or two checkouts, back to back.

Each run is the README's demo command (``snakemake --cores 1 results/<arch>/TensileLibrary.dat --config
arch=<arch>``) in its own fresh clone; ``name:arch:F1,F2`` runs it with ``families=[F1,F2]`` instead of the
arch's demo families (gfx90c on two 125-size families tunes about as many sizes as gfx1103's demo). Every
Python process of the run (Snakemake's and each job's) records its own user + system CPU at exit through a
``sitecustomize`` this bench puts first on ``PYTHONPATH``; the table sums them per rule (the job script's
name) and gives the wall time, the jobs and the load average around each run. Runs go in the order given,
so alternate the checkouts to share the machine's drift:

    python bench/demo_cpu_bench.py --tree base=/tmp/base-clone --tree new=. \\
        --runs base:gfx90c new:gfx90c new:gfx1103 base:gfx1103 new:gfx90c:DB_GB,ZB_GB
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SITE = """import atexit, os, resource, sys
def _oto_cpu_record():
    r = resource.getrusage(resource.RUSAGE_SELF)
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "?"
    with open(os.environ["OTO_CPU_RECORD"], "a") as fh:
        fh.write(f"{name}\\t{r.ru_utime + r.ru_stime:.3f}\\n")
atexit.register(_oto_cpu_record)
"""
JOB_SCRIPT = re.compile(r"tmp[^.]*\.(\w+)\.py$")  # Snakemake's copy of scripts/<rule>.py


def rule_of(process: str) -> str:
    m = JOB_SCRIPT.match(process)
    return m.group(1) if m else process  # "snakemake" for the scheduler's own process


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_demo(name: str, tree: Path, arch: str, work: Path, families: str = "", run: int = 0) -> dict:
    clone = work / f"{run}-{name}-{arch}{'-' + families.replace(',', '-') if families else ''}"
    subprocess.run(["git", "clone", "-q", str(tree), str(clone)], check=True)
    shared = work / "shared"  # ../shared beside the clone, as beside the checkout
    if not shared.exists() and (tree.parent / "shared").exists():
        shared.symlink_to((tree.parent / "shared").resolve())
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    record = clone.with_suffix(".tsv")
    site = work / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITE)
    env = {**os.environ, "PYTHONPATH": str(site), "OTO_CPU_RECORD": str(record)}
    snakemake = Path(sys.executable).with_name("snakemake")
    before, t0 = load(), time.monotonic()
    config = [f"arch={arch}", *([f"families=[{families}]"] if families else [])]
    proc = subprocess.run(
        [str(snakemake), "--cores", "1", f"results/{arch}/TensileLibrary.dat", "--config", *config],
        cwd=clone, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.monotonic() - t0
    if proc.returncode:
        raise SystemExit(f"{clone}: the demo failed:\n{proc.stderr[-3000:]}")
    jobs = re.search(r"(\d+) jobs finished", proc.stdout + proc.stderr)
    per_rule: dict[str, list[float]] = collections.defaultdict(list)
    for line in record.read_text().splitlines():
        process, cpu = line.split("\t")
        per_rule[rule_of(process)].append(float(cpu))
    label = arch + (f" [{families}]" if families else "")
    return {"tree": name, "commit": head, "arch": label, "wall": wall, "jobs": int(jobs.group(1)),
            "rules": per_rule, "load": (before, load())}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="name=checkout (its HEAD is cloned)")
    ap.add_argument(
        "--runs", nargs="+", required=True, help="name:arch[:F1,F2], in the order to run them (F: families)"
    )
    args = ap.parse_args(argv)
    trees = {}
    for spec in args.tree:
        name, _, path = spec.partition("=")
        trees[name] = Path(path).resolve()
    results = []
    with tempfile.TemporaryDirectory(prefix="oto-demo-cpu-") as tmp:
        work = Path(tmp)
        for i, spec in enumerate(args.runs):  # a spec may repeat: each run its own clone
            name, _, rest = spec.partition(":")
            arch, _, families = rest.partition(":")
            results.append(run_demo(name, trees[name], arch, work, families, i))
            r = results[-1]
            total, jobs = sum(sum(v) for v in r["rules"].values()), r["jobs"]
            wall = r["wall"]
            loads = " -> ".join(r["load"])
            line = f"{name} ({r['commit']}) {r['arch']}: {jobs} jobs, wall {wall:.1f} s"
            line += f" ({wall / jobs:.3f} s/job)"
            print(f"{line}, CPU {total:.1f} s ({total / jobs:.3f} s/job), load {loads}", flush=True)
    rules = sorted(
        {k for r in results for k in r["rules"]},
        key=lambda k: -max(sum(r["rules"].get(k, [])) for r in results),
    )
    head = " | ".join(f"{r['tree']} {r['arch']}" for r in results)
    print(f"\n| rule | {head} |\n|---|" + "---|" * len(results))
    for k in rules:
        cells = []
        for r in results:
            v = r["rules"].get(k, [])
            cells.append(f"{sum(v):.1f} ({len(v)} × {sum(v) / len(v):.2f})" if v else "-")
        print(f"| {k} | " + " | ".join(cells) + " |")
    totals = [sum(sum(v) for v in r["rules"].values()) for r in results]
    print("| total CPU s | " + " | ".join(f"{t:.1f}" for t in totals) + " |")
    walls = [f"{r['wall']:.1f} ({r['wall'] / r['jobs']:.3f})" for r in results]
    print("| wall s (per job) | " + " | ".join(walls) + " |")


if __name__ == "__main__":
    main()
