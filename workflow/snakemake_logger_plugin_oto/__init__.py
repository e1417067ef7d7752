"""oto's Snakemake logger plugin: a quiet terminal for oto runs (``--logger oto``, which the workflow profile
profiles/default/config.yaml selects).

Snakemake finds logger plugins among the installed top-level modules named ``snakemake_logger_plugin_*``;
this one is installed with oto (``pip install -e .`` puts the workflow/ folder on the path). During a run
the terminal shows one line per finished job with done/total and the estimated time left
(:mod:`oto.run.progress`; the first line says what the run resumes and how long it should take), warnings and
errors in full, and at the end what this run built, where, the headline figures and whether the numbers may
be installed (:mod:`oto.reporting.summary`). Everything else Snakemake says (each job's rule, input, output,
reason) goes to the run's log, ``.snakemake/log/<date>.snakemake.log``, as before; ``--logger-oto-full``
shows it on the terminal too.

A dry-run (``-n``) prints oto's short plan (:mod:`oto.run.dry_run`: jobs per stage and per library, the
time estimate) instead of Snakemake's listing of every job; ``--logger-oto-full`` prints Snakemake's.
An error the workflow raises on purpose (a ``WorkflowError`` of the Snakefile or ``rules/*.smk``: a bad
config, a target outside the selection) is printed as its message alone, one line, without Snakemake's
wrapping and traceback (``--logger-oto-full`` shows them). ``--verbose`` and ``--debug-dag`` are passed
through unchanged, as is a dry-run with ``--quiet all``.

This module is imported whenever snakemake starts (plugin discovery), so it imports nothing heavy itself.
"""

# No `from __future__ import annotations`: the settings' field types must be real types (argparse reads them).
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

# Start-up chatter of a run: the run's log keeps it, the terminal does not.
NOISE = (
    "Building DAG of jobs",
    "Using shell:",
    "Provided cores:",
    "Provided resources:",
    "Rules claiming more threads",
    "Conda environments: ignored",
    "Singularity containers: ignored",
    "Assuming unrestricted shared filesystem",
    "Select jobs to execute",
    "Execute ",
    "Complete log",
    "Elapsed time",
    "Job stats",
    "Config file config/config.yaml is extended by additional config",
)
# How Snakemake prints a WorkflowError raised by the workflow's own files: at parse time (or in onstart) under
# a header naming file and line, over a traceback of 'File' lines; raised in an input function, inside an
# InputFunctionException, between "Error:" and the job's wildcards.
PARSE_ERROR = re.compile(
    r'^WorkflowError in file "[^"]*(?:\.smk|Snakefile)", line \d+:\n(.*?)(?=\n  File "|\Z)', re.S
)
INPUT_FUNCTION_ERROR = re.compile(r"^Error:\n  WorkflowError:\n(.*?)\nWildcards:", re.S | re.M)
# A target Snakemake has no rule for, under a results folder: the folder is the arch the config names
MISSING_RULE = re.compile(r"^No rule to produce (results/([^/\s]+)/\S*)", re.M)
ALWAYS = (LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR, LogEvent.ERROR)
INTERRUPTED = "Terminating processes on user request"  # Snakemake's scheduler, on Ctrl+C
QUIET_EVENTS = (
    LogEvent.JOB_INFO,
    LogEvent.JOB_STARTED,
    LogEvent.JOB_FINISHED,
    LogEvent.SHELLCMD,
    LogEvent.PROGRESS,
    LogEvent.RESOURCES_INFO,
    LogEvent.RUN_INFO,
    LogEvent.WORKFLOW_STARTED,
    LogEvent.GROUP_INFO,
    LogEvent.RULEGRAPH,
    LogEvent.DEBUG_DAG,
)


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    full: bool = field(
        default=False,
        metadata={
            "help": "oto logger: also show Snakemake's full output (each job's rule, input, output, reason) "
            "on the terminal; it always goes to .snakemake/log/",
            "required": False,
        },
    )


@dataclass
class _Job:
    rule: str
    wildcards: dict[str, Any]
    outputs: list[str]
    started: float


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        s = self.common_settings
        # Snakemake's own terminal handler, for everything shown as Snakemake shows it.
        self.inner = ColorizingTextHandler(
            nocolor=s.nocolor,
            stream=sys.stdout if s.stdout else sys.stderr,
            formatter=DefaultFormatter(s.quiet, s.show_failed_logs),
            filter=DefaultFilter(s.quiet, s.debug_dag, s.verbose, s.dryrun, s.printshellcmds),
        )
        self.stream = self.inner.stream
        self.full = bool(getattr(self.settings, "full", False))
        self.dryrun = bool(s.dryrun)
        quiet_all = any(str(getattr(q, "name", q)).lower() == "all" for q in (s.quiet or ()))
        self.passthrough = bool(s.verbose or s.debug_dag or (self.dryrun and (self.full or quiet_all)))
        self.progress = None  # oto.run.progress.RunProgress once the run's job stats are known
        self.opened = False  # the run's first line is printed at its first job, after the onstart hook
        self.jobs: dict[int, _Job] = {}
        self.planned_jobs: list[tuple[str, dict[str, Any]]] = []  # a dry-run's jobs
        self.outputs: list[str] = []
        self.failed: list[str] = []
        self.interrupted = False  # Ctrl+C: the jobs it stopped are no failure to fix
        self.errors = 0
        self.started = time.time()
        self.closed = False

    # -- LogHandlerBase
    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._emit(record)
        except Exception:  # noqa: BLE001  (a progress line must never break a run)
            self.inner.handle(record)

    def _emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if self.passthrough:
            self.inner.handle(record)
            return
        if record.msg is not None and str(record.msg).startswith(INTERRUPTED):
            self.interrupted = True
        if event == LogEvent.RUN_INFO:
            self._run_info(record)
        elif event == LogEvent.JOB_INFO:
            self._job_info(record)
        elif event == LogEvent.JOB_FINISHED and not self.dryrun:
            self._job_finished(record)
        elif event == LogEvent.JOB_ERROR:
            job = self.jobs.pop(int(getattr(record, "jobid", -1)), None)
            self.failed.append(str(getattr(record, "rule_name", "?")))
            if job is not None:
                self.outputs.extend(job.outputs)  # the folder the failed job worked in
            if self.interrupted and not self.full:
                return  # a job Ctrl+C stopped: its error block (no log yet) says nothing to fix
        if event in ALWAYS:
            self.errors += 1
            if not self.full and event == LogEvent.ERROR and (message := workflow_error(record)) is not None:
                self._write(f"oto: error: {message}")
                return
        if self.full or event in ALWAYS or record.levelno >= logging.WARNING:
            self.inner.handle(record)
            return
        if event in QUIET_EVENTS:
            return
        message = record.getMessage() if record.msg is not None else ""
        started = self.progress is not None or self.planned_jobs
        if message.startswith(NOISE) or (started and event is None):
            return  # start-up chatter, or Snakemake's own lines during the run: the log has them
        self.inner.handle(record)

    def close(self) -> None:
        if not self.closed and not self.passthrough:
            self.closed = True
            try:
                if self.dryrun and self.planned_jobs and not self.errors:
                    self._dry_run_plan()
                elif self.progress is not None and not self.dryrun:
                    self._summary()
            except Exception as exc:  # noqa: BLE001
                self._write(f"oto: no summary ({type(exc).__name__}: {exc})")
        super().close()

    # -- events
    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _run_info(self, record: logging.LogRecord) -> None:
        from oto.run.progress import RunProgress

        if self.dryrun or self.progress is not None:
            return  # a dry-run's plan is printed at its end; a run logs its job stats once
        stats = dict(getattr(record, "stats", {}) or {})
        stats.pop("total", None)
        # the jobs recorded in this folder are read with the estimate, which names the arch (_set_prior)
        self.progress = RunProgress(planned={k: int(v) for k, v in stats.items()})
        self.started = record.created

    def _job_info(self, record: logging.LogRecord) -> None:
        rule, wildcards = str(record.rule_name), dict(record.wildcards or {})
        if self.dryrun:
            self.planned_jobs.append((rule, wildcards))
            return
        if self.progress is not None and not self.opened:
            self._open()
        self.jobs[int(record.jobid)] = _Job(rule, wildcards, list(record.output or []), record.created)

    def _open(self) -> None:
        """The run's first line, at its first job: the onstart hook has written the estimate by then (the
        backend's seconds per GPU job, this machine's probe, what the run resumes)."""
        from oto.run.estimate import ESTIMATE_FILE, read_estimate

        self.opened = True
        estimate = read_estimate(ESTIMATE_FILE, pid=os.getpid())
        _set_prior(self.progress, estimate, fresh=True)
        self._write(self.progress.opening())
        log = _log_file()
        if log:
            self._write(f"oto: Snakemake's full output goes to {log}")

    def _job_finished(self, record: logging.LogRecord) -> None:
        from oto.run.progress import job_key, job_label

        job = self.jobs.pop(int(record.job_id), None)
        if job is None or self.progress is None:
            return
        now = record.created
        self.outputs.extend(job.outputs)
        self.progress.finish(job.rule, job_key(job.rule, job.wildcards), now - job.started)
        self._write(
            self.progress.line(job.rule, job_label(job.wildcards), now - job.started, now - self.started)
        )

    def _dry_run_plan(self) -> None:
        from collections import Counter

        from oto.run.dry_run import plan_lines, remembered, stage_jobs
        from oto.run.estimate import plan_document
        from oto.run.progress import RunProgress

        plan, jobs_done = remembered()
        planned = Counter(rule for rule, _ in stage_jobs(self.planned_jobs))
        progress = RunProgress(planned=dict(planned))
        estimate = {"gpu_seconds": {}} if plan is None else plan_document(plan)
        _set_prior(progress, estimate, fresh=False)
        resumed = jobs_done() if jobs_done is not None else None
        cap, warning = (estimate or {}).get("size_cap"), (estimate or {}).get("workload_warning")
        for line in plan_lines(self.planned_jobs, progress.how_long(), resumed, cap, warning):
            self._write(line)

    def _summary(self) -> None:
        from oto.reporting.summary import results_folders, run_summary
        from oto.run.estimate import fmt_duration

        elapsed = fmt_duration(time.time() - self.started)
        for folder in results_folders(self.outputs) or [None]:
            # the outputs tell the summary what this run built: the library, or a narrower target
            lines = run_summary(
                folder,
                self.progress.finished,
                elapsed,
                self.failed,
                _log_file(),
                built=self.outputs,
                interrupted=self.interrupted,
            )
            for line in lines:
                self._write(line)


def _set_prior(progress, estimate: dict[str, Any] | None, fresh: bool) -> None:
    """The run's estimate (GPU seconds, what it resumes), the jobs recorded in this folder and this machine's
    probe on ``progress``. A run's onstart measured the probe just now (``estimate['probe']``); a dry-run, or
    a run without the hook, asks oto.run.probe (cached up to an hour for a dry-run)."""
    from oto.run.estimate import JOB_PROBE_RATIO, recorded_durations
    from oto.run.probe import Probe, job_probe

    progress.estimate = estimate
    # the jobs recorded in this folder, only this arch's where the estimate names it: another arch's deck
    # may be far larger
    arch = (estimate or {}).get("arch")
    progress.recorded = recorded_durations(arch=str(arch) if arch else None)
    progress.recorded_arch = str(arch) if arch else None
    figure = (estimate or {}).get("probe")
    probe = Probe.from_document(figure, time.time()) if figure else None
    if probe is None and progress.learning:  # durations recorded in this folder come first
        probe = job_probe(max_age_s=0 if fresh else 3600)
    if probe is not None:
        progress.job_seconds = probe.seconds * JOB_PROBE_RATIO
        progress.job_seconds_note = f"{probe.describe()}; a mean job is ~{JOB_PROBE_RATIO:g}× that"
        if probe.unsure:  # the probe and the load average disagree on how busy the cores are
            progress.job_seconds_range = tuple(s * JOB_PROBE_RATIO for s in probe.span())
    resumed = (estimate or {}).get("resumed")
    if resumed:
        progress.resumed = (int(resumed[0]), int(resumed[1]))


def workflow_error(record: logging.LogRecord) -> str | None:
    """The message alone of a WorkflowError the workflow raised on purpose, else None (printed in full)."""
    text = record.getMessage() if record.msg is not None else ""
    exception = getattr(record, "exception", None)
    found = None
    if exception == "MissingRuleException" and (missing := MISSING_RULE.search(text)):
        return missing_target(missing.group(1), missing.group(2))
    if exception == "WorkflowError":
        found = PARSE_ERROR.match(text)
    elif exception == "InputFunctionException":
        found = INPUT_FUNCTION_ERROR.search(text)
    if found is None:
        return None
    lines = [line.strip() for line in found.group(1).splitlines() if line.strip()]
    return " ".join(lines) or None


def missing_target(target: str, arch: str) -> str | None:
    """What to say of a target Snakemake has no rule for in ``results/<arch>/`` where ``arch`` has a profile:
    a run fills the folder of the arch its config names, and the likeliest slip is the README's target with
    another GPU's name and the config's arch left as it was (Snakemake alone says "No rule to produce").
    None elsewhere: Snakemake's message is printed in full."""
    if not Path("arch_profiles", f"{arch}.yaml").is_file():
        return None
    return (
        f"no rule makes {target} in this run: a run fills results/<arch>/ for the arch its config names "
        f"(field 'arch', config/config.yaml); to tune {arch}, add --config arch={arch}"
    )


def _log_file() -> str | None:
    """The newest Snakemake log of this folder: the current run's."""
    logs = sorted(Path(".snakemake", "log").glob("*.snakemake.log"), key=os.path.getmtime)
    return str(logs[-1]) if logs else None
