"""Reading a bundle from another machine: everything checked before anything is trusted.

:func:`open_bundle` reads the archive once as a stream (:mod:`oto.fleet.archive`: bounded memory, nothing
extracted) and either returns an :class:`Accepted` bundle or raises :class:`Rejected` with one clear reason
naming the member and field. A rejected bundle contributes nothing; the others are unaffected.

**Structure and numbers reject** a bundle:

* a truncated or corrupt archive, one larger than its limits (decompression bombs: checked on each header,
  before a byte is inflated, and again on the bytes read), members that are not regular files, names that
  escape the bundle (absolute, ``..``, backslashes, characters outside ``[A-Za-z0-9._/-]``), duplicate names;
* a missing manifest, a member missing from it or absent from the archive, a sha256 mismatch;
* an unknown schema version, another arch, logic format, Tensile version or kind of numbers than the merge;
  a final whose backend makes another kind of numbers than the bundle says (a simulated night relabelled as
  measured), or measured on another GPU than the arch;
* a device profile that is invalid or claims more than the arch's devices have (``device_range``);
* registry records, finals or samples with numbers above the device's theoretical ceiling, negative, zero or
  NaN times, scores or GFLOPS, times longer than the backend's launch timeout or inconsistent with their
  GFLOPS, kernel ids that are not the hash of their parameters, duplicate records, libraries outside the
  bundle's shard or the merge's deck, deck sizes that differ from the merge's deck;
* claims its own measurements contradict (:mod:`oto.fleet.evidence`): a final winner its samples measured
  slower than the best kernel they found, a score or GFLOPS outside the recomputed interval, a registry
  record its generation's samples do not support. The reason names the size and the kernel.

**Text is quarantined** (:mod:`oto.fleet.text`): a text value carrying markup, instructions aimed at a
language model or control characters is neutralised and flagged (``Accepted.quarantine``); the bundle merges.

Opaque members (logs, the tester's acceptance report and ceilings, the config) are checksummed and kept (in
the archive) but never parsed, rendered or shown.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oto.backends import BACKENDS, backend_type
from oto.deck.model import current_final
from oto.deck.shards import Shard, ShardError
from oto.fleet.archive import Archive, Limits, Rejected, check_manifest, read_archive
from oto.fleet.bundle import DESCRIPTOR, SCHEMA_VERSION, file_sha256
from oto.fleet.evidence import LibraryEvidence, Scoring, is_samples_member, library_evidence
from oto.fleet.text import Quarantine, TextRejected, quote, text_problem
from oto.gemm import FamilyCodeError, Library
from oto.hardware.ceilings import family_peak_gflops
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import ProfileError, validate_profile
from oto.measurement.selection import final_row_problem
from oto.registry.gpu_journal import GPU_RESET
from oto.registry.records import COLUMNS, KEY, KINDS
from oto.tensile.logic_writer import MINIMUM_REQUIRED_VERSION
from oto.tensile.params import CandidateError, candidate_id, canonical

__all__ = ["Accepted", "Expect", "Limits", "Rejected", "open_bundle", "quote", "text_problem"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's safe loader where built in
_KERNEL = re.compile(r"^k[0-9a-f]{12}$")
_DEVICE = re.compile(r"^d[0-9a-f]{12}$")
_SIZE = re.compile(r"^\d+,\d+,\d+,\d+$")
_PARSED = re.compile(
    r"^(bundle\.yaml|MANIFEST\.sha256|preflight\.yaml|profile/[^/]+\.yaml|registry/[^/]+\.jsonl"
    r"|results/Cijk_[^/]+/final\.yaml)$"
)
CEILING_SLACK = 1e-6  # relative: rounding in the files, never measurement noise
# A registry record's free text (quarantined when it is not plain data); every other field is structure: an
# enumeration, an id, a hash, a number, or the parameters the kernel id is the hash of.
RECORD_TEXT = ("proposer", "status", "reason", "tool_versions", "source")
RECORD_TOKENS = ("family", "pattern", "protocol", "config_hash", "backend", "run_id")
_TOKEN = re.compile(r"^[A-Za-z0-9_.-]{0,64}$")


@dataclass(frozen=True)
class Expect:
    """What every bundle of one merge must agree on, and how the merge scores their samples."""

    arch: str
    arch_profile: Mapping[str, Any]
    numbers: str = "measured"  # simulated | replayed | measured
    tensile_version: str | None = None  # None: not pinned (the merge pins the first accepted one)
    deck_sizes: Mapping[str, list[list[int]]] | None = None  # library → the merge's deck sizes
    config: Mapping[str, Any] | None = None  # a validated config: tie tolerance, bootstrap, launch timeouts
    shipped: Callable[[str], Mapping[str, Mapping[str, Any]]] | None = None  # library → {kernel id: params}


@dataclass
class Accepted:
    path: Path
    sha256: str
    descriptor: dict[str, Any]
    profile: dict[str, Any]  # the device profile
    records: dict[str, list[dict[str, Any]]]  # library → registry records (text neutralised)
    finals: dict[str, dict[str, Any]]  # library → final.yaml as claimed (checked against the evidence)
    evidence: dict[str, LibraryEvidence] = field(default_factory=dict)  # library → what its samples say
    quarantine: list[dict[str, str]] = field(default_factory=list)  # neutralised text fields
    inflated: int = 0  # bytes of all members, inflated
    # sha256 of its samples members' hashes: a bundle packed again (a new created_at, `oto tester bundle`
    # run twice) holds the same measurements under another archive sha256
    measurements: str = ""

    @property
    def device_id(self) -> str:
        return self.profile["device"]["id"]

    @property
    def shard(self) -> str:
        return str(self.descriptor["shard"])

    @property
    def created_at(self) -> str:
        return str(self.descriptor["created_at"])


def parsed_member(name: str) -> bool:
    """The members the merge reads (the others are only hashed)."""
    return bool(_PARSED.match(name)) or is_samples_member(name)


def open_bundle(
    path: Path, expect: Expect, limits: Limits | None = None, sha256: str | None = None
) -> Accepted:
    """The bundle at ``path``, checked in full; raises Rejected with the reason."""
    path, limits = Path(path), limits or Limits()
    archive = read_archive(path, limits, parsed_member)
    try:
        return _open(archive, path, expect, sha256 or file_sha256(path))
    except TextRejected as exc:
        raise Rejected(str(exc)) from None
    finally:
        archive.close()


def _open(archive: Archive, path: Path, expect: Expect, sha256: str) -> Accepted:
    check_manifest(archive)
    quarantine = Quarantine()
    desc = _descriptor(archive, expect, quarantine)
    libraries = [str(x) for x in desc["libraries"]]
    profile = _device_profile(archive, expect, quarantine)
    if (desc.get("device") or {}).get("id") != profile["device"]["id"]:
        raise Rejected(f"{DESCRIPTOR}: field 'device.id' is not the device profile's")
    if "preflight.yaml" in archive:
        quarantine.clean(_yaml(archive, "preflight.yaml"), "preflight.yaml")  # shown nowhere; looked at
    records, finals = {}, {}
    for lib in libraries:
        if (name := f"registry/{lib}.jsonl") in archive:
            records[lib] = _records(archive.read(name), name, lib, desc, profile, quarantine)
        if (name := f"results/{lib}/final.yaml") in archive:
            finals[lib] = _final(_yaml(archive, name), name, lib, desc, profile, expect, quarantine)
    _check_strays(archive, libraries)
    if not records and not finals:
        raise Rejected("no registry records and no final results: nothing to merge")
    scoring = Scoring(expect.config or _default_config(expect.arch), profile, str(desc["numbers"]))
    evidence = {}
    for lib in libraries:
        if lib not in records and lib not in finals:
            continue
        sizes = (expect.deck_sizes or {}).get(lib) or (finals.get(lib) or {}).get("sizes") or []
        params = _known_params(lib, records.get(lib, []), finals.get(lib), expect)
        evidence[lib] = library_evidence(
            archive, lib, sizes, finals.get(lib), records.get(lib, []), params, scoring
        )
    samples = sorted((n, h) for n, h in archive.hashes.items() if n.startswith("samples/"))
    digest = hashlib.sha256(json.dumps(samples).encode()).hexdigest() if samples else ""
    return Accepted(
        path, sha256, desc, profile, records, finals, evidence, quarantine.flags, archive.inflated, digest
    )


def _default_config(arch: str) -> dict[str, Any]:
    from oto.config import validate_config

    return validate_config({"arch": arch, "families": "all"})


def _known_params(
    library: str, records: list[dict[str, Any]], final: Mapping[str, Any] | None, expect: Expect
) -> dict[str, dict[str, Any]]:
    """Parameters of every kernel that can win: the final's (checked), the registry's (checked), the deck's
    shipped kernels (the references)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("params") and rec["kind"] in ("proposed", "built", "benchmarked"):
            out.setdefault(rec["kernel_id"], canonical(json.loads(rec["params"])))
    if expect.shipped is not None:
        out.update({k: dict(v) for k, v in expect.shipped(library).items()})
    for kid, p in ((final or {}).get("kernels") or {}).items():
        out[str(kid)] = canonical(p)
    return out


def _check_strays(archive: Archive, libraries: list[str]) -> None:
    libs = set(libraries)
    for n in archive.hashes:
        parts = n.split("/")
        if (
            (n.startswith("registry/") and n.removeprefix("registry/").removesuffix(".jsonl") not in libs)
            or (n.startswith("results/Cijk_") and parts[1] not in libs)
            or (
                n.startswith("samples/") and (len(parts) != 3 or parts[1] not in libs or not parsed_member(n))
            )
        ):
            raise Rejected(f"member {quote(n)} belongs to no library of {DESCRIPTOR}")


def _yaml(archive: Archive, name: str) -> Any:
    try:
        return yaml.load(archive.read(name).decode("utf-8"), Loader=_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise Rejected(f"{name}: not valid YAML ({type(exc).__name__})") from None


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


# -- what the bundle says about itself ----------------------------------------------------------------------


def _descriptor(archive: Archive, expect: Expect, quarantine: Quarantine) -> dict[str, Any]:
    if DESCRIPTOR not in archive:
        raise Rejected(f"no {DESCRIPTOR}")
    desc = _yaml(archive, DESCRIPTOR)
    if not isinstance(desc, Mapping):
        raise Rejected(f"{DESCRIPTOR}: not a mapping")
    if desc.get("schema") != SCHEMA_VERSION or desc.get("kind") != "oto-bundle":
        older = (
            " (an older oto's bundle: run `oto tester bundle` again with this oto)"
            if desc.get("schema") == 1
            else ""
        )
        raise Rejected(
            f"{DESCRIPTOR}: unknown schema version {quote(desc.get('schema'))} of kind "
            f"{quote(desc.get('kind'))} (this oto reads oto-bundle schema {SCHEMA_VERSION}){older}"
        )
    desc = quarantine.clean(desc, DESCRIPTOR)
    arch = desc.get("arch")
    if arch != expect.arch:
        raise Rejected(
            f"{DESCRIPTOR}: field 'arch': bundle is for {quote(arch)}, this merge is for {expect.arch}"
        )
    _check_provenance(desc.get("provenance") or {}, expect)
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
    return dict(desc)


def _check_provenance(prov: Mapping[str, Any], expect: Expect) -> None:
    if prov.get("logic_format") != MINIMUM_REQUIRED_VERSION:
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.logic_format': {quote(prov.get('logic_format'))}, "
            f"this merge writes Tensile logic format {MINIMUM_REQUIRED_VERSION}"
        )
    tensile = prov.get("tensile_version")
    if tensile is not None and not isinstance(tensile, str):
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.tensile_version': {quote(tensile)} mixes Tensile versions "
            "in one bundle"
        )
    if expect.tensile_version is not None and tensile != expect.tensile_version:
        raise Rejected(
            f"{DESCRIPTOR}: field 'provenance.tensile_version': {quote(tensile)} does not match "
            f"this merge's Tensile {expect.tensile_version}"
        )


def _device_profile(archive: Archive, expect: Expect, quarantine: Quarantine) -> dict[str, Any]:
    name = f"profile/{expect.arch}.yaml"
    if name not in archive:
        raise Rejected(f"no device profile {name}")
    data = quarantine.clean(_yaml(archive, name), name)
    if isinstance(data, Mapping) and "stock_library" not in data:
        # written before profiles named their stock library: a fact of the arch, which no device refines
        data = {**data, "stock_library": expect.arch_profile.get("stock_library")}
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


def _records(
    data: bytes, name: str, library: str, desc: Mapping, profile: Mapping, quarantine: Quarantine
) -> list[dict[str, Any]]:
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
        rec.update(quarantine.clean({k: rec[k] for k in RECORD_TEXT if k in rec}, where))
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
    if rec.get("recorded_at") is not None and not _finite(rec["recorded_at"]):
        raise Rejected(f"{where}: field 'recorded_at': {quote(rec['recorded_at'])} is not a time")
    for col in RECORD_TOKENS:
        if rec.get(col) is not None and not (isinstance(rec[col], str) and _TOKEN.match(rec[col])):
            raise Rejected(f"{where}: field '{col}': {quote(rec[col])} is not a name or a hash")
    if (
        not isinstance(rec.get("generation"), int)
        or isinstance(rec.get("generation"), bool)
        # -1: outside any generation, a quarantine of the GPU-reset journal (oto.registry.gpu_journal)
        or rec["generation"] < (-1 if (kind, rec.get("status")) == ("failed", GPU_RESET) else 0)
    ):
        raise Rejected(f"{where}: field 'generation': {quote(rec.get('generation'))} is not a generation")
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
    if kind in ("benchmarked", "built", "proposed") and rec.get("params"):
        _check_id(rec.get("params"), rec["kernel_id"], where)


def _check_id(params: Any, kernel_id: str, where: str) -> None:
    text = params if isinstance(params, str) else json.dumps(params, sort_keys=True, default=str)
    if _id_of(text) != kernel_id:
        raise Rejected(f"{where}: kernel {kernel_id} is not the id of its parameters")


@functools.lru_cache(maxsize=4096)
def _id_of(params: str) -> str | None:
    """The kernel id of parameters in JSON (a night's registry names each kernel several times)."""
    try:
        p = json.loads(params)
        return candidate_id(p) if isinstance(p, Mapping) else None
    except (ValueError, TypeError, CandidateError):
        return None


def _final(
    doc: Any,
    name: str,
    library: str,
    desc: Mapping,
    profile: Mapping,
    expect: Expect,
    quarantine: Quarantine,
) -> dict[str, Any]:
    if not isinstance(doc, Mapping) or doc.get("library") != library:
        raise Rejected(f"{name}: not the final result of {library}")
    kernels = doc.get("kernels")
    doc = {**quarantine.clean({k: v for k, v in doc.items() if k != "kernels"}, name), "kernels": kernels}
    prov = doc.get("provenance") or {}
    if prov.get("numbers") != desc["numbers"]:
        said = quote(prov.get("numbers"))
        raise Rejected(f"{name}: field 'provenance.numbers': {said}, the bundle says {desc['numbers']}")
    _check_backend(prov, name, desc["numbers"], expect.arch)
    sizes, rows = doc.get("sizes"), doc.get("per_size")
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
    if not _finite(doc.get("generations") or 0) or not 0 <= (doc.get("generations") or 0) < 10000:
        raise Rejected(f"{name}: field 'generations': {quote(doc.get('generations'))} is not a count")
    for kid, params in kernels.items():
        _check_id(params, str(kid), f"{name}: kernels.{kid}")
    _check_final_rows(rows, sizes, kernels, name, _ceiling(profile, library), library)
    return current_final(doc)  # a bundle of an older oto reads with today's field names


def _check_backend(prov: Mapping[str, Any], name: str, numbers: str, arch: str) -> None:
    """The backend a final names must be one whose numbers the bundle says it holds: a simulated night
    relabelled as measured still names the simulator that made it. A measured night names the GPU it ran on
    (``device``, the driver's physical arch; "unknown" where the probe could not tell)."""
    backend = prov.get("backend")
    try:
        made = backend_type(str(backend)).numbers
    except ValueError:
        raise Rejected(
            f"{name}: field 'provenance.backend': {quote(backend)} is no backend of oto "
            f"(known: {', '.join(BACKENDS)})"
        ) from None
    if made != numbers:
        raise Rejected(
            f"{name}: field 'provenance.backend': {backend} gives {made} numbers, the bundle says {numbers}"
        )
    device = prov.get("device")
    if numbers == "measured" and device not in (None, "unknown", arch):
        raise Rejected(f"{name}: field 'provenance.device': measured on {quote(device)}, not on {arch}")


def _check_final_rows(
    rows: list, sizes: list, kernels: Mapping, name: str, ceiling: float, library: str
) -> None:
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
        if problem := final_row_problem(r, kernels):
            col, value, why = problem
            raise Rejected(f"{where}: field '{col}': {quote(value)} {why}")
        if r["gflops"] > ceiling:
            raise Rejected(
                f"{where}: field 'gflops': {r['gflops']:.1f} is above the device's theoretical "
                f"ceiling {ceiling:.1f} GFLOPS for {library}"
            )
