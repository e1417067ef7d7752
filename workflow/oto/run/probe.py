"""What a job of this workflow costs on this machine, now: the measure behind a run's first time estimate.

Every rule job is its own Python process: the interpreter starts, Snakemake's script preamble imports part of
Snakemake and unpickles the job, the stage imports oto and reads and writes a few YAML files. On the
simulator that start-up, not the simulated GPU, is most of a job (bench/RESULTS.md: orchestration is about
twice the GPU work), and it scales with the machine and with how busy its cores are. The probe times exactly
that part, in wall time, in a fresh interpreter: Snakemake's script preamble imports and a YAML round trip
(``PROBE_CODE``). A run's opening estimate multiplies it by ``JOB_PROBE_RATIO`` (oto.run.estimate: a mean
job of the demo in probe seconds, measured by bench/workflow_bench.py).

The probe takes ~0.13 s of CPU (0.15 s of wall on an idle 2-core VM, 0.6-1.7 s with a dozen busy processes);
it runs two to ``PROBE_RUNS`` times within ``PROBE_BUDGET_S`` and keeps the median. Its figure is cached in
``.snakemake/oto/probe.json`` for this machine, Python and oto version: a dry-run and ``oto plan`` reuse a
figure younger than ``CACHE_MAX_AGE_S``; a run measures afresh when it starts (the load on the machine is
part of the figure).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROBE_FILE = Path(".snakemake") / "oto" / "probe.json"
PROBE_RUNS = 3
PROBE_MIN_RUNS = 2  # one run alone is at the mercy of the moment's scheduling
PROBE_BUDGET_S = 0.6  # no further run once this much wall time is spent (PROBE_MIN_RUNS always run)
PROBE_TIMEOUT_S = 20.0  # a probe run this slow says the machine is swamped; the estimate says it is learning
CACHE_MAX_AGE_S = 3600.0
# A stage job's start-up: the imports of Snakemake's script preamble (snakemake.script's generated header),
# then a YAML document written and read back, as a stage reads its inputs and writes its outputs.
PROBE_CODE = (
    "import pickle, yaml\n"
    "from snakemake.logging import logger\n"
    "from snakemake.iocontainers import Snakemake\n"
    "from snakemake.shell import shell\n"
    "doc = {'per_size': [{'size_index': i, 'winner': f'k{i:012x}', 'score': 1.0 + i / 7, 'verdict': 'win',\n"
    "                     'sizes': [i, 2 * i, 1, 64]} for i in range(64)]}\n"
    "assert yaml.safe_load(yaml.safe_dump(pickle.loads(pickle.dumps(doc)))) == doc\n"
)


@dataclass(frozen=True)
class Probe:
    seconds: float  # median wall seconds of one probe run
    runs: list[float]  # every run's wall seconds
    measured_at: float  # epoch seconds
    cached: bool = False  # read from .snakemake/oto/probe.json rather than measured by this process

    def describe(self, now: float | None = None) -> str:
        when = "measured just now"
        if self.cached:
            age = max(0.0, (time.time() if now is None else now) - self.measured_at)
            when = f"measured {age / 60:.0f} min ago" if age >= 90 else f"measured {age:.0f} s ago"
        return f"a job's start-up here takes {self.seconds:.2f} s, {when}"


def machine_key() -> dict[str, Any]:
    """What the probe's figure belongs to: this machine, this Python, this oto."""
    import oto

    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "oto": oto.__version__,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run_once() -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", PROBE_CODE],
        check=True,
        capture_output=True,
        timeout=PROBE_TIMEOUT_S,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return time.perf_counter() - t0


def measure(
    run: Callable[[], float] = _run_once, runs: int = PROBE_RUNS, budget_s: float = PROBE_BUDGET_S
) -> Probe:
    """Run the probe ``PROBE_MIN_RUNS`` to ``runs`` times, until ``budget_s`` of wall time is spent."""
    times: list[float] = []
    while len(times) < runs and (len(times) < PROBE_MIN_RUNS or sum(times) < budget_s):
        times.append(run())
    return Probe(seconds=statistics.median(times), runs=times, measured_at=time.time())


def read_cached(path: str | Path = PROBE_FILE, max_age_s: float = CACHE_MAX_AGE_S) -> Probe | None:
    """The cached figure, if it belongs to this machine, Python and oto and is younger than ``max_age_s``."""
    try:
        doc = json.loads(Path(path).read_text())
        probe = Probe(float(doc["seconds"]), [float(t) for t in doc["runs"]], float(doc["measured_at"]), True)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("key") != machine_key() or not 0 <= time.time() - probe.measured_at <= max_age_s:
        return None
    return probe


def job_probe(
    path: str | Path = PROBE_FILE,
    max_age_s: float = CACHE_MAX_AGE_S,
    measure_probe: Callable[[], Probe] = measure,
) -> Probe | None:
    """This machine's probe figure: cached when young enough (``max_age_s=0``: always measure), else measured
    and cached. None when the probe cannot run (the estimate then says it is learning)."""
    if max_age_s > 0 and (cached := read_cached(path, max_age_s)) is not None:
        return cached
    try:
        probe = measure_probe()
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        from oto.files import atomic_write_text

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        doc = {**asdict(probe), "key": machine_key()}
        del doc["cached"]
        atomic_write_text(Path(path), json.dumps(doc, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only folder: the figure is still good for this run
    return probe
