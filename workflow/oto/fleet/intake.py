"""Reading a bundle from another machine: everything checked before anything is trusted.

:func:`open_bundle` reads the archive once, as a stream, into memory (never extracting onto the disk), and
either returns an :class:`Accepted` bundle or raises :class:`Rejected` with one clear reason naming the member
and field. A rejected bundle contributes nothing; the others are unaffected. Rejected are:

* a truncated or corrupt archive, or one larger than ``Limits.archive_bytes``;
* members that are not regular files (symlinks, hard links, devices, folders), names that escape the bundle
  (absolute, ``..``, backslashes, characters outside ``[A-Za-z0-9._/-]``), duplicate names, more than
  ``Limits.members`` members, a member or a total above its limit (decompression bombs: checked on the
  header, before a byte is inflated, and again on the bytes read);
* a missing manifest, a member missing from it or absent from the archive, a sha256 mismatch;
* an unknown schema version, another arch, logic format, Tensile version or kind of numbers than the merge;
* a device profile that is invalid or claims more than the arch's devices have (``device_range``);
* registry records or finals with numbers above the device's theoretical ceiling, negative, zero or NaN
  times, scores or GFLOPS, kernel ids that are not the hash of their parameters, duplicate records,
  libraries outside the bundle's shard, deck sizes that differ from the merge's deck;
* text fields carrying markup (HTML/XML tags, entities, Markdown links, template syntax), instructions aimed
  at a language model, or control characters. They are quoted (``repr``, cut short) in the reason, and every
  report escapes the reason: shown as data, never interpreted.

Opaque members (logs, the tester's acceptance report and ceilings, the config) are checksummed and kept but
never parsed, rendered or shown.
"""

from __future__ import annotations

import json
import math
import re
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from oto.deck.shards import Shard, ShardError
from oto.fleet.bundle import DESCRIPTOR, MANIFEST, SCHEMA_VERSION, file_sha256
from oto.gemm import FamilyCodeError, Library
from oto.hardware.ceilings import family_peak_gflops
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import ProfileError, validate_profile
from oto.registry.records import COLUMNS, KEY, KINDS
from oto.tensile.logic_writer import MINIMUM_REQUIRED_VERSION
from oto.tensile.params import CandidateError, candidate_id

_NAME = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_KERNEL = re.compile(r"^k[0-9a-f]{12}$")
_DEVICE = re.compile(r"^d[0-9a-f]{12}$")
_SIZE = re.compile(r"^\d+,\d+,\d+,\d+$")
_MARKUP = re.compile(
    r"</?[A-Za-z][A-Za-z0-9:-]*(\s[^<>]*)?/?>"  # an HTML/XML tag
    r"|<!--|<!\[CDATA\[|&#?[A-Za-z0-9]+;"  # comments, CDATA, entities
    r"|!?\[[^\]\n]*\]\([^)\n]*\)"  # a Markdown link or image
    r"|\{\{|\{%|\$\{|javascript:|data:text/html|vbscript:",  # template syntax, script URLs
    re.I,
)
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override|bypass)\b[^.\n]{0,60}\b(instructions?|prompts?|rules|guidelines"
    r"|previous|above|earlier|system)\b"
    r"|\b(system|assistant|human|developer)\s*(prompt)?\s*:"
    r"|\byou\s+(are|must|should|will)\s+(now|instead)\b|\bnew\s+instructions?\b|\bact\s+as\s+(an?|the)\b"
    r"|\bprompt\s+injection\b|\bjailbreak\b",
    re.I,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
TEXT_LIMIT = 2000  # characters of one text field
CEILING_SLACK = 1e-6  # relative: rounding in the files, never measurement noise


class Rejected(ValueError):
    """A bundle that merges nothing; the message is the reason (data: escape it wherever it is shown)."""


@dataclass(frozen=True)
class Limits:
    archive_bytes: int = 512 << 20
    member_bytes: int = 64 << 20
    total_bytes: int = 1 << 30
    members: int = 20000


@dataclass(frozen=True)
class Expect:
    """What every bundle of one merge must agree on."""

    arch: str
    arch_profile: Mapping[str, Any]
    numbers: str = "measured"  # simulated | replayed | measured
    tensile_version: str | None = None  # None: not pinned (the merge pins the first accepted one)
    deck_sizes: Mapping[str, list[list[int]]] | None = None  # library → the merge's deck sizes


@dataclass
class Accepted:
    path: Path
    sha256: str
    descriptor: dict[str, Any]
    profile: dict[str, Any]  # the device profile
    records: dict[str, list[dict[str, Any]]]  # library → registry records
    finals: dict[str, dict[str, Any]]  # library → final.yaml
    members: dict[str, bytes] = field(repr=False, default_factory=dict)

    @property
    def device_id(self) -> str:
        return self.profile["device"]["id"]

    @property
    def shard(self) -> str:
        return str(self.descriptor["shard"])

    @property
    def created_at(self) -> str:
        return str(self.descriptor["created_at"])


def quote(text: Any, limit: int = 80) -> str:
    """A value as it appears in a reason: repr'd (control characters escaped), cut short."""
    s = repr(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def text_problem(text: str) -> str | None:
    """Why a text field from another machine cannot be taken as data, or None."""
    if len(text) > TEXT_LIMIT:
        return f"is {len(text)} characters long (at most {TEXT_LIMIT})"
    for pattern, what in (
        (_CONTROL, "control characters"),
        (_MARKUP, "markup"),
        (_INSTRUCTION, "instructions"),
    ):
        m = pattern.search(text)
        if m:
            return f"carries {what} ({quote(m.group(0), 40)})"
    return None


def scan_text(obj: Any, where: str) -> None:
    """Every string (keys included) of a parsed document must be plain data."""
    if isinstance(obj, str):
        problem = text_problem(obj)
        if problem:
            raise Rejected(f"{where} {problem}: {quote(obj)}")
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            scan_text(k, f"{where}: a key")
            scan_text(v, f"{where}.{k}" if isinstance(k, str) and _NAME.match(k) else f"{where}[…]")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            scan_text(v, f"{where}[{i}]")


# -- the archive ------------------------------------------------------------------------------------------


def read_members(path: Path, limits: Limits = Limits()) -> dict[str, bytes]:
    """Every member of a bundle archive, checked for type, name and size before its bytes are read."""
    size = path.stat().st_size
    if size > limits.archive_bytes:
        raise Rejected(f"archive is {size} bytes, more than the {limits.archive_bytes} a bundle may have")
    _check_stream(path, limits.total_bytes + limits.total_bytes // 8 + (1 << 20))  # + tar headers, padding
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for info in tar:
                name = info.name
                if len(members) >= limits.members:
                    raise Rejected(f"more than {limits.members} members")
                if info.issym() or info.islnk():
                    raise Rejected(
                        f"member {quote(name)} is a {'symlink' if info.issym() else 'hard link'} "
                        f"(to {quote(info.linkname)}): bundles hold regular files only"
                    )
                if not info.isreg():
                    raise Rejected(
                        f"member {quote(name)} is not a regular file: bundles hold regular files only"
                    )
                _check_name(name)
                if name in members:
                    raise Rejected(f"member {quote(name)} appears twice")
                if info.size > limits.member_bytes:
                    raise Rejected(
                        f"member {quote(name)} would inflate to {info.size} bytes "
                        f"(at most {limits.member_bytes} per member)"
                    )
                total += info.size
                if total > limits.total_bytes:
                    raise Rejected(f"members would inflate to more than {limits.total_bytes} bytes in total")
                fh = tar.extractfile(info)
                data = fh.read(limits.member_bytes + 1) if fh else b""
                if len(data) != info.size:
                    raise Rejected(f"member {quote(name)} is cut short ({len(data)} of {info.size} bytes)")
                members[name] = data
    except Rejected:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError) as exc:
        raise Rejected(f"truncated or corrupt archive ({type(exc).__name__}: {exc})") from None
    if not members:
        raise Rejected("empty archive")
    return members


def _check_stream(path: Path, limit: int) -> None:
    """The whole gzip stream, inflated in bounded steps and thrown away: it must end with its end-of-stream
    marker (a cut-short file must not read as a shorter archive) and inflate to at most ``limit`` bytes."""
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    total = 0
    try:
        with open(path, "rb") as fh:
            while not inflate.eof and (chunk := fh.read(1 << 20)):
                while chunk and not inflate.eof:
                    total += len(inflate.decompress(chunk, 1 << 20))
                    if total > limit:
                        raise Rejected(f"archive inflates to more than {limit} bytes (a decompression bomb?)")
                    chunk = inflate.unconsumed_tail
            trailing = bool(inflate.unused_data) or bool(fh.read(1))
    except zlib.error as exc:
        raise Rejected(f"truncated or corrupt archive (not a gzip stream: {exc})") from None
    if not inflate.eof:
        raise Rejected("truncated or corrupt archive (the compressed stream ends early)")
    if trailing:
        raise Rejected("truncated or corrupt archive (data after the end of the compressed stream)")


def _check_name(name: str) -> None:
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Rejected(f"member {quote(name)} has an absolute path: it would escape the bundle")
    parts = PurePosixPath(name).parts
    if ".." in name.replace("\\", "/").split("/"):
        raise Rejected(f"member {quote(name)} climbs out with '..': it would escape the bundle")
    if "\\" in name or not _NAME.match(name) or any(p in (".", "") for p in parts) or len(name) > 255:
        raise Rejected(f"member {quote(name)} has a name outside [A-Za-z0-9._/-]")


def check_manifest(members: Mapping[str, bytes]) -> None:
    import hashlib

    if MANIFEST not in members:
        raise Rejected(f"no {MANIFEST}")
    listed: dict[str, str] = {}
    for no, line in enumerate(members[MANIFEST].decode("utf-8", "replace").splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        if not m:
            raise Rejected(f"{MANIFEST}:{no}: not a '<sha256>  <name>' line")
        if m[2] in listed:
            raise Rejected(f"{MANIFEST}:{no}: {quote(m[2])} listed twice")
        listed[m[2]] = m[1]
    present = set(members) - {MANIFEST}
    if missing := sorted(set(listed) - present):
        raise Rejected(f"{MANIFEST} lists {quote(missing[0])}, which is not in the archive")
    if unlisted := sorted(present - set(listed)):
        raise Rejected(f"member {quote(unlisted[0])} is not in {MANIFEST}")
    for name, expected in sorted(listed.items()):
        actual = hashlib.sha256(members[name]).hexdigest()
        if actual != expected:
            raise Rejected(
                f"sha256 mismatch for {name}: {MANIFEST} says {expected[:12]}…, content is {actual[:12]}…"
            )


def _yaml(members: Mapping[str, bytes], name: str) -> Any:
    try:
        return yaml.safe_load(members[name].decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise Rejected(f"{name}: not valid YAML ({type(exc).__name__})") from None


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


# -- the bundle -------------------------------------------------------------------------------------------


def open_bundle(path: Path, expect: Expect, limits: Limits = Limits()) -> Accepted:
    """The bundle at ``path``, checked in full; raises Rejected with the reason."""
    path = Path(path)
    members = read_members(path, limits)
    check_manifest(members)
    if DESCRIPTOR not in members:
        raise Rejected(f"no {DESCRIPTOR}")
    desc = _yaml(members, DESCRIPTOR)
    if not isinstance(desc, Mapping):
        raise Rejected(f"{DESCRIPTOR}: not a mapping")
    if desc.get("schema") != SCHEMA_VERSION or desc.get("kind") != "oto-bundle":
        raise Rejected(
            f"{DESCRIPTOR}: unknown schema version {quote(desc.get('schema'))} of kind "
            f"{quote(desc.get('kind'))} (this oto reads oto-bundle schema {SCHEMA_VERSION})"
        )
    scan_text(desc, DESCRIPTOR)
    arch = desc.get("arch")
    if arch != expect.arch:
        raise Rejected(
            f"{DESCRIPTOR}: field 'arch': bundle is for {quote(arch)}, this merge is for {expect.arch}"
        )
    prov = desc.get("provenance") or {}
    if prov.get("logic_format") != MINIMUM_REQUIRED_VERSION:
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.logic_format': {quote(prov.get('logic_format'))}, "
            f"this merge writes Tensile logic format {MINIMUM_REQUIRED_VERSION}"
        )
    tensile = prov.get("tensile_version")
    if tensile is not None and not isinstance(tensile, str):
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.tensile_version': {quote(tensile)} mixes Tensile "
            "versions in one bundle"
        )
    if expect.tensile_version is not None and tensile != expect.tensile_version:
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.tensile_version': {quote(tensile)} does not match "
            f"this merge's Tensile {expect.tensile_version}"
        )
    if desc.get("numbers") != expect.numbers:
        raise Rejected(
            f"{DESCRIPTOR}: field 'numbers': {quote(desc.get('numbers'))}; this merge takes "
            f"{expect.numbers} numbers only (oto merge --numbers)"
        )
    try:
        shard = Shard.parse(str(desc.get("shard")))
    except ShardError as exc:
        raise Rejected(f"{DESCRIPTOR}: field 'shard': {exc}") from None
    libraries = desc.get("libraries")
    if not isinstance(libraries, list) or not libraries or len(set(map(str, libraries))) != len(libraries):
        raise Rejected(f"{DESCRIPTOR}: field 'libraries': expected a list of distinct library names")
    for lib in libraries:
        try:
            Library.parse(str(lib))
        except FamilyCodeError:
            raise Rejected(
                f"{DESCRIPTOR}: field 'libraries': {quote(lib)} is not a Tensile library"
            ) from None
        if not shard.holds(str(lib)):
            raise Rejected(f"{DESCRIPTOR}: field 'libraries': {lib} is not in shard {shard}")
        if expect.deck_sizes is not None and lib not in expect.deck_sizes:
            raise Rejected(f"{DESCRIPTOR}: field 'libraries': {lib} is not in this merge's deck")
    profile = _device_profile(members, expect)
    if (desc.get("device") or {}).get("id") != profile["device"]["id"]:
        raise Rejected(f"{DESCRIPTOR}: field 'device.id' is not the device profile's")
    for name in ("preflight.yaml",):
        if name in members:
            scan_text(_yaml(members, name), name)
    records = {}
    for lib in libraries:
        name = f"registry/{lib}.jsonl"
        if name in members:
            records[lib] = _records(members[name], name, lib, desc, profile)
    finals = {}
    for lib in libraries:
        name = f"results/{lib}/final.yaml"
        if name in members:
            finals[lib] = _final(_yaml(members, name), name, lib, desc, profile, expect)
    strays = [
        n
        for n in members
        if (n.startswith("registry/") and n.removeprefix("registry/").removesuffix(".jsonl") not in records)
        or (n.startswith("results/Cijk_") and n.split("/")[1] not in finals)
    ]
    if strays:
        raise Rejected(f"member {quote(strays[0])} belongs to no library of {DESCRIPTOR}")
    if not records and not finals:
        raise Rejected("no registry records and no final results: nothing to merge")
    return Accepted(path, file_sha256(path), dict(desc), profile, records, finals, dict(members))


def _device_profile(members: Mapping[str, bytes], expect: Expect) -> dict[str, Any]:
    name = f"profile/{expect.arch}.yaml"
    if name not in members:
        raise Rejected(f"no device profile {name}")
    data = _yaml(members, name)
    scan_text(data, name)
    try:
        profile = validate_profile(data, name)
        check_device_profile(expect.arch_profile, profile, name)
    except (ProfileError, DeviceProfileError) as exc:
        raise Rejected(str(exc)) from None
    device = profile.get("device")
    if not isinstance(device, Mapping) or not _DEVICE.match(str(device.get("id", ""))):
        raise Rejected(f"{name}: field 'device.id': missing or not a device id (d + 12 hex digits)")
    return profile


def _ceiling(profile: Mapping, library: str) -> float:
    return family_peak_gflops(profile, Library.parse(library).family) * (1 + CEILING_SLACK)


def _records(data: bytes, name: str, library: str, desc: Mapping, profile: Mapping) -> list[dict[str, Any]]:
    ceiling = _ceiling(profile, library)
    out, seen, end = [], set(), None
    for no, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        where = f"{name}:{no}"
        if not line.strip():
            continue
        if end is not None:
            raise Rejected(f"{where}: a line after the end marker")
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise Rejected(f"{where}: corrupted record ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise Rejected(f"{where}: not an object")
        if rec.get("end") is True:
            end = rec
            continue
        if set(rec) - set(COLUMNS):
            raise Rejected(f"{where}: unknown field {quote(sorted(set(rec) - set(COLUMNS))[0])}")
        scan_text(rec, where)
        _check_record(rec, where, library, desc, ceiling)
        key = tuple(rec.get(k) for k in KEY)
        if key in seen:
            raise Rejected(f"{where}: duplicate record (same {', '.join(KEY)} as an earlier line)")
        seen.add(key)
        out.append({c: rec.get(c) for c in COLUMNS})
    if end is None:
        raise Rejected(f"{name}: half-written (no end marker)")
    if end.get("records") != len(out):
        raise Rejected(
            f"{name}: end marker counts {quote(end.get('records'))} records, the file has {len(out)}"
        )
    return out


def _check_record(rec: Mapping, where: str, library: str, desc: Mapping, ceiling: float) -> None:
    kind = rec.get("kind")
    if kind not in KINDS:
        raise Rejected(f"{where}: field 'kind': {quote(kind)} (known: {', '.join(KINDS)})")
    if not _KERNEL.match(str(rec.get("kernel_id"))):
        raise Rejected(f"{where}: field 'kernel_id': {quote(rec.get('kernel_id'))} is not a kernel id")
    if rec.get("library") != library or rec.get("arch") != desc["arch"]:
        raise Rejected(
            f"{where}: field 'library'/'arch': {quote(rec.get('library'))} on "
            f"{quote(rec.get('arch'))}, expected {library} on {desc['arch']}"
        )
    if rec.get("numbers") != desc["numbers"]:
        raise Rejected(
            f"{where}: field 'numbers': {quote(rec.get('numbers'))}, the bundle says {desc['numbers']}"
        )
    size = rec.get("size") or ""
    if kind in ("benchmarked", "failed") and not _SIZE.match(str(size)):
        raise Rejected(f"{where}: field 'size': {quote(size)} is not M,N,B,K")
    for col in ("time_us", "score", "ci_low", "ci_high", "gflops"):
        v = rec.get(col)
        if v is None and not (kind == "benchmarked" and col in ("time_us", "score", "gflops")):
            continue
        if not _finite(v) or v <= 0:
            label = "time" if col == "time_us" else col
            raise Rejected(
                f"{where}: field '{col}': {quote(v)} — a negative, zero or NaN {label} is not a measurement"
            )
    if _finite(rec.get("gflops")) and rec["gflops"] > ceiling:
        raise Rejected(
            f"{where}: field 'gflops': {rec['gflops']:.1f} is above the device's theoretical ceiling "
            f"{ceiling:.1f} GFLOPS for {library}"
        )
    lo, hi, score = rec.get("ci_low"), rec.get("ci_high"), rec.get("score")
    if _finite(lo) and _finite(hi) and _finite(score) and not lo * (1 - 1e-6) <= score <= hi * (1 + 1e-6):
        raise Rejected(f"{where}: field 'score': {score} lies outside its interval [{lo}, {hi}]")
    if kind in ("benchmarked", "built") and rec.get("params"):
        _check_id(rec.get("params"), rec["kernel_id"], where)


def _check_id(params: Any, kernel_id: str, where: str) -> None:
    try:
        p = json.loads(params) if isinstance(params, str) else params
        ok = isinstance(p, Mapping) and candidate_id(p) == kernel_id
    except (ValueError, TypeError, CandidateError):
        ok = False
    if not ok:
        raise Rejected(f"{where}: kernel {kernel_id} is not the id of its parameters")


def _final(
    doc: Any, name: str, library: str, desc: Mapping, profile: Mapping, expect: Expect
) -> dict[str, Any]:
    if not isinstance(doc, Mapping) or doc.get("library") != library:
        raise Rejected(f"{name}: not the final result of {library}")
    scan_text(doc, name)
    numbers = (doc.get("provenance") or {}).get("numbers")
    if numbers != desc["numbers"]:
        raise Rejected(
            f"{name}: field 'provenance.numbers': {quote(numbers)}, the bundle says {desc['numbers']}"
        )
    sizes, rows, kernels = doc.get("sizes"), doc.get("per_size"), doc.get("kernels")
    if not isinstance(sizes, list) or not isinstance(rows, list) or not isinstance(kernels, Mapping):
        raise Rejected(
            f"{name}: fields 'sizes', 'per_size' and 'kernels' must be a list, a list and a mapping"
        )
    deck = (expect.deck_sizes or {}).get(library)
    if deck is not None and [list(s) for s in sizes] != [list(s) for s in deck]:
        raise Rejected(
            f"{name}: field 'sizes': the {len(sizes)} sizes differ from this merge's deck of "
            f"{library} ({len(deck)} sizes): another oto version or deck?"
        )
    for kid, params in kernels.items():
        _check_id(params, str(kid), f"{name}: kernels.{kid}")
    ceiling = _ceiling(profile, library)
    seen = set()
    for i, r in enumerate(rows):
        where = f"{name}: per_size[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("size_index"), int):
            raise Rejected(f"{where}: not a row with a size_index")
        if not 0 <= r["size_index"] < len(sizes) or r["size_index"] in seen:
            raise Rejected(f"{where}: field 'size_index': {r['size_index']} is out of range or repeated")
        seen.add(r["size_index"])
        if r.get("winner") is None:
            continue
        if r["winner"] not in kernels:
            raise Rejected(f"{where}: field 'winner': {quote(r['winner'])} is not in 'kernels'")
        for col in ("score", "gflops"):
            if not _finite(r.get(col)) or r[col] <= 0:
                raise Rejected(
                    f"{where}: field '{col}': {quote(r.get(col))} — a negative, zero or NaN {col} "
                    "is not a measurement"
                )
        if r["gflops"] > ceiling:
            raise Rejected(
                f"{where}: field 'gflops': {r['gflops']:.1f} is above the device's theoretical "
                f"ceiling {ceiling:.1f} GFLOPS for {library}"
            )
    return dict(doc)
