"""A tester's result bundle: one ``.oto.tar.gz`` with everything the maintainer's merge needs and nothing
private.

Layout (paths inside the archive; no top folder, regular files only)::

    bundle.yaml            what, who, how: schema, arch, shard, libraries, device, provenance, record counts
    MANIFEST.sha256        sha256 of every other member, ``sha256sum`` format (check: sha256sum -c)
    config.yaml            the run's validated config
    preflight.yaml         the preflight checks as the tester saw them
    profile/<arch>.yaml    the device profile the run used (the arch profile refined for this device)
    registry/<library>.jsonl   every registry record of the library: proposals, rejections, builds,
                           measurements and failures, one job-file (oto.registry.job_files) per library
    samples/<library>/gen<N>.csv, samples/<library>/final.csv
                           every timed launch of each generation and of the finalize race (samples.csv):
                           the raw measurements the merge recomputes every score and winner from
    results/ceilings.yaml, results/<library>/final.yaml, results/acceptance.md|html
    logs/...               the run's logs (rule logs, the agent's audit logs, Snakemake's log)

Privacy: every text member passes the :class:`Scrubber` (API keys, tokens, anything that looks like a secret
or names the tester's home folder), and the finished archive is scanned again; a bundle that still carries one
is never written. Tar headers carry no user or group names, the gzip header no file name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import oto
from oto.agent.audit import Redactor, secret_shapes
from oto.files import dump_yaml, read_yaml
from oto.hardware.device_profile import profile_hash
from oto.registry.gpu_journal import Quarantine
from oto.registry.job_files import job_file_text, read_job_file
from oto.registry.records import config_hash
from oto.tensile.logic_writer import MINIMUM_REQUIRED_VERSION

SCHEMA_VERSION = 2  # 2: the samples travel with the claims (a merge recomputes them)
SUFFIX = ".oto.tar.gz"
DESCRIPTOR = "bundle.yaml"
MANIFEST = "MANIFEST.sha256"
# Environment variables whose values never enter a bundle (beyond the API key's own name): keys, tokens,
# secrets, passwords and passphrases (DB_PASS, SMTP_PASSWORD, PASSPHRASE), credentials, cookies.
_SECRET_NAMES = re.compile(r"(KEY|TOKEN|SECRET|(^|_)PASS|PASSW|CREDENTIAL|COOKIE|AUTH|PRIVATE)", re.I)
_HOME_SHAPES = re.compile(r"(/home/|/Users/|/var/home/)[^/\s'\"<>:]+")


class BundleError(RuntimeError):
    pass


class Scrubber:
    """Takes secrets and the tester's paths out of text: values of secret-looking environment variables and
    key shapes (oto.agent.audit.Redactor), the work folder (→ ``$WORKDIR``) and home folders (→ ``~``)."""

    def __init__(self, environ: Mapping[str, str], workdir: Path, home: Path | None = None):
        secrets = [v for k, v in environ.items() if _SECRET_NAMES.search(k) and v and len(v) >= 8]
        self.redact = Redactor(secrets)
        self.secrets = self.redact.secrets
        home = home or Path(environ.get("HOME") or os.path.expanduser("~"))
        # Longest first: the work folder usually sits inside the home folder.
        self.paths = sorted(
            {(str(Path(workdir).resolve()), "$WORKDIR"), (str(Path(workdir)), "$WORKDIR"), (str(home), "~")}
            - {("/", "~"), ("", "~")},
            key=lambda p: -len(p[0]),
        )
        self.home = str(home)

    def text(self, s: str) -> str:
        s = self.redact.text(s)
        for path, placeholder in self.paths:
            if len(path) > 1:
                s = s.replace(path, placeholder)
        return _HOME_SHAPES.sub("~", s)

    def leaks(self, s: str) -> list[str]:
        """What a scrubbed text still carries (must be empty)."""
        found = [f"secret ending …{x[-4:]}" for x in self.secrets if x in s]
        found += [f"a {shape}" for shape in secret_shapes(s)]
        if len(self.home) > 1 and self.home in s:
            found.append("the home folder")
        if _HOME_SHAPES.search(s):
            found.append("a home folder path")
        return found


@dataclass
class Member:
    name: str
    data: bytes


@dataclass
class BundleSpec:
    """What goes into one bundle (gathered by :func:`gather`)."""

    arch: str
    shard: str
    libraries: list[str]
    config: dict[str, Any]
    profile: dict[str, Any]  # the device profile the run used
    arch_profile: dict[str, Any]
    arch_profile_file: Path
    results: Path  # results/<arch>
    logs: list[Path] = field(default_factory=list)
    preflight: list[dict[str, Any]] | None = None
    extra_logs: list[tuple[str, Path]] = field(default_factory=list)  # (name in bundle, file)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _registry_members(spec: BundleSpec) -> tuple[list[Member], dict[str, int], list[str], set[str], set[str]]:
    members, counts, problems, numbers, tensile = [], {}, [], set(), set()
    quarantined = Quarantine(spec.results / "registry" / "quarantine.jsonl").kernel_records()
    for lib in spec.libraries:
        files = sorted(
            (spec.results / lib).glob("gen*/registry.jsonl"), key=lambda p: int(p.parent.name[3:] or 0)
        )
        records = []
        for f in files:
            res = read_job_file(f)
            records += res.records
            problems += res.problems
        # kernels that took this tester's GPU down travel with the library's records (gpu_reset)
        records += [r for r in quarantined if r.get("library") == lib]
        if not records:
            continue
        for r in records:
            r["source"] = ""  # the tester's path; the merge says which bundle a record came from
            numbers.add(r.get("numbers") or "")
            versions = json.loads(r.get("tool_versions") or "{}")
            tensile.add(versions.get("tensile_version") or "")
        members.append(Member(f"registry/{lib}.jsonl", job_file_text(records)[0].encode()))
        counts[lib] = len(records)
    return members, counts, problems, numbers - {""}, tensile - {""}


def _samples_members(spec: BundleSpec) -> list[Member]:
    """Every generation's samples.csv and, for a finished library, the finalize race's: the measurements the
    merge recomputes scores and winners from (it takes no claim on its word)."""
    out = []
    for lib in spec.libraries:
        for f in sorted((spec.results / lib).glob("gen*/samples.csv")):
            if f.parent.name[3:].isdigit():
                out.append(Member(f"samples/{lib}/{f.parent.name}.csv", f.read_bytes()))
        final = spec.results / lib / "final_samples.csv"
        if final.is_file() and (spec.results / lib / "final.yaml").is_file():
            out.append(Member(f"samples/{lib}/final.csv", final.read_bytes()))
    return out


def gather(spec: BundleSpec, created: float | None = None) -> tuple[list[Member], dict[str, Any]]:
    """The members of the bundle (manifest and descriptor excluded) and its descriptor."""
    created = time.time() if created is None else created
    members = [
        Member("config.yaml", dump_yaml(spec.config).encode()),
        Member(f"profile/{spec.arch}.yaml", dump_yaml(spec.profile).encode()),
    ]
    if spec.preflight is not None:
        members.append(Member("preflight.yaml", dump_yaml(spec.preflight).encode()))
    reg, counts, problems, numbers, tensile = _registry_members(spec)
    members += reg
    finished, final_numbers = [], set()
    for name in ("ceilings.yaml", "acceptance.md", "acceptance.html"):
        if (spec.results / name).is_file():
            members.append(Member(f"results/{name}", (spec.results / name).read_bytes()))
    members += _samples_members(spec)
    for lib in spec.libraries:
        final = spec.results / lib / "final.yaml"
        if final.is_file():
            members.append(Member(f"results/{lib}/final.yaml", final.read_bytes()))
            finished.append(lib)
            prov = (read_yaml(final) or {}).get("provenance") or {}
            final_numbers.add(prov.get("numbers") or "")
            if prov.get("tensile_version"):
                tensile.add(str(prov["tensile_version"]))
    for log in spec.logs:
        members.append(Member(f"logs/{log.relative_to(spec.results / 'logs').as_posix()}", log.read_bytes()))
    for name, path in spec.extra_logs:
        members.append(Member(f"logs/{name}", path.read_bytes()))
    numbers |= final_numbers - {""}
    device = dict(spec.profile.get("device") or {})
    deck = read_yaml(spec.results / "deck.yaml") if (spec.results / "deck.yaml").is_file() else {}
    agent_used = sum(1 for m in reg for line in m.data.decode().splitlines() if '"proposer": "agent"' in line)
    descriptor = {
        "schema": SCHEMA_VERSION,
        "kind": "oto-bundle",
        "created_at": datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "arch": spec.arch,
        "shard": spec.shard,
        "libraries": list(spec.libraries),
        "finished": finished,
        "records": counts,
        "numbers": sorted(numbers)[0] if len(numbers) == 1 else ("mixed" if numbers else "none"),
        "device": {
            k: device.get(k)
            for k in (
                "id",
                "cpu",
                "gpu_name",
                "pci_device",
                "compute_units",
                "clock_mhz",
                "memory_kind",
                "peak_bandwidth_gbs",
                "carve_out_bytes",
                "gtt_bytes",
                "kernel",
                "driver",
                "rocm",
            )
        },
        "provenance": {
            "oto_version": oto.__version__,
            "tensile_version": sorted(tensile)[0] if len(tensile) == 1 else (sorted(tensile) or None),
            "logic_format": MINIMUM_REQUIRED_VERSION,
            "backend": spec.config.get("backend"),
            "config_hash": config_hash(spec.config),
            "arch_profile_sha256": _sha(spec.arch_profile_file.read_bytes()),
            "arch_profile_hash": profile_hash(spec.arch_profile),
            "device_profile_hash": profile_hash(spec.profile),
            "deck_source": {
                k: v
                for k, v in (((deck or {}).get("provenance") or {}).get("deck_source") or {}).items()
                if k in ("kind", "sha256")
            },
        },
        "agent_proposals": agent_used,
        "problems": problems,
    }
    return members, descriptor


def manifest_text(members: Iterable[Member]) -> str:
    return "".join(f"{_sha(m.data)}  {m.name}\n" for m in sorted(members, key=lambda m: m.name))


def archive_bytes(members: list[Member], mtime: float) -> bytes:
    """A gzip'd tar of regular files with neutral headers (no user names, fixed modes, no gzip file name)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for m in sorted(members, key=lambda m: m.name):
            info = tarfile.TarInfo(m.name)
            info.size, info.mtime, info.mode = len(m.data), int(mtime), 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(m.data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=int(mtime))


def write_bundle(
    spec: BundleSpec, out_dir: Path, scrubber: Scrubber, created: float | None = None
) -> tuple[Path, dict[str, Any]]:
    """Gather, scrub, checksum and write the bundle atomically; returns its path and descriptor.

    The name says arch, device, shard and time:
    ``oto-gfx90c-d1a2b3c4d5e6-shard2of4-20250101T0300Z.oto.tar.gz``.
    """
    created = time.time() if created is None else created
    members, descriptor = gather(spec, created)
    clean = [Member(m.name, scrubber.text(m.data.decode("utf-8", "replace")).encode()) for m in members]
    clean.append(Member(DESCRIPTOR, scrubber.text(dump_yaml(descriptor)).encode()))
    clean.append(Member(MANIFEST, manifest_text(clean).encode()))
    for m in clean:
        leaks = scrubber.leaks(m.data.decode("utf-8", "replace"))
        if leaks:
            raise BundleError(f"bundle member {m.name} still carries {', '.join(leaks)}; not written")
    data = archive_bytes(clean, created)
    stamp = datetime.fromtimestamp(created, UTC).strftime("%Y%m%dT%H%M%SZ")
    device = (descriptor["device"] or {}).get("id") or "unknown"
    shard = spec.shard.replace("/", "of")
    out = Path(out_dir) / f"oto-{spec.arch}-{device}-shard{shard}-{stamp}{SUFFIX}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    return out, descriptor


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
