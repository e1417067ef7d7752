"""What a job of this workflow costs on this machine, now: the measure behind a run's first time estimate.

Every rule job is its own Python process: the interpreter starts, Snakemake's script preamble imports part of
Snakemake and unpickles the job, the stage imports oto, pandas and numpy and reads and writes a few YAML
files. On the simulator that start-up, not the simulated GPU, is most of a job (bench/RESULTS.md:
orchestration is about twice the GPU work). The probe runs exactly that start-up in a fresh interpreter
(``PROBE_CODE``: the preamble's imports, numpy, pandas, oto's stage context, a YAML round trip; ~0.5 s of
CPU on the 2-core development VM) ``PROBE_MIN_RUNS`` to ``PROBE_RUNS`` times within ``PROBE_BUDGET_S`` and
takes two things from it:

* **the CPU a job costs here**: the median run's CPU seconds (the child's user + system time), which depends
  mostly on the machine, little on how busy it is (0.52 s at a load of 11, 0.64 s at 16 on the development
  VM: caches shared with the other processes);
* **the share of a core a job gets now** (its contention, wall / CPU ≥ 1): what the scheduler gave the probe
  during these seconds. Over six ``--probe-check`` rows (idle, a load just started, a load running a minute;
  bench/RESULTS.md) it came within a mean factor of 1.3 of what the eight jobs after it met, where the
  1-minute load average's (load + 1) / cores fell short under load (a mean factor of 1.6, up to 2.2): the
  load average is a part of the range only.

``Probe.seconds`` = CPU × contention: a job's start-up here now, in seconds. A run's opening estimate
multiplies it by ``JOB_PROBE_RATIO`` (oto.run.estimate: a mean demo job in probe seconds). Where the probe's
contention and the load average's disagree by more than ``UNSURE_SPREAD``, the opening gives the range
between them beside the central figure.

The figure is cached in ``.snakemake/oto/probe.json`` for this machine, Python and oto version: a dry-run and
``oto plan`` reuse a figure younger than ``CACHE_MAX_AGE_S``; a run measures afresh when it starts (the load
on the machine is part of the figure).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PROBE_FILE = Path(".snakemake") / "oto" / "probe.json"
PROBE_RUNS = 3
PROBE_MIN_RUNS = 2  # one run alone is at the mercy of the moment's scheduling
PROBE_BUDGET_S = 2.5  # no further run once this much wall time is spent (PROBE_MIN_RUNS always run)
PROBE_TIMEOUT_S = 30.0  # a probe run this slow says the machine is swamped; the estimate says it is learning
CACHE_MAX_AGE_S = 3600.0
UNSURE_SPREAD = 1.5  # the two contention figures this far apart: the opening gives a range
# A stage job's start-up: the imports of Snakemake's script preamble (snakemake.script's generated header),
# what a stage imports (numpy, pandas, oto's stage context), then a YAML document written and read back, as
# a stage reads its inputs and writes its outputs. {workflow}: the folder holding the oto package.
PROBE_CODE = (
    "import sys\n"
    "sys.path.insert(0, {workflow!r})\n"
    "import pickle, yaml\n"
    "from snakemake.logging import logger\n"
    "from snakemake.iocontainers import Snakemake\n"
    "from snakemake.shell import shell\n"
    "import numpy, pandas\n"
    "from oto.run.context import stage\n"
    "doc = {{'per_size': [{{'size_index': i, 'winner': f'k{{i:012x}}', 'score': 1.0 + i / 7,\n"
    "                     'verdict': 'win', 'sizes': [i, 2 * i, 1, 64]}} for i in range(64)]}}\n"
    "assert yaml.safe_load(yaml.safe_dump(pickle.loads(pickle.dumps(doc)))) == doc\n"
)


def load_contention(load: float, cores: int) -> float:
    """The inverse of the share of a core one more process gets: 1 while a core is free, else
    (load + 1) / cores."""
    return max(1.0, (load + 1.0) / max(1, cores))


@dataclass(frozen=True)
class Probe:
    seconds: float  # a job's start-up here now: cpu × contention (see the module's docstring)
    runs: list[float]  # every run's wall seconds
    measured_at: float  # epoch seconds
    cached: bool = False  # read from .snakemake/oto/probe.json rather than measured by this process
    cpu: list[float] = field(default_factory=list)  # every run's CPU seconds (user + system)
    load: float | None = None  # the 1-minute load average when the probe started
    cores: int | None = None

    @property
    def cpu_seconds(self) -> float:
        return statistics.median(self.cpu) if self.cpu else self.seconds

    @property
    def measured_contention(self) -> float:
        """Wall / CPU of the probe's median run (≥ 1): the share of a core it got while it ran."""
        if not self.cpu:
            return 1.0
        ratios = [w / max(c, 1e-3) for w, c in zip(self.runs, self.cpu, strict=False)]
        return max(1.0, statistics.median(ratios))

    @property
    def contention_range(self) -> tuple[float, float]:
        """The lower and higher of the two contention figures (the probe's, the load average's)."""
        figures = [self.measured_contention]
        if self.load is not None and self.cores:
            figures.append(load_contention(self.load, self.cores))
        return min(figures), max(figures)

    @property
    def unsure(self) -> bool:
        low, high = self.contention_range
        return high / low > UNSURE_SPREAD

    def span(self) -> tuple[float, float]:
        """A job's start-up at the lower and the higher contention figure."""
        low, high = self.contention_range
        return self.cpu_seconds * low, self.cpu_seconds * high

    def describe(self, now: float | None = None) -> str:
        when = "measured just now"
        if self.cached:
            age = max(0.0, (time.time() if now is None else now) - self.measured_at)
            when = f"measured {age / 60:.0f} min ago" if age >= 90 else f"measured {age:.0f} s ago"
        if not self.cpu:
            return f"a job's start-up here takes {self.seconds:.2f} s, {when}"
        load = f", load {self.load:.1f} on {self.cores} cores" if self.load is not None else ""
        return (
            f"a job's start-up here takes {self.seconds:.2f} s ({self.cpu_seconds:.2f} s of CPU × "
            f"{self.seconds / max(self.cpu_seconds, 1e-9):.1f} for the busy cores{load}), {when}"
        )

    def document(self) -> dict[str, Any]:
        """What the run's estimate file keeps of the probe (``from_document`` reads it back)."""
        return {
            "seconds": self.seconds,
            "runs": self.runs,
            "cpu": self.cpu,
            "load": self.load,
            "cores": self.cores,
        }

    @classmethod
    def from_document(cls, doc: dict[str, Any], measured_at: float) -> Probe:
        load = doc.get("load")
        return cls(
            seconds=float(doc["seconds"]),
            runs=[float(t) for t in doc["runs"]],
            measured_at=measured_at,
            cpu=[float(t) for t in doc.get("cpu") or []],
            load=None if load is None else float(load),
            cores=doc.get("cores"),
        )


def job_start_seconds(cpu: float, measured: float) -> float:
    """A job's start-up here now: the CPU it costs × the contention the probe met (its wall / CPU). The load
    average only bounds the range (``Probe.span``): on the development VM it fell short of the contention
    jobs met under load by half (bench/RESULTS.md, ``--probe-check``)."""
    return cpu * measured


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


def _run_once() -> tuple[float, float]:
    """One probe run: (wall seconds, CPU seconds of the child)."""
    workflow = str(Path(__file__).resolve().parents[2])  # the folder holding the oto package
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", PROBE_CODE.format(workflow=workflow)],
        check=True,
        capture_output=True,
        timeout=PROBE_TIMEOUT_S,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, min(max(cpu, 1e-3), wall)  # another child reaped meanwhile cannot make it exceed its wall


def measure(
    run: Callable[[], tuple[float, float]] = _run_once,
    runs: int = PROBE_RUNS,
    budget_s: float = PROBE_BUDGET_S,
    load: Callable[[], tuple[float, int]] | None = None,
) -> Probe:
    """Run the probe ``PROBE_MIN_RUNS`` to ``runs`` times, until ``budget_s`` of wall time is spent; ``load``
    gives (1-minute load average, cores) as the probe starts (default: os.getloadavg, os.cpu_count)."""
    load_avg, cores = (load or _machine_load)()
    walls: list[float] = []
    cpus: list[float] = []
    while len(walls) < runs and (len(walls) < PROBE_MIN_RUNS or sum(walls) < budget_s):
        wall, cpu = run()
        walls.append(wall)
        cpus.append(cpu)
    probe = Probe(0.0, walls, time.time(), cpu=cpus, load=load_avg, cores=cores)
    seconds = job_start_seconds(probe.cpu_seconds, probe.measured_contention)
    return Probe(seconds, walls, probe.measured_at, cpu=cpus, load=load_avg, cores=cores)


def _machine_load() -> tuple[float | None, int]:
    try:
        load = os.getloadavg()[0]
    except OSError:  # not every platform has it
        load = None
    return load, os.cpu_count() or 1


def read_cached(path: str | Path = PROBE_FILE, max_age_s: float = CACHE_MAX_AGE_S) -> Probe | None:
    """The cached figure, if it belongs to this machine, Python and oto and is younger than ``max_age_s``."""
    try:
        doc = json.loads(Path(path).read_text())
        probe = Probe.from_document(doc, float(doc["measured_at"]))
        probe = Probe(**{**asdict(probe), "cached": True})
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
