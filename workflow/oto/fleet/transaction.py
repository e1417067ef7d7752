"""A merge is a transaction: the previous result stays whole until the new one is complete.

* **One merge at a time** per results folder and arch: :func:`merge_lock` takes a kernel lock (``flock`` on
  ``<out>/.<arch>.merge.lock``) and refuses a second merge with the first one's pid and start time. The kernel
  releases it when the process ends, however it ends: a killed merge leaves no lock behind.
* **Staging**: a merge writes everything into ``<out>/.<arch>.merging/`` and :func:`commit` moves it into
  place at the end (the old folder renamed aside, the new one renamed in, the old one removed). Its
  ``fleet/merge.yaml`` is written last: a staging folder without it is unfinished.
* **Recovery**: the next merge (under the lock) finishes or undoes whatever a killed one left
  (:func:`recover`): an unfinished staging folder is removed; killed between the two renames, the finished
  staging folder is moved in, or the previous result back. The previous result is never touched before that.
* **Kept bundles** (``fleet/bundles/<sha256[:16]>.oto.tar.gz``, :class:`KeptBundles`) are copied atomically
  (a temporary name, fsync, rename) and their bytes hashed again after writing. Every merge hashes every kept
  copy before using it: a damaged or missing one is fetched again from the source it came from (when that
  still has the same bytes), else reported as lost evidence, never merged damaged.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.fleet.bundle import SUFFIX, file_sha256

COMPLETE = Path("fleet") / "merge.yaml"  # written last into a staging folder


class MergeError(RuntimeError):
    pass


def staging_dir(out: Path, arch: str) -> Path:
    return Path(out) / f".{arch}.merging"


def previous_dir(out: Path, arch: str) -> Path:
    return Path(out) / f".{arch}.previous"


@contextlib.contextmanager
def merge_lock(out: Path, arch: str) -> Iterator[None]:
    """Hold the merge lock of ``<out>/<arch>`` (raises MergeError when another merge holds it)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f".{arch}.merge.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise MergeError(
            f"another oto merge ({holder}) is writing {out / arch}; wait for it to finish and run this one "
            "again (a killed merge leaves no lock behind)"
        ) from None
    try:
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.pwrite(fd, f"pid {os.getpid()}, started {stamp}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover(out: Path, arch: str) -> str | None:
    """Finish or undo a merge that was killed (call under the lock); returns what was done, or None."""
    arch_dir, staging, previous = Path(out) / arch, staging_dir(out, arch), previous_dir(out, arch)
    note = None
    if previous.exists():
        if not arch_dir.exists() and (staging / COMPLETE).is_file():
            staging.rename(arch_dir)
            note = (
                "a merge was killed while moving its result into place: its finished result is now in place"
            )
        elif not arch_dir.exists():
            previous.rename(arch_dir)
            note = (
                "a merge was killed while moving its result into place: the previous result is back in place"
            )
        shutil.rmtree(previous, ignore_errors=True)
    if staging.exists():
        shutil.rmtree(staging)
        note = (
            note
            or "an unfinished merge (killed or failed) left a staging folder: removed, nothing of it kept"
        )
    if note:
        _fsync_dir(Path(out))
    return note


def begin(out: Path, arch: str) -> Path:
    """A fresh staging folder for this merge."""
    staging = staging_dir(out, arch)
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "fleet" / "bundles").mkdir(parents=True)
    return staging


def commit(staging: Path, arch_dir: Path) -> None:
    """Move the finished staging folder into place (its merge.yaml must be written)."""
    if not (staging / COMPLETE).is_file():
        raise MergeError(f"{staging}: unfinished (no {COMPLETE}); not moved into place")
    previous = previous_dir(arch_dir.parent, arch_dir.name)
    if previous.exists():
        shutil.rmtree(previous)
    if arch_dir.exists():
        arch_dir.rename(previous)
    staging.rename(arch_dir)
    _fsync_dir(arch_dir.parent)
    shutil.rmtree(previous, ignore_errors=True)


def copy_verified(src: Path, folder: Path) -> tuple[Path, str]:
    """``src`` copied into ``folder`` under its content's name, atomically and verified: the bytes are hashed
    as they are copied, synced, hashed again as written, then renamed into place. Returns (path, sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".incoming-{os.getpid()}-{time.monotonic_ns()}.tmp"
    h = hashlib.sha256()
    try:
        with open(src, "rb") as i, open(tmp, "wb") as o:
            while chunk := i.read(1 << 20):
                h.update(chunk)
                o.write(chunk)
            o.flush()
            os.fsync(o.fileno())
        sha = h.hexdigest()
        if file_sha256(tmp) != sha:
            raise MergeError(f"{src}: the copy kept under {folder} does not read back as written (disk?)")
        dst = folder / f"{sha[:16]}{SUFFIX}"
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return dst, sha


@dataclass
class KeptBundles:
    """The accepted bundles of earlier merges (``committed``) carried into this merge's staging folder:
    hard links of the verified copies, a fresh copy from the source of a damaged one, the rest lost."""

    committed: Path
    staging: Path
    good: list[tuple[Path, str]] = field(default_factory=list)  # (path in staging, sha256)
    restored: list[dict[str, Any]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)

    def carry(self, known: Sequence[Mapping[str, Any]], lost_before: Sequence[Mapping[str, Any]]) -> None:
        """Verify every kept copy against the sha256 the previous merge recorded (``known``: its accepted
        bundles) and bring it into staging; retry the sources of bundles lost before."""
        by_prefix = {str(k["sha256"])[:16]: dict(k) for k in known if k.get("sha256")}
        files = sorted(self.committed.glob(f"*{SUFFIX}")) if self.committed.is_dir() else []
        seen = set()
        for f in files:
            prefix = f.name.removesuffix(SUFFIX)
            entry = by_prefix.get(prefix, {"sha256": None, "file": f.name})
            seen.add(prefix)
            sha = file_sha256(f)
            if sha[:16] == prefix and entry["sha256"] in (None, sha):
                link = self.staging / f.name
                os.link(f, link)
                self.good.append((link, sha))
            else:
                self._refetch(entry, f"kept copy {f.name} is damaged (its sha256 is {sha[:12]}…)")
        for prefix, entry in sorted(by_prefix.items()):
            if prefix not in seen:
                self._refetch(entry, f"kept copy {prefix}{SUFFIX} is missing")
        for entry in lost_before:
            if str(entry.get("sha256"))[:16] not in seen:
                self._refetch(dict(entry), str(entry.get("cause") or "lost before"))

    def _refetch(self, entry: dict[str, Any], cause: str) -> None:
        why = cause
        src = Path(str(entry.get("source") or ""))
        if entry.get("sha256") and src.is_file():
            try:
                path, sha = copy_verified(src, self.staging)
            except OSError:
                path, sha = None, None
            if sha == entry["sha256"]:
                self.good.append((path, sha))
                self.restored.append({**_brief(entry), "why": cause, "from": str(src)})
                return
            if path is not None and sha != entry["sha256"]:
                path.unlink(missing_ok=True)
            why += f"; its source {src} now holds other bytes"
        elif entry.get("source"):
            why += f"; its source {src} is gone"
        self.lost.append({**_brief(entry), "cause": cause, "why": why})


def _brief(entry: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("file", "sha256", "device", "shard", "created_at", "source", "libraries")
    return {k: entry.get(k) for k in keys if k in entry}
