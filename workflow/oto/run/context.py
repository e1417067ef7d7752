"""The glue between a rule's ``script:`` file and a stage: logging to the rule's log, the profile, config."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oto
from oto.deck import workload
from oto.hardware.profile import (
    ProfileError,
    ProfileView,
    load_profile,
    profile_view,
    read_profile_figures,
    view_paths,
)


@dataclass
class StageContext:
    config: dict[str, Any]
    # The stage's view of the arch profile (oto.run.profile_views): reading a field outside it raises.
    profile: Mapping[str, Any] | None
    profile_file: Path | None = None

    def optional_input(self, smk, name: str) -> Path | None:
        value = getattr(smk.input, name, None)
        return Path(value) if value else None

    def full_profile(self) -> dict[str, Any]:
        """The whole profile, for what is shown rather than depended on (the agent's prompt)."""
        return load_profile(self.profile_file)


def stage_profile(profile_file: str | Path, view: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The profile a stage may read: its view's fields, values from the file. The file must still hold the
    figures the workflow planned with (an edit mid-run would otherwise mix two GPUs in one run). The plan
    validated those figures, so a job reads them without validating again unless they differ."""
    if view is None:
        return load_profile(profile_file)
    full = read_profile_figures(profile_file)
    try:
        now = profile_view(full, view_paths(view))
    except (KeyError, TypeError, IndexError):  # a field gone or reshaped since the plan
        now = None
    if now != view:
        full = load_profile(profile_file)  # an edit that broke the file is named by its field first
        now = profile_view(full, view_paths(view))
        changed = [p for p in view_paths(view) if p not in view_paths(now) or _at(now, p) != _at(view, p)]
        raise ProfileError(
            f"{profile_file}: field '{changed[0] if changed else '?'}' changed since this run was planned; "
            "run the workflow again to re-plan with the new figures"
        )
    return ProfileView(full, view)


def _at(view: Mapping[str, Any], path: str) -> Any:
    for part in path.split("."):
        view = view[part]
    return view


@contextlib.contextmanager
def stage(smk) -> Iterator[StageContext]:
    """Log to the rule's log file; record any failure there too before Snakemake reports it. The terminal
    gets warnings and errors only: the run's progress is the oto logger's one line per job."""
    handler = logging.FileHandler(smk.log[0], mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setLevel(logging.WARNING)
    terminal.addFilter(lambda r: r.levelno < logging.ERROR)  # a failure is reported once, below
    terminal.setFormatter(logging.Formatter(f"{smk.rule}: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler, terminal]
    root.setLevel(logging.INFO)
    profile_file = getattr(smk.input, "profile", None)
    workload.CACHE = Path(".snakemake") / "oto" / "workload"  # the run's jobs share parsed workload files
    where = Path(oto.__file__).parent
    logging.getLogger("oto").info("rule %s, oto %s from %s", smk.rule, oto.__version__, where)
    try:
        profile = stage_profile(profile_file, getattr(smk.params, "profile", None)) if profile_file else None
        yield StageContext(dict(smk.config), profile, Path(profile_file) if profile_file else None)
    except Exception as exc:
        logging.getLogger("oto").exception("stage %s failed", smk.rule)
        handler.flush()
        # One line on the terminal; the traceback is in the rule's log, which Snakemake prints
        # (show-failed-logs) right after.
        print(f"oto {smk.rule}: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        handler.flush()
