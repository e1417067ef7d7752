"""The GPU-reset journal and the quarantine: a kernel that takes the GPU down is found and never run again.

On an APU a GPU reset is ordinary: a kernel that hangs the GPU makes the driver reset it, which kills the
desktop session and every process in it, the job included. Without a record, the resumed night runs the same
batch again and meets the same reset, all night. So:

- **Before each client call** (the tensile backend's ``tensile_client`` sweeps, the rocBLAS client runner's
  ``rocblas-bench`` calls) the kernels in flight are written to ``<journal>/calls/<id>.json`` and made durable
  (the file and its folder fsync'd) with the caller's pid, its start time and the boot id. The entry is
  removed when the call returns, whatever it returned: the process survived it.
- **A job that finds an entry of a process that died** (a reset, a reboot, an OOM kill, a power cut: the pid
  is gone, is another process now, or the boot id changed) runs those kernels one at a time first, each
  alone in its own journalled call (a *probe*). The kernel whose probe dies with its process is the one that
  takes the GPU down: the next job finds the probe's entry and **quarantines** it as ``gpu_reset``. A kernel
  whose probe returns is cleared; a dead call whose kernels all return alone is noted, nothing quarantined
  (a power cut, an unrelated kill).
- **Quarantined kernels are never run again on that device**: callers drop them before every call and
  record their cells as ``gpu_reset``. The quarantine is an append-only file of registry records
  (``<results>/<arch>/registry/quarantine.jsonl``: kind ``failed``, status ``gpu_reset``) that the registry's
  consolidation merges into the store and a tester's bundle carries to the merge.

So a resumed night meets a reset at most once more, in the probe that names its kernel, and never again
after. Every step is logged to ``<journal>/journal.log``. The journal is per machine (one results folder on
one device); recovery holds a lock, so two jobs never probe the same kernels.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.gemm import FamilyCodeError, Library
from oto.registry.records import COLUMNS, size_key

GPU_RESET = "gpu_reset"
KERNEL_ID = re.compile(r"^k[0-9a-f]{12}$")  # oto.tensile.params.candidate_id


def boot_id() -> str:
    """This boot's id (Linux); '' where the kernel does not say (then a reboot is not told apart)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22): with the
    pid it names one process, so a pid reused by another process is not mistaken for the caller."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def process_alive(pid: int, start: str, boot: str) -> bool:
    if boot and boot_id() and boot != boot_id():
        return False  # rebooted since: nothing of that boot runs
    if start and Path("/proc").is_dir():
        return process_start(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _durable_write(path: Path, text: str) -> None:
    """Write, fsync the file, rename into place and fsync the folder: the entry survives a power cut."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _durable_remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class InFlight:
    """One journalled client call: what ran, who ran it, and the kernels in flight."""

    path: Path
    call_id: str
    kind: str  # the caller's kind of call (tensile_client, rocblas-bench): who can probe it
    device: str
    pid: int
    start: str
    boot: str
    started_at: float
    kernels: tuple[dict[str, Any], ...]  # {"id", "library", ...: what the caller needs to run it alone}
    context: dict[str, Any]  # the caller's: how to run one of these kernels again
    probe_of: str  # the suspects file this probe tests a kernel of ('' for a normal call)

    @classmethod
    def read(cls, path: Path) -> InFlight | None:
        try:
            d = json.loads(path.read_text())
            return cls(
                path, str(d["call_id"]), str(d["kind"]), str(d["device"]), int(d["pid"]), str(d["start"]),
                str(d["boot"]), float(d["started_at"]), tuple(d["kernels"]), dict(d["context"]),
                str(d.get("probe_of", "")),
            )  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            return None  # torn by the crash itself: written atomically, so only a foreign file gets here

    def alive(self) -> bool:
        return process_alive(self.pid, self.start, self.boot)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        what = "probe" if self.probe_of else "call"
        return f"{self.kind} {what} {self.call_id} of pid {self.pid} started {when}"


@dataclass(frozen=True)
class Quarantined:
    library: str
    kernel_id: str
    device: str
    reason: str


class Quarantine:
    """The append-only ``quarantine.jsonl`` of one results folder: registry records (kind ``failed``, status
    ``gpu_reset``) of kernels whose call took the GPU down, each with the device it happened on."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def records(self) -> list[dict[str, Any]]:
        """Every readable record (a line torn by a crash is skipped)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("status") == GPU_RESET:
                    out.append(rec)
        return out

    def kernel_records(self) -> list[dict[str, Any]]:
        """The records that name a kernel by its id (a rocBLAS client call of an installation whose kernel at
        the size nobody named is quarantined under ``<arm>@<size>``: useful on this machine only)."""
        return [r for r in self.records() if KERNEL_ID.match(str(r.get("kernel_id")))]

    def entries(self) -> list[Quarantined]:
        out = []
        for r in self.records():
            device = json.loads(r.get("tool_versions") or "{}").get("device", "")
            out.append(Quarantined(str(r["library"]), str(r["kernel_id"]), str(device), str(r["reason"])))
        return out

    def on(self, device: str) -> dict[tuple[str, str], str]:
        """{(library, kernel id): reason} quarantined on ``device``."""
        return {(q.library, q.kernel_id): q.reason for q in self.entries() if q.device == device}

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one record, durably (fsync), under a lock: parallel jobs never interleave a line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({c: record.get(c) for c in COLUMNS}, sort_keys=True) + "\n"
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(self.path, "a") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())


def quarantine_record(entry: InFlight, kernel: Mapping[str, Any], arch: str, numbers: str) -> dict[str, Any]:
    """The registry record that quarantines ``kernel``, whose probe ``entry`` died with its process."""
    sizes = entry.context.get("sizes") or [[0, 0, 0, 0]]
    library = str(kernel.get("library", ""))
    try:
        lib = Library.parse(library)
        family, pattern = lib.family.code, lib.pattern
    except FamilyCodeError:
        family, pattern = "", ""
    return {
        "kind": "failed",
        "kernel_id": str(kernel["id"]),
        "library": library,
        "family": family,
        "pattern": pattern,
        "arch": arch,
        "generation": -1,
        "proposer": "",
        "status": GPU_RESET,
        "reason": (
            f"the GPU call running it alone died with its process ({entry.describe()}): a GPU reset, "
            f"reboot or kill; never run again on {entry.device}"
        ),
        "size": size_key(sizes[0]),
        "params": json.dumps(kernel.get("params") or {}, sort_keys=True),
        "protocol": "",
        "config_hash": "",
        "backend": entry.kind,
        "numbers": numbers,
        "tool_versions": json.dumps({"device": entry.device}),
        "run_id": "",
        "recorded_at": time.time(),
        "source": str(entry.path),
    }


Prober = Callable[[InFlight, Mapping[str, Any]], None]


class GpuJournal:
    """The in-flight calls of one machine's GPU (``folder``) and their recovery (see the module doc)."""

    def __init__(
        self, folder: Path, device: str, quarantine: Quarantine, arch: str, numbers: str = "measured"
    ):
        self.folder = Path(folder)
        self.device = device
        self.quarantine = quarantine
        self.arch = arch
        self.numbers = numbers

    @property
    def calls(self) -> Path:
        return self.folder / "calls"

    @property
    def suspects(self) -> Path:
        return self.folder / "suspects"

    def log(self, message: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.folder / "journal.log", "a") as fh:
            fh.write(f"{stamp} pid {os.getpid()}: {message}\n")
            fh.flush()
            os.fsync(fh.fileno())

    # -- calls
    @contextlib.contextmanager
    def call(
        self,
        kind: str,
        kernels: Sequence[Mapping[str, Any]],
        context: Mapping[str, Any],
        probe_of: str = "",
    ) -> Iterator[InFlight]:
        """Journal a client call around its ``with`` block: durable before the call starts, removed when
        the block ends (normally or with an exception: this process survived the call)."""
        call_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        path = self.calls / f"{call_id}.json"
        pid = os.getpid()
        doc = {
            "call_id": call_id,
            "kind": kind,
            "device": self.device,
            "pid": pid,
            "start": process_start(pid),
            "boot": boot_id(),
            "started_at": time.time(),
            "kernels": [dict(k) for k in kernels],
            "context": dict(context),
            "probe_of": probe_of,
        }
        _durable_write(path, json.dumps(doc, sort_keys=True, default=str))
        try:
            yield InFlight.read(path)  # type: ignore[misc]
        finally:
            _durable_remove(path)

    def orphans(self) -> list[InFlight]:
        """Entries of calls whose process died, oldest first."""
        found = [InFlight.read(p) for p in sorted(self.calls.glob("*.json"))] if self.calls.is_dir() else []
        return sorted((e for e in found if e is not None and not e.alive()), key=lambda e: e.started_at)

    def quarantined(self) -> dict[tuple[str, str], str]:
        """{(library, kernel id): reason} never to run on this device."""
        return self.quarantine.on(self.device)

    # -- recovery
    def recover(self, probers: Mapping[str, Prober]) -> list[str]:
        """Settle every dead call before this job's first call (see the module doc). ``probers`` runs one
        kernel alone for each kind of call this caller can make; a dead call of another kind is left for a
        caller that can. Returns what was done, one line each (also in ``journal.log``)."""
        if not self.calls.is_dir() and not self.suspects.is_dir():
            return []
        notes: list[str] = []
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "recover.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this job dies probing
            for entry in self.orphans():
                if entry.kind not in probers:
                    continue
                notes.append(self._settle(entry))
                self.log(notes[-1])  # at once: the next probe may take this job down
            for path in sorted(self.suspects.glob("*.json")) if self.suspects.is_dir() else []:
                notes += self._probe_suspects(path, probers)
        return notes

    def _settle(self, entry: InFlight) -> str:
        """A dead call: a probe's kernel is quarantined; a call's kernels become suspects to run alone."""
        if entry.probe_of:
            kernel = entry.kernels[0]
            self.quarantine.add(quarantine_record(entry, kernel, self.arch, self.numbers))
            self._drop_suspect(entry.probe_of, str(kernel["id"]))
            _durable_remove(entry.path)
            return (
                f"quarantined {kernel.get('library')}/{kernel['id']} as {GPU_RESET} on {self.device}: "
                f"its {entry.describe()} died with its process"
            )
        doc = {
            "call_id": entry.call_id,
            "kind": entry.kind,
            "described": entry.describe(),
            "context": entry.context,
            "remaining": list(entry.kernels),
            "total": len(entry.kernels),
            "cleared": [],
        }
        _durable_write(self.suspects / f"{entry.call_id}.json", json.dumps(doc, sort_keys=True, default=str))
        _durable_remove(entry.path)
        return (
            f"found {entry.describe()} dead with {len(entry.kernels)} kernel(s) in flight: "
            "running them one at a time"
        )

    def _drop_suspect(self, suspects_id: str, kernel_id: str, cleared: bool = False) -> None:
        path = self.suspects / f"{suspects_id}.json"
        if not path.exists():
            return
        doc = json.loads(path.read_text())
        doc["remaining"] = [k for k in doc["remaining"] if str(k["id"]) != kernel_id]
        if cleared:
            doc["cleared"].append(kernel_id)
        _durable_write(path, json.dumps(doc, sort_keys=True, default=str))

    def _probe_suspects(self, path: Path, probers: Mapping[str, Prober]) -> list[str]:
        doc = json.loads(path.read_text())
        if doc["kind"] not in probers:
            return []
        notes = []
        quarantined = self.quarantined()
        while doc["remaining"]:
            kernel = doc["remaining"][0]
            key = (str(kernel.get("library", "")), str(kernel["id"]))
            if key in quarantined:
                self._drop_suspect(doc["call_id"], key[1])
            else:
                with self.call(doc["kind"], [kernel], doc["context"], probe_of=doc["call_id"]) as probe:
                    try:
                        probers[doc["kind"]](probe, kernel)
                        outcome = "returned"
                    except Exception as exc:  # noqa: BLE001 - this process survived: not a reset
                        outcome = f"failed without taking the process down ({type(exc).__name__}: {exc})"
                self._drop_suspect(doc["call_id"], key[1], cleared=True)
                notes.append(f"{key[0]}/{key[1]} alone: {outcome} ({doc['described']})")
                self.log(notes[-1])
            doc = json.loads(path.read_text())
        if len(doc["cleared"]) == doc["total"]:
            notes.append(
                f"every kernel of {doc['described']} returned alone: the death is not attributed to one "
                "(a power cut or an unrelated kill), nothing quarantined"
            )
            self.log(notes[-1])
        _durable_remove(path)
        return notes
