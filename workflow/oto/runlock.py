"""Stale Snakemake locks after a killed overnight run.

A SIGKILL'd (or power-cut) Snakemake leaves `.snakemake/locks/*` behind, and the next run refuses to start
until someone runs `snakemake --unlock`. oto promises that re-running the same command resumes, so every
Snakemake process that parses the workflow registers its PID under `.snakemake/oto-runs/`; when none of the
registered processes is still alive, the locks can only be stale and are removed. A live run (even one
started from another terminal) keeps its locks.
"""

from __future__ import annotations

import os
from pathlib import Path


def _is_snakemake(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"snakemake" in cmdline


def clear_stale_locks(root: str | Path = ".", pid: int | None = None) -> list[Path]:
    """Register this process and remove the lock files if no other registered run is alive."""
    pid = os.getpid() if pid is None else pid
    meta = Path(root) / ".snakemake"
    registry = meta / "oto-runs"
    registry.mkdir(parents=True, exist_ok=True)
    alive = False
    for entry in registry.iterdir():
        other = int(entry.name) if entry.name.isdigit() else -1
        if other != pid and other > 0 and _is_snakemake(other):
            alive = True
        elif other != pid:
            entry.unlink(missing_ok=True)
    removed: list[Path] = []
    locks = meta / "locks"
    if not alive and locks.is_dir():
        for lock in sorted(locks.glob("*.lock")):
            lock.unlink(missing_ok=True)
            removed.append(lock)
    (registry / str(pid)).touch()
    return removed
