"""The first time estimate against the real run (issue #27): the default demo, run as the README says
(``snakemake --cores 1 results/gfx90c/TensileLibrary.dat``) in a fresh scratch copy, on the machine as it is
("idle": the bench adds nothing) and under a CPU load the bench creates (one busy process per core).

Per run: the load average at the start, this machine's probe (``.snakemake/oto/estimate.json``: what the
run's onstart measured), the estimate of the run's first line, the command's wall time and the ratio of the
two (target: within ±30%), and the early time-left lines (the first 20 jobs) against the time that was
really left: the largest error and the spread between the highest and lowest line. ``ratio`` is the mean
job (Snakemake's record of each job, beyond the backend's own estimate) in probe seconds: the figure
``oto.run.estimate.JOB_PROBE_RATIO`` holds (``--fit``: fit it from these runs, the mean of their ratios).

    python bench/estimate_bench.py [--scenarios idle,loaded] [--repeat N] [--fit] [--log DIR] [--json FILE]
    python bench/estimate_bench.py --probe-check N

``--probe-check N``: no demo; N times, idle, under a load started just before the probe and under one
running a minute already, the probe and then eight job-like processes: the contention the jobs met against
the probe's own wall / CPU and the load average's (load + 1) / cores (how ``oto.run.probe`` chose its term).
``--json FILE`` keeps every run's figures (the probe's CPU and both contention figures among them).

Runs get a private TMPDIR (the simulated GPU's lock is then not shared with other oto runs on the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "bench"))

from oto.run.probe import Probe, load_contention  # noqa: E402
from workflow_bench import TARGET, job_durations, scratch_copy  # noqa: E402

LINE = re.compile(r"^\s*(\d+)/(\d+)  .*· (.+?) in, (?:about (.+?) left|done)$")
OPENING = re.compile(r"^oto: .*?; (?:about (.+?)(?: \(| by |$)|learning .*: between (.+?) and (.+?)$)")
FINISHED = re.compile(r"^oto: (\d+) jobs finished in (.+?)\.$")
EARLY = 20  # the early lines: the first 20 jobs


def seconds_of(text: str) -> float:
    """The seconds of oto.run.estimate.fmt_duration's text: 3 s, 4 min 10 s, 2 h 05 min, 3 d 4 h."""
    units = {"s": 1, "min": 60, "h": 3600, "d": 86400}
    parts = text.split()
    return float(sum(int(n) * units[u] for n, u in zip(parts[::2], parts[1::2], strict=True)))


def busy_cores(n: int) -> list[subprocess.Popen]:
    """One busy Python process per core: the load a run shares the machine with."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def job_sequence(metadata: Path) -> list[tuple[str, float, float]]:
    """(rule, start, end) of every job Snakemake recorded, in the order they ended: for replaying the
    time-left lines offline."""
    jobs: dict[tuple, list[float]] = {}
    for f in metadata.iterdir():
        meta = json.loads(f.read_text())
        key = (meta["rule"], meta.get("job_hash"))
        start, end = float(meta["starttime"]), float(meta["endtime"])
        jobs[key] = [min(start, jobs[key][0]), max(end, jobs[key][1])] if key in jobs else [start, end]
    return sorted(((rule, s, e) for (rule, _), (s, e) in jobs.items()), key=lambda j: j[2])


def probe_check(repeat: int, jobs: int = 8, settle_s: float = 60.0) -> None:
    """The probe, then ``jobs`` job-like processes (the probe's own code, run as the jobs that follow it would
    be), idle, under a load started just before the probe ("fresh") and under one running ``settle_s``
    already ("settled"): the contention the jobs met (their mean wall / CPU) against the two figures the
    probe has for it when it starts (its own wall / CPU; (load average + 1) / cores) and their geometric
    mean."""
    from oto.run.probe import _run_once, load_contention, measure

    cores = os.cpu_count() or 1
    print(
        f"{'scenario':9s} {'load':>5s} {'cpu s':>6s} {'probe w/c':>9s} {'load c':>7s} {'geo':>5s} "
        f"{'jobs w/c':>9s} {'job cpu':>8s}",
        flush=True,
    )
    for _ in range(repeat):
        for scenario in ("idle", "fresh", "settled"):
            busy = busy_cores(cores) if scenario != "idle" else []
            try:
                time.sleep(settle_s if scenario == "settled" else 1.0)
                probe = measure()
                runs = [_run_once() for _ in range(jobs)]
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
            wall, cpu = sum(w for w, _ in runs), sum(c for _, c in runs)
            load_c = load_contention(probe.load, cores)
            geo = (probe.measured_contention * load_c) ** 0.5
            print(
                f"{scenario:9s} {probe.load:5.1f} {probe.cpu_seconds:6.3f} {probe.measured_contention:9.2f} "
                f"{load_c:7.2f} {geo:5.2f} {wall / cpu:9.2f} {cpu / jobs:8.3f}",
                flush=True,
            )
            if scenario != "idle":
                time.sleep(settle_s)  # let the load average fall back before the next idle row


def run_demo(root: Path, env: dict, log: Path | None = None) -> dict:
    work = scratch_copy(REPO, root)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", TARGET],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"the demo failed:\n{proc.stderr[-3000:]}")
    out = (proc.stdout + proc.stderr).splitlines()
    if log is not None:
        log.write_text("\n".join(out) + "\n")
        log.with_suffix(".jobs.json").write_text(json.dumps(job_sequence(work / ".snakemake" / "metadata")))
    opening = next(m for m in map(OPENING.match, out) if m)
    estimate = seconds_of(opening.group(1)) if opening.group(1) else None
    finished = next(m for m in map(FINISHED.match, out) if m)
    run_s = seconds_of(finished.group(2))
    errors = []
    for m in map(LINE.match, out):
        if m and int(m.group(1)) <= EARLY and m.group(4):
            left = run_s - seconds_of(m.group(3))
            errors.append(seconds_of(m.group(4)) / max(left, 1.0) - 1)
    doc = json.loads((work / ".snakemake" / "oto" / "estimate.json").read_text())
    backend = sum(s for jobs in doc["gpu_seconds"].values() for s in jobs.values())
    durations = [d for ds in job_durations(work).values() for d in ds]
    probe = doc["probe"]["seconds"]
    parts = Probe.from_document(doc["probe"], 0.0)
    return {
        "load": load,
        "probe": probe,
        "estimate": estimate,
        "opening": out[next(i for i, line in enumerate(out) if OPENING.match(line))],
        "wall": wall,
        "run": run_s,
        "early_max": max(abs(e) for e in errors),
        "early_spread": max(errors) - min(errors),
        "jobs": len(durations),
        "ratio": (sum(durations) - backend) / len(durations) / probe,
        # the probe's parts: a mean job in CPU seconds of the probe, and the two contention figures
        "job": (sum(durations) - backend) / len(durations),
        "cpu": parts.cpu_seconds,
        "probe_contention": parts.measured_contention,
        "load_contention": load_contention(parts.load, parts.cores) if parts.load is not None else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="idle,loaded", help="comma-separated: idle, loaded")
    ap.add_argument("--repeat", type=int, default=1, help="runs per scenario")
    ap.add_argument("--fit", action="store_true", help="print the JOB_PROBE_RATIO these runs imply")
    ap.add_argument("--log", type=Path, help="keep each run's terminal output in this folder")
    ap.add_argument("--json", type=Path, help="write every run's figures to this file as they finish")
    ap.add_argument("--probe-check", type=int, default=0, metavar="N", help="no demo: probe vs a job")
    args = ap.parse_args()
    if args.probe_check:
        probe_check(args.probe_check)
        return
    from oto.run.estimate import JOB_PROBE_RATIO

    path = os.pathsep.join([str(REPO / "workflow"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("ANTHROPIC_API_KEY", None)
    rows = []
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
    if args.log:
        args.log.mkdir(parents=True, exist_ok=True)
    for scenario in args.scenarios.split(","):
        for _ in range(args.repeat):
            busy = busy_cores(os.cpu_count() or 1) if scenario == "loaded" else []
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    env["TMPDIR"] = str(Path(tmp) / "tmp")
                    (Path(tmp) / "tmp").mkdir()
                    log = args.log / f"{scenario}-{len(rows) + 1}.txt" if args.log else None
                    row = run_demo(Path(tmp), env, log)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
            rows.append((scenario, row))
            print(f"{scenario}: {row['opening']}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print(f"\nJOB_PROBE_RATIO {JOB_PROBE_RATIO:g}; early lines: jobs 1-{EARLY}")
    print(
        f"{'scenario':9s} {'load':>5s} {'probe s':>8s} {'estimate':>9s} {'wall s':>8s} {'est/wall':>9s} "
        f"{'early max':>10s} {'spread':>7s} {'ratio':>6s}"
    )
    for scenario, r in rows:
        est = f"{r['estimate']:.0f}" if r["estimate"] is not None else "range"
        share = f"{r['estimate'] / r['wall']:.2f}" if r["estimate"] is not None else "-"
        print(
            f"{scenario:9s} {r['load']:5.1f} {r['probe']:8.3f} {est:>9s} {r['wall']:8.1f} {share:>9s} "
            f"{r['early_max']:10.0%} {r['early_spread']:7.0%} {r['ratio']:6.2f}"
        )
    if args.fit:
        print(f"\nfit: JOB_PROBE_RATIO = {statistics.mean(r['ratio'] for _, r in rows):.2f}")


if __name__ == "__main__":
    main()
