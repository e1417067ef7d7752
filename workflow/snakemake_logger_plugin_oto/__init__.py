"""oto's Snakemake logger plugin: a quiet terminal for oto runs (``--logger oto``, which the workflow profile
profiles/default/config.yaml selects).

Snakemake finds logger plugins among the installed top-level modules named ``snakemake_logger_plugin_*``;
this one is installed with oto (``pip install -e .`` puts the workflow/ folder on the path). During a run
the terminal shows one line per finished job with done/total and the estimated time left
(:mod:`oto.run.progress`), warnings and errors in full, and at the end what this run built, where, the
headline figures and whether the numbers may be installed (:mod:`oto.reporting.summary`). Everything else
Snakemake says (each job's rule, input, output, reason) goes to the run's log,
``.snakemake/log/<date>.snakemake.log``, as before; ``--logger-oto-full`` shows it on the terminal too.
Dry-runs, ``--verbose`` and ``--debug-dag`` are passed through unchanged.

This module is imported whenever snakemake starts (plugin discovery), so it imports nothing heavy itself.
"""

# No `from __future__ import annotations`: the settings' field types must be real types (argparse reads them).
import logging
import os
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
)
ALWAYS = (LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR, LogEvent.ERROR)
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
        self.passthrough = bool(s.dryrun or s.verbose or s.debug_dag)
        self.full = bool(getattr(self.settings, "full", False))
        self.progress = None  # oto.run.progress.RunProgress once the run's job stats are known
        self.jobs: dict[int, _Job] = {}
        self.outputs: list[str] = []
        self.failed: list[str] = []
        self.started = time.monotonic()
        self.estimate_read = False
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
        if event == LogEvent.RUN_INFO:
            self._run_info(record)
        elif event == LogEvent.JOB_INFO:
            self._job_info(record)
        elif event == LogEvent.JOB_FINISHED:
            self._job_finished(record)
        elif event == LogEvent.JOB_ERROR:
            job = self.jobs.pop(int(getattr(record, "jobid", -1)), None)
            self.failed.append(str(getattr(record, "rule_name", "?")))
            if job is not None:
                self.outputs.extend(job.outputs)  # the folder the failed job worked in
        if self.full or event in ALWAYS or record.levelno >= logging.WARNING:
            self.inner.handle(record)
            return
        if event in QUIET_EVENTS:
            return
        message = record.getMessage() if record.msg is not None else ""
        if message.startswith(NOISE) or (self.progress is not None and event is None):
            return  # start-up chatter, or Snakemake's own lines during the run: the log has them
        self.inner.handle(record)

    def close(self) -> None:
        if not self.closed and self.progress is not None and not self.passthrough:
            self.closed = True
            try:
                self._summary()
            except Exception as exc:  # noqa: BLE001
                self._write(f"oto: no summary ({type(exc).__name__}: {exc})")
        super().close()

    # -- events
    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _run_info(self, record: logging.LogRecord) -> None:
        from oto.run.estimate import recorded_durations
        from oto.run.progress import RunProgress

        stats = dict(getattr(record, "stats", {}) or {})
        stats.pop("total", None)
        self.progress = RunProgress(
            planned={k: int(v) for k, v in stats.items()}, recorded=recorded_durations()
        )
        self.started = time.monotonic()
        self._write(self.progress.opening())
        log = _log_file()
        if log:
            self._write(f"oto: Snakemake's full output goes to {log}")

    def _job_info(self, record: logging.LogRecord) -> None:
        self.jobs[int(record.jobid)] = _Job(
            str(record.rule_name), dict(record.wildcards or {}), list(record.output or []), time.monotonic()
        )

    def _job_finished(self, record: logging.LogRecord) -> None:
        from oto.run.progress import job_key, job_label

        job = self.jobs.pop(int(record.job_id), None)
        if job is None or self.progress is None:
            return
        if not self.estimate_read:
            self._read_estimate()
        now = time.monotonic()
        self.outputs.extend(job.outputs)
        self.progress.finish(job.rule, job_key(job.rule, job.wildcards), now - job.started)
        self._write(
            self.progress.line(job.rule, job_label(job.wildcards), now - job.started, now - self.started)
        )

    def _read_estimate(self) -> None:
        from oto.run.estimate import ESTIMATE_FILE, read_estimate

        # Written by the Snakefile's onstart, after the job stats are logged: read at the first finished job.
        self.progress.estimate = read_estimate(ESTIMATE_FILE)
        self.estimate_read = True

    def _summary(self) -> None:
        from oto.reporting.summary import results_folders, run_summary
        from oto.run.estimate import fmt_duration

        elapsed = fmt_duration(time.monotonic() - self.started)
        for folder in results_folders(self.outputs) or [None]:
            # the outputs tell the summary what this run built: the library, or a narrower target
            lines = run_summary(
                folder, self.progress.finished, elapsed, self.failed, _log_file(), built=self.outputs
            )
            for line in lines:
                self._write(line)


def _log_file() -> str | None:
    """The newest Snakemake log of this folder: the current run's."""
    logs = sorted(Path(".snakemake", "log").glob("*.snakemake.log"), key=os.path.getmtime)
    return str(logs[-1]) if logs else None
