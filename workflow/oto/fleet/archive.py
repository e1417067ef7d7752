"""A bundle archive read as a stream, in bounded memory.

:func:`read_archive` reads the archive once, as a stream inflated in small steps (:class:`Inflater`: what
one step costs does not grow with the compression ratio; the whole stream counted against the bundle's
limit, what follows the tar's end included, and it must end with its end-of-stream marker). Every member's
header is checked before its bytes are read (regular files only; names inside the bundle; sizes under
:class:`Limits`), and its bytes are hashed as they stream past. Only the members the merge parses (small
YAML files, registry records, samples) are kept, and not in memory: they are appended to one anonymous
temporary file, read back one at a time. Logs and the other opaque members are hashed and forgotten. So
opening a bundle costs a few MiB of memory whatever it holds, and a merge of many bundles holds none of them.

Nothing is extracted onto the disk under its own name; nothing is trusted before :func:`check_manifest`.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import IO

from oto.fleet.bundle import MANIFEST
from oto.fleet.text import quote

_NAME = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
CHUNK = 1 << 20


class Rejected(ValueError):
    """A bundle that merges nothing; the message is the reason (data: escape it wherever it is shown)."""


@dataclass(frozen=True)
class Limits:
    """What one bundle, and one merge's new bundles together, may cost, checked before anything is inflated.

    A night on vega10's deck bundles a few MiB, but a night on navi31's (a 780M's) holds libraries of 4,868
    sizes: one library's finalize samples alone inflate to ~75 MB (628,000 launches; 14.7 MB compressed with
    the rest of its bundle). So the per-member and per-bundle figures below are floors, raised for an archive
    to ``inflation_ratio`` times its compressed size (up to the ceilings): a night's CSV and YAML inflate ~5x,
    a bomb hundreds or thousands of times, and what an archive of incompressible bytes may cost is bounded by
    ``archive_bytes``."""

    archive_bytes: int = 512 << 20  # the compressed file
    member_bytes: int = 64 << 20  # one member, inflated (floor)
    parsed_member_bytes: int = 32 << 20  # one member the merge parses (registry, samples, YAML; floor)
    total_bytes: int = 256 << 20  # every member of one bundle, inflated (floor)
    members: int = 20000
    merge_bytes: int = 4 << 30  # the new bundles of one merge together, inflated; the ceiling of one bundle
    inflation_ratio: int = 16  # an archive may inflate this many times its size above the floors (0: never)
    largest_member_bytes: int = 512 << 20  # the ceiling of one member, parsed or not

    def for_archive(self, size: int) -> Limits:
        """The limits an archive of ``size`` compressed bytes is held to: the floors, raised to
        ``inflation_ratio`` x ``size`` up to the ceilings."""
        allowance = self.inflation_ratio * int(size)
        member = min(allowance, self.largest_member_bytes)
        return replace(
            self,
            member_bytes=max(self.member_bytes, member),
            parsed_member_bytes=max(self.parsed_member_bytes, member),
            total_bytes=max(self.total_bytes, min(allowance, self.merge_bytes)),
        )


@dataclass
class Budget:
    """Inflated bytes left for the new bundles of one merge (``Limits.merge_bytes``): a flood of bundles
    within every per-bundle limit still cannot keep a merge busy for hours. Kept bundles, accepted before,
    are never refused for it."""

    left: int

    def charge(self, nbytes: int) -> None:
        self.left -= nbytes


@dataclass
class Archive:
    """A read archive: the sha256 of every member, and the parsed members in a spool file."""

    hashes: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    spool: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile())  # noqa: SIM115 (closed by close())
    index: dict[str, tuple[int, int]] = field(default_factory=dict)  # name → (offset, length) in the spool
    inflated: int = 0  # bytes of every member together

    def __contains__(self, name: str) -> bool:
        return name in self.hashes

    def read(self, name: str) -> bytes:
        offset, length = self.index[name]
        self.spool.seek(offset)
        return self.spool.read(length)

    def close(self) -> None:
        self.spool.close()


def read_archive(path: Path, limits: Limits, parsed: Callable[[str], bool]) -> Archive:
    """Every member of the bundle at ``path`` checked and hashed; the members ``parsed(name)`` selects kept
    for reading. Raises Rejected with the member and the reason."""
    size = path.stat().st_size
    if size > limits.archive_bytes:
        raise Rejected(f"archive is {size} bytes, more than the {limits.archive_bytes} a bundle may have")
    limits = limits.for_archive(size)
    archive = Archive()
    try:
        with open(path, "rb") as raw:
            stream = Inflater(raw, limits.total_bytes + limits.total_bytes // 8 + (1 << 20))  # + tar headers
            with tarfile.open(fileobj=stream, mode="r|", bufsize=CHUNK) as tar:
                for info in tar:
                    _check_header(info, archive, limits)
                    _take(tar, info, archive, limits, parsed(info.name))
            stream.finish()
    except Rejected:
        archive.close()
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError) as exc:
        archive.close()
        raise Rejected(f"truncated or corrupt archive ({type(exc).__name__}: {exc})") from None
    if not archive.hashes:
        archive.close()
        raise Rejected("empty archive")
    return archive


class Inflater(io.RawIOBase):
    """A gzip stream inflated in small, bounded steps (never more than the reader asks for at once, whatever
    the compression ratio), counted against ``limit``. :meth:`finish` inflates what follows the tar's end and
    requires the gzip end-of-stream marker with nothing after it: a cut-short file must not read as a shorter
    archive, and no bomb hides behind the tar's end."""

    def __init__(self, raw: IO[bytes], limit: int):
        self.raw, self.limit, self.total = raw, limit, 0
        self.inflate = zlib.decompressobj(wbits=31)  # gzip framing

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = max(1, min(len(buffer), CHUNK))
        data = b""
        while not data:
            if self.inflate.unconsumed_tail:
                data = self.inflate.decompress(self.inflate.unconsumed_tail, want)
            elif self.inflate.eof:
                return 0
            else:
                chunk = self.raw.read(CHUNK)
                if not chunk:
                    raise Rejected("truncated or corrupt archive (the compressed stream ends early)")
                data = self.inflate.decompress(chunk, want)
        self.total += len(data)
        if self.total > self.limit:
            raise Rejected(f"archive inflates to more than {self.limit} bytes (a decompression bomb?)")
        buffer[: len(data)] = data
        return len(data)

    def finish(self) -> None:
        sink = bytearray(CHUNK)
        while self.readinto(sink):
            pass
        if self.inflate.unused_data or self.raw.read(1):
            raise Rejected("truncated or corrupt archive (data after the end of the compressed stream)")


def _check_header(info: tarfile.TarInfo, archive: Archive, limits: Limits) -> None:
    name = info.name
    if len(archive.hashes) >= limits.members:
        raise Rejected(f"more than {limits.members} members")
    if info.issym() or info.islnk():
        raise Rejected(
            f"member {quote(name)} is a {'symlink' if info.issym() else 'hard link'} "
            f"(to {quote(info.linkname)}): bundles hold regular files only"
        )
    if not info.isreg():
        raise Rejected(f"member {quote(name)} is not a regular file: bundles hold regular files only")
    check_name(name)
    if name in archive.hashes:
        raise Rejected(f"member {quote(name)} appears twice")
    if info.size > limits.member_bytes:
        raise Rejected(
            f"member {quote(name)} would inflate to {info.size} bytes "
            f"(at most {limits.member_bytes} per member)"
        )
    if archive.inflated + info.size > limits.total_bytes:
        raise Rejected(f"members would inflate to more than {limits.total_bytes} bytes in total")


def _take(tar: tarfile.TarFile, info: tarfile.TarInfo, archive: Archive, limits: Limits, keep: bool) -> None:
    """Hash the member as it streams; append it to the spool when the merge parses it."""
    name = info.name
    if keep and info.size > limits.parsed_member_bytes:
        raise Rejected(
            f"member {quote(name)} would inflate to {info.size} bytes "
            f"(at most {limits.parsed_member_bytes} for a member the merge reads)"
        )
    fh = tar.extractfile(info)
    digest, got = hashlib.sha256(), 0
    offset = archive.spool.seek(0, 2)
    while fh is not None and got <= info.size and (chunk := fh.read(CHUNK)):
        got += len(chunk)
        digest.update(chunk)
        if keep:
            archive.spool.write(chunk)
    if got != info.size:
        raise Rejected(f"member {quote(name)} is cut short ({got} of {info.size} bytes)")
    archive.hashes[name] = digest.hexdigest()
    archive.sizes[name] = got
    archive.inflated += got
    if keep:
        archive.index[name] = (offset, got)


def check_name(name: str) -> None:
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Rejected(f"member {quote(name)} has an absolute path: it would escape the bundle")
    parts = PurePosixPath(name).parts
    if ".." in name.replace("\\", "/").split("/"):
        raise Rejected(f"member {quote(name)} climbs out with '..': it would escape the bundle")
    if "\\" in name or not _NAME.match(name) or any(p in (".", "") for p in parts) or len(name) > 255:
        raise Rejected(f"member {quote(name)} has a name outside [A-Za-z0-9._/-]")


def check_manifest(archive: Archive) -> None:
    """Every member listed in MANIFEST.sha256 with the sha256 its bytes have, and nothing else."""
    if MANIFEST not in archive.index:
        raise Rejected(f"no {MANIFEST}")
    listed: dict[str, str] = {}
    for no, line in enumerate(archive.read(MANIFEST).decode("utf-8", "replace").splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        if not m:
            raise Rejected(f"{MANIFEST}:{no}: not a '<sha256>  <name>' line")
        if m[2] in listed:
            raise Rejected(f"{MANIFEST}:{no}: {quote(m[2])} listed twice")
        listed[m[2]] = m[1]
    present = set(archive.hashes) - {MANIFEST}
    if missing := sorted(set(listed) - present):
        raise Rejected(f"{MANIFEST} lists {quote(missing[0])}, which is not in the archive")
    if unlisted := sorted(present - set(listed)):
        raise Rejected(f"member {quote(unlisted[0])} is not in {MANIFEST}")
    for name, expected in sorted(listed.items()):
        actual = archive.hashes[name]
        if actual != expected:
            raise Rejected(
                f"sha256 mismatch for {name}: {MANIFEST} says {expected[:12]}…, content is {actual[:12]}…"
            )
