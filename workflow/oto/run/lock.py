"""One run per working directory, and no stale lock after a killed night.

Snakemake's own lock files outlive a SIGKILL'd or power-cut run, and the next run then refuses to start
until someone runs ``snakemake --unlock``. oto's workflow profile turns them off (``nolock: true``) and the
Snakefile's ``onstart`` takes a kernel lock instead (``flock`` on ``.snakemake/oto-run.lock``) when a run
really starts. The kernel releases it when the process ends, however it ends, so re-running the same command
resumes at once, while a second run in the same folder is refused as long as the first is alive.

``onstart`` runs only for a run that executes jobs: parsing, ``-n`` and ``--lint`` take no lock and change
nothing on disk.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = Path(".snakemake") / "oto-run.lock"


class RunLockError(RuntimeError):
    pass


def acquire_run_lock(root: str | Path = ".") -> int:
    """Lock ``root`` for this process's lifetime; returns the descriptor, which the caller never closes.

    Raises :class:`RunLockError` naming the live run's pid when another process holds the lock."""
    path = Path(root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RunLockError(
            f"another oto run (pid {holder}) is running in {Path(root).resolve()}; wait for it to finish "
            "or stop it (a killed run leaves no lock behind)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
