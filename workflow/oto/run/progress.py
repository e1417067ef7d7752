"""The run's progress as the terminal shows it: one line per finished job with done/total and the time left.

The time left is the expected work of the jobs still to run, scaled by how the run has gone so far:

* **the mean job** is this run's finished jobs (a GPU job: its seconds beyond the backend's estimate), drawn
  towards a prior as if ``PRIOR_JOBS`` jobs had taken it: the mean job of this folder's earlier runs
  (``.snakemake/metadata``), else this machine's probe × ``JOB_PROBE_RATIO`` (``job_seconds``: oto.run.probe,
  measured when the run starts). The first jobs of a run (the deck, a select that redraws the live
  dashboard) are among its slowest, and one of them alone would put every job at its length;
* **a rule's expected job** is its finished jobs drawn the same way, with weight ``RULE_PRIOR_JOBS``,
  towards the rule's recorded mean in this folder, else the mean job: the first job of a rule moves the
  estimate by a part of its deviation, not all of it;
* **a benchmark or finalize job** (the GPU's work) adds the backend's own estimate for the jobs still to run
  (:mod:`oto.run.estimate`, written when the run starts): the GPU work varies by library, the overhead not;
* **the pace**, wall time over summed job time (parallel jobs with ``--cores``, the scheduler's time between
  jobs), is drawn towards 1 with the weight of ``PRIOR_JOBS`` mean jobs.

Without a probe figure and nothing recorded, the first line says it is learning and gives the range of
``LEARNING_JOB_SECONDS``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oto.run.estimate import LEARNING_JOB_SECONDS, fmt_duration
from oto.stages import gpu_stages

GPU_RULES = gpu_stages()  # the stages declared gpu=True (oto.stages): benchmark, finalize, verify, compare
PRIOR_JOBS = 32  # weight of the prior mean job (recorded here, else the probe's) against this run's jobs
RULE_PRIOR_JOBS = 12  # weight of the mean job against a rule's own jobs
# A rule whose jobs run this many times longer (or shorter) than the mean job is another kind of job (a
# finalize racing thousands of sizes, a report): its own jobs alone say what the next one costs. A first job
# alone must be further off: in the demo a rule's first job is 2-9 times a later one (cold caches).
OWN_KIND_FACTOR = 4.0
FIRST_JOB_OWN_KIND_FACTOR = 10.0


def job_key(rule: str, wildcards: Mapping[str, Any]) -> str:
    """The estimate's key of a job (``<library>/gen<N>`` or ``<library>``), else a label of its wildcards."""
    lib, gen = wildcards.get("library"), wildcards.get("gen")
    if lib and gen is not None:
        return f"{lib}/gen{gen}"
    if lib:
        return str(lib)
    return " ".join(str(v) for k, v in wildcards.items() if k not in ("arch", "prefix"))


def job_label(wildcards: Mapping[str, Any]) -> str:
    """What a job works on, for its progress line: library and generation, family, or nothing."""
    parts = [str(wildcards[k]) for k in ("library", "family") if wildcards.get(k)]
    if wildcards.get("gen") is not None:
        parts.append(f"gen{wildcards['gen']}")
    return " ".join(parts)


@dataclass
class RunProgress:
    planned: dict[str, int]  # rule → jobs of this run (Snakemake's job stats)
    recorded: Mapping[str, list[float]] = field(default_factory=dict)  # earlier runs in this folder
    estimate: Mapping[str, Any] | None = None  # oto.run.estimate.record_run_estimate's document
    done: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # rule → [(key, seconds)]
    job_seconds: float | None = None  # a mean job on this machine now (probe × JOB_PROBE_RATIO), if measured
    job_seconds_note: str = ""  # where job_seconds comes from, for the first line
    # where the probe is unsure (oto.run.probe.Probe.unsure): the lower and higher mean job it allows
    job_seconds_range: tuple[float, float] | None = None
    resumed: tuple[int, int] | None = None  # (jobs of the target done before this run, jobs of the target)
    recorded_arch: str | None = None  # the arch ``recorded`` was narrowed to, if it was

    @property
    def total(self) -> int:
        return sum(self.planned.values())

    @property
    def finished(self) -> int:
        return sum(len(v) for v in self.done.values())

    @property
    def learning(self) -> bool:
        """No prior for the mean job: nothing recorded in this folder and no probe figure."""
        return not self._recorded_jobs() and self.job_seconds is None

    def finish(self, rule: str, key: str, seconds: float) -> None:
        self.done.setdefault(rule, []).append((key, max(0.0, float(seconds))))

    def _backend_seconds(self, rule: str) -> dict[str, float]:
        return dict(((self.estimate or {}).get("gpu_seconds") or {}).get(rule) or {})

    def _jobs(self, rule: str) -> list[float]:
        """This run's finished jobs of ``rule``: their seconds, a GPU job's beyond the backend's estimate."""
        backend = self._backend_seconds(rule) if rule in GPU_RULES else {}
        return [max(0.0, s - backend.get(k, 0.0)) for k, s in self.done.get(rule) or []]

    def _own(self, rule: str) -> list[float]:
        """:meth:`_jobs` but the first. A rule's first job is its slowest (the first benchmark and normalise
        load pandas from a cold cache, the first select draws the live dashboard: 2-9 times a later one in
        the demo)."""
        return self._jobs(rule)[1:]

    def _recorded_jobs(self) -> list[float]:
        """The jobs recorded in this folder, but a GPU rule's (those hold the GPU's work too)."""
        return [s for rule, v in self.recorded.items() if rule not in GPU_RULES for s in v]

    def _prior_job(self, learning_seconds: float | None = None) -> float:
        prior = self._recorded_jobs()
        if prior:
            return sum(prior) / len(prior)
        if self.job_seconds is not None:
            return self.job_seconds
        if learning_seconds is not None:
            return learning_seconds
        return math.sqrt(math.prod(LEARNING_JOB_SECONDS))

    def mean_job(self, learning_seconds: float | None = None) -> float:
        """This run's mean job so far (GPU jobs: beyond the backend) drawn towards the prior mean job."""
        ran = [s for rule in self.done for s in self._own(rule)]
        return (sum(ran) + PRIOR_JOBS * self._prior_job(learning_seconds)) / (len(ran) + PRIOR_JOBS)

    def expected(self, rule: str, learning_seconds: float | None = None) -> float:
        """Expected seconds of one more job of ``rule`` (a GPU rule: its overhead beyond the backend)."""
        mean = self.mean_job(learning_seconds)
        recorded = self.recorded.get(rule) if rule not in GPU_RULES else None  # those hold the GPU work too
        prior = sum(recorded) / len(recorded) if recorded else mean
        jobs = self._jobs(rule)
        ran = jobs[1:]  # a first job alone within its factor is a cold start: not counted
        seen, far = (ran, OWN_KIND_FACTOR) if ran else (jobs, FIRST_JOB_OWN_KIND_FACTOR)
        if seen and prior > 0 and not 1 / far <= (sum(seen) / len(seen)) / prior <= far:
            return sum(seen) / len(seen)
        return (sum(ran) + RULE_PRIOR_JOBS * prior) / (len(ran) + RULE_PRIOR_JOBS)

    def remaining_work(self, learning_seconds: float | None = None) -> float:
        """Summed seconds of the jobs still to run, one after the other."""
        work = 0.0
        for rule, planned in self.planned.items():
            left = max(0, planned - len(self.done.get(rule) or []))
            if not left:
                continue
            work += left * self.expected(rule, learning_seconds)
            backend = self._backend_seconds(rule)
            if rule in GPU_RULES and backend:
                finished = {k for k, _ in self.done.get(rule) or []}
                todo = [s for k, s in backend.items() if k not in finished]
                if todo:  # the jobs of this run are among those the estimate lists
                    work += left * sum(todo) / len(todo)
        return work

    def pace(self, elapsed: float) -> float:
        """Wall seconds per second of job time, drawn towards 1 (one job after the other, no gaps)."""
        ran = sum(s for v in self.done.values() for _, s in v)
        weight = PRIOR_JOBS * self.mean_job()
        if elapsed <= 0 or ran <= 0:
            return 1.0
        return min(max((elapsed + weight) / (ran + weight), 0.1), 10.0)

    def time_left(self, elapsed: float) -> float:
        """Seconds until the run ends: the remaining work at the pace the run has kept so far."""
        return self.remaining_work() * self.pace(elapsed)

    def line(self, rule: str, label: str, seconds: float, elapsed: float) -> str:
        """One finished job, e.g. `` 57/214  benchmark  Cijk_Ailk_Bljk_DB gen1  2 s  · 1 min 20 s in, about
        2 min 10 s left``."""
        width = len(str(self.total))
        left = self.time_left(elapsed)
        tail = "done" if self.finished >= self.total else f"about {fmt_duration(left)} left"
        what = f"{rule:<10s} {label}".rstrip()
        return (
            f"{self.finished:>{width}d}/{self.total}  {what:<42s} {fmt_duration(seconds):>7s}"
            f"  · {fmt_duration(elapsed)} in, {tail}"
        )

    def how_long(self) -> str:
        """The time a run of the planned jobs should take, and what the figure rests on."""
        if self.learning:
            low, high = (self.remaining_work(s) for s in LEARNING_JOB_SECONDS)
            return (
                f"learning this machine's pace from the first jobs: between {fmt_duration(low)} and "
                f"{fmt_duration(high)}"
            )
        left = fmt_duration(self.time_left(0.0))
        if self._recorded_jobs():
            whose = f" for {self.recorded_arch}" if self.recorded_arch else ""
            return f"about {left} by the job durations recorded{whose} in this folder"
        note = self.job_seconds_note
        if self.job_seconds_range:  # the probe is unsure how busy the cores will be: how far off it may be
            low, high = (fmt_duration(self._prior_left(s)) for s in self.job_seconds_range)
            note = f"between {low} and {high}; {note}" if note else f"between {low} and {high}"
        return f"about {left} ({note})" if note else f"about {left}"

    def _prior_left(self, job_seconds: float) -> float:
        """The time left before any job ran, had the probe given ``job_seconds`` for the mean job."""
        return replace(self, job_seconds=job_seconds).time_left(0.0)

    def opening(self) -> str:
        """The line before the first job: what will run and how long it should take."""
        jobs = ", ".join(f"{r} {n}" for r, n in self.planned.items())
        head = f"oto: {self.total} jobs to run ({jobs})"
        if self.resumed and self.resumed[0] > 0:  # the jobs this run has to do come from its job stats
            done = self.resumed[0]
            head = (
                f"oto: resuming: {done} of {done + self.total} jobs already done in this folder; "
                f"{self.total} left ({jobs})"
            )
        backend = ""
        if self.estimate and self.estimate.get("backend"):
            backend = f"; backend {self.estimate.get('backend')} ({self.estimate.get('numbers')} numbers)"
        return f"{head}{backend}; {self.how_long()}"
