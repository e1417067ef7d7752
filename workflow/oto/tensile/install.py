"""Finding and starting Tensile: the interpreter that imports it, the command oto runs it with, the
``tensile`` config block resolved into settings, and the probe of its version and native ISAs.

oto never imports Tensile itself: it runs :mod:`oto.tensile.runtime` under Tensile's Python (a separate venv
on the GPU box), which registers ISAs Tensile lacks before handing over to Tensile's own entry points.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oto.config import config_defaults
from oto.files import locked_json

RUNTIME_SCRIPT = Path(__file__).resolve().parent / "runtime.py"


class TensileUnavailable(RuntimeError):
    pass


REGISTRATION_FIELDS = ("arch", "tensile.caps_from")  # what registrations reads


def registrations(profile: Mapping[str, Any]) -> dict[str, str]:
    """{ISA: donor ISA} Tensile must be taught at run time for this arch profile: the profile's arch takes
    the capabilities of ``tensile.caps_from`` (gfx90c, gfx902 → gfx900). Empty when they are the same ISA.
    runtime.py registers an ISA only when the installed Tensile lacks it."""
    donor = (profile.get("tensile") or {}).get("caps_from")
    arch = str(profile["arch"])
    return {arch: str(donor)} if donor and donor != arch else {}


def register_args(profile: Mapping[str, Any] | None) -> list[str]:
    """runtime.py's ``--oto-register ISA=DONOR`` options for :func:`registrations`."""
    out: list[str] = []
    for isa, donor in registrations(profile or {"arch": ""}).items():
        out += ["--oto-register", f"{isa}={donor}"]
    return out


@dataclass(frozen=True)
class Settings:
    command: tuple[str, ...]  # prefix; "tensile" + args are appended
    register: tuple[str, ...]  # runtime.py's --oto-register options, from the profile's tensile.caps_from
    prebuilt_client: str | None
    asm_cache: Path
    journal: Path  # the GPU-reset journal's folder (oto.registry.gpu_journal)
    quarantine: Path  # kernels that took the GPU down, never run again on it
    timeout_s: float
    batch_size: int
    max_benchmarks: int
    compiler_args: tuple[str, ...]
    isa: str

    @classmethod
    def from_config(cls, tensile_cfg: Mapping[str, Any] | None, profile: Mapping[str, Any]) -> Settings:
        known = config_defaults("tensile")  # the config schema states every default
        unknown = sorted(set(tensile_cfg or {}) - set(known))
        cfg = {**known, **(tensile_cfg or {})}
        if unknown:
            raise ValueError(f"config field 'tensile': unknown key(s) {', '.join(unknown)}")
        if cfg["command"]:
            command = tuple(str(c) for c in cfg["command"])
        else:
            python = cfg["python"] or os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
            if not python:
                raise TensileUnavailable(
                    "Tensile not found: set config tensile.python or $OTO_TENSILE_PYTHON to the Python that "
                    "has Tensile installed, or put `Tensile` on PATH"
                )
            command = (str(python), str(RUNTIME_SCRIPT))
        if int(cfg["batch_size"]) < 1 or float(cfg["timeout_s"]) <= 0:
            raise ValueError("config field 'tensile': batch_size must be >= 1 and timeout_s > 0")
        return cls(
            command=command,
            register=tuple(register_args(profile)),
            prebuilt_client=cfg["prebuilt_client"],
            asm_cache=Path(str(cfg["asm_cache"]).format(arch=profile["arch"])),
            journal=Path(str(cfg["journal"]).format(arch=profile["arch"])),
            quarantine=Path(str(cfg["quarantine"]).format(arch=profile["arch"])),
            timeout_s=float(cfg["timeout_s"]),
            batch_size=int(cfg["batch_size"]),
            max_benchmarks=int(cfg["max_benchmarks"]),
            compiler_args=tuple(str(a) for a in cfg["compiler_args"]),
            isa=str(cfg["isa"] or profile["arch"]),
        )


def tensile_python_from_path() -> str | None:
    """The interpreter of a `Tensile` console script on PATH (its shebang), if any."""
    from shutil import which

    exe = which("Tensile")
    if not exe:
        return None
    with contextlib.suppress(OSError, IndexError):
        first = Path(exe).read_text(errors="replace").splitlines()[0]
        if first.startswith("#!"):
            parts = shlex.split(first[2:])
            return parts[-1] if parts and "python" in parts[-1] else (parts[0] if parts else None)
    return None


def tensile_command(tensile_cfg: Mapping[str, Any]) -> list[str] | None:
    """The command prefix that runs Tensile's entry points, or None when no Tensile is configured or found."""
    if tensile_cfg.get("command"):
        return [str(c) for c in tensile_cfg["command"]]
    python = tensile_cfg.get("python") or os.environ.get("OTO_TENSILE_PYTHON") or tensile_python_from_path()
    return [str(python), str(RUNTIME_SCRIPT)] if python else None


def probe(
    command: list[str] | tuple[str, ...], register: list[str] | tuple[str, ...] = (), timeout: float = 300
) -> dict[str, Any] | None:
    """``<command> probe``: Tensile's version, Python and whether it knows each ISA of ``register`` natively;
    None if it failed."""
    try:
        out = subprocess.run([*command, "probe", *register], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None


def probe_cache_path(settings: Settings) -> Path:
    """Where a project keeps its probe answers: beside the assembler cache (one per project and arch)."""
    return settings.asm_cache.with_name("probe.json")


def _probe_fingerprint(info: Mapping[str, Any]) -> list[list[Any]] | None:
    """What a probe's answer depends on: Tensile's package (its ``__init__`` and ``Common``), the interpreter
    and oto's runtime script, as (path, size, mtime) each. None when one cannot be read: then nothing is
    reused."""
    try:
        tensile = Path(str(info["path"]))
        files = [tensile / "__init__.py", tensile / "Common.py", Path(str(info["python"])), RUNTIME_SCRIPT]
        return [[str(f), st.st_size, st.st_mtime_ns] for f in files for st in [f.stat()]]
    except (KeyError, OSError):
        return None


def cached_probe(
    command: list[str] | tuple[str, ...], register: list[str] | tuple[str, ...], cache: Path
) -> dict[str, Any] | None:
    """:func:`probe`, answered from ``cache`` while the Tensile install it describes is unchanged.

    Every workflow job on the tensile backend records Tensile's version in its provenance; probing means
    starting Tensile's Python and importing Tensile (~4 s), which over a night's hundreds of jobs adds up to
    many minutes. An upgrade of Tensile, its interpreter or oto's runtime script changes the fingerprint and
    the next job probes again; a failed probe is never cached (it determines nothing)."""
    key = json.dumps([list(command), list(register)])

    def read() -> dict[str, Any]:
        try:
            entries = json.loads(cache.read_text())
        except (OSError, ValueError):
            return {}  # missing or damaged: a cache, so probing again loses nothing
        return entries if isinstance(entries, dict) else {}

    with locked_json(cache, read) as entries:  # parallel jobs probe once between them
        entry = entries.get(key)
        if isinstance(entry, dict) and isinstance(entry.get("info"), dict):
            now = _probe_fingerprint(entry["info"])
            if now is not None and entry.get("fingerprint") == now:
                return entry["info"]
        info = probe(command, register)
        fingerprint = _probe_fingerprint(info) if info else None
        if fingerprint is not None:
            entries[key] = {"fingerprint": fingerprint, "info": info}
        return info


def tensile_info(tensile_cfg: Mapping[str, Any], profile: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{"found": True, version, python, native...} from the probe, or {"found": False, "why": ...}."""
    cmd = tensile_command(tensile_cfg)
    if cmd is None:
        return {"found": False, "why": "no tensile.python, $OTO_TENSILE_PYTHON or `Tensile` on PATH"}
    info = probe(cmd, register_args(profile))
    if info is None:
        return {
            "found": False,
            "why": f"`{' '.join(cmd)} probe` failed or printed no JSON (Tensile not importable?)",
        }
    return {"found": True, **info}
