"""The glue between a rule's ``script:`` file and a stage: logging to the rule's log, the profile, config."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oto
from oto.hardware.profile import load_profile


@dataclass
class StageContext:
    config: dict[str, Any]
    profile: dict[str, Any] | None

    def optional_input(self, smk, name: str) -> Path | None:
        value = getattr(smk.input, name, None)
        return Path(value) if value else None


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
    profile_path = getattr(smk.input, "profile", None)
    where = Path(oto.__file__).parent
    logging.getLogger("oto").info("rule %s, oto %s from %s", smk.rule, oto.__version__, where)
    try:
        yield StageContext(dict(smk.config), load_profile(profile_path) if profile_path else None)
    except Exception as exc:
        logging.getLogger("oto").exception("stage %s failed", smk.rule)
        handler.flush()
        # One line on the terminal; the traceback is in the rule's log, which Snakemake prints
        # (show-failed-logs) right after.
        print(f"oto {smk.rule}: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        handler.flush()
