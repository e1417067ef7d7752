"""The run's progress as the terminal shows it: one line per finished job with done/total and the time left.

The time left is the expected work of the jobs still to run, scaled by how the run has gone so far:

* a job's expected seconds are the mean recorded duration of its rule: this run's finished jobs of the rule,
  else the durations Snakemake recorded for the rule in this folder before (``.snakemake/metadata``), else
  the mean of this run's finished jobs drawn towards the mean job of this folder's earlier runs (or
  ``JOB_SECONDS`` in a new folder) as if ``PRIOR_JOBS`` jobs had taken that: the first jobs of a run (the
  deck, the ceilings) are among its slowest, and one of them alone would put every job at its length; a GPU
  rule's overhead, before any of its jobs finished, is drawn the same way from this run's other jobs;
* a benchmark or finalize job (the GPU's work) is the backend's own estimate for the jobs still to run
  (:mod:`oto.run.estimate`, written when the run starts) plus the overhead of the rule's finished jobs
  beyond their estimate (Python start-up, scoring): the GPU work varies by library, the overhead does not;
* the sum is scaled by wall time over summed job time so far, which accounts for parallel jobs
  (``--cores``) and for the scheduler's own time between jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oto.run.estimate import JOB_SECONDS, fmt_duration
from oto.stages import gpu_stages

GPU_RULES = gpu_stages()  # the stages declared gpu=True (oto.stages): benchmark, finalize, verify, compare
PRIOR_JOBS = 8  # weight of the prior mean job (recorded here, else JOB_SECONDS) against this run's jobs


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
    estimate: Mapping[str, Any] | None = None  # oto.run.estimate.write_estimate's document
    done: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # rule → [(key, seconds)]

    @property
    def total(self) -> int:
        return sum(self.planned.values())

    @property
    def finished(self) -> int:
        return sum(len(v) for v in self.done.values())

    def finish(self, rule: str, key: str, seconds: float) -> None:
        self.done.setdefault(rule, []).append((key, max(0.0, float(seconds))))

    def _backend_seconds(self, rule: str) -> dict[str, float]:
        return dict(((self.estimate or {}).get("gpu_seconds") or {}).get(rule) or {})

    def _drawn_to_prior(self, seconds: list[float]) -> float:
        """The mean of these jobs of this run, drawn towards the mean job of this folder's earlier runs (else
        JOB_SECONDS) as if PRIOR_JOBS jobs had taken that."""
        prior = [s for v in self.recorded.values() for s in v]
        base = sum(prior) / len(prior) if prior else JOB_SECONDS
        return (sum(seconds) + PRIOR_JOBS * base) / (len(seconds) + PRIOR_JOBS)

    def expected(self, rule: str) -> float:
        """Expected seconds of one more job of ``rule`` (a GPU rule: its overhead beyond the backend)."""
        ran = self.done.get(rule) or []
        if rule in GPU_RULES:
            backend = self._backend_seconds(rule)
            if ran:
                return max(0.0, sum(s - backend.get(k, 0.0) for k, s in ran) / len(ran))
            return self._drawn_to_prior([s for r, v in self.done.items() if r not in GPU_RULES for _, s in v])
        if ran:
            return sum(s for _, s in ran) / len(ran)
        if self.recorded.get(rule):
            return sum(self.recorded[rule]) / len(self.recorded[rule])
        return self._drawn_to_prior([s for v in self.done.values() for _, s in v])

    def remaining_work(self) -> float:
        """Summed seconds of the jobs still to run, one after the other."""
        work = 0.0
        for rule, planned in self.planned.items():
            left = max(0, planned - len(self.done.get(rule) or []))
            if not left:
                continue
            work += left * self.expected(rule)
            backend = self._backend_seconds(rule)
            if rule in GPU_RULES and backend:
                finished = {k for k, _ in self.done.get(rule) or []}
                todo = [s for k, s in backend.items() if k not in finished]
                if todo:  # the jobs of this run are among those the estimate lists
                    work += left * sum(todo) / len(todo)
        return work

    def time_left(self, elapsed: float) -> float:
        """Seconds until the run ends: the remaining work at the pace the run has kept so far."""
        ran = sum(s for v in self.done.values() for _, s in v)
        pace = elapsed / ran if ran > 0 and elapsed > 0 else 1.0
        return self.remaining_work() * min(max(pace, 0.1), 10.0)

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

    def opening(self) -> str:
        """The line before the first job: what will run and how long it should take."""
        jobs = ", ".join(f"{r} {n}" for r, n in self.planned.items())
        backend = ""
        if self.estimate:
            backend = f"; backend {self.estimate.get('backend')} ({self.estimate.get('numbers')} numbers)"
        basis = (
            "by the job durations recorded in this folder"
            if self.recorded
            else f"at {JOB_SECONDS:g} s a job until this run's jobs tell (none recorded in this folder yet)"
        )
        left = fmt_duration(self.time_left(0.0))
        return f"oto: {self.total} jobs to run ({jobs}){backend}; about {left} {basis}"
