"""Where the deliverables' numbers came from, and whether code objects may be built from them.

* Beside every logic file the logic stage writes ``<logic file stem>.provenance.json``: the library, its
  numbers (simulated | replayed | measured), the backend's provenance (simulator model version and seed, or
  Tensile version and device) and how it was measured (launch order, telemetry, drift estimator). JSON, so
  TensileCreateLibrary, which takes only ``*.yaml``/``*.yml`` logic files (TensileCreateLibrary.py
  ``findLogicFiles``), never reads it, and the logic folder stays a valid ``--logic-path``.
* ``library/manifest.yaml`` gets a ``provenance:`` block summing those records.
* TensileCreateLibrary builds installable code objects: :func:`code_object_gate` lets it run on measured
  winners only, unless ``package.allow_simulated: true`` (then the report and the dashboard carry a banner).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import oto
from oto.files import atomic_write_text

SUFFIX = ".provenance.json"
NUMBERS = ("simulated", "replayed", "measured")


class ProvenanceError(ValueError):
    """A provenance record that is missing or unreadable; names the file and field."""


class PackagingRefused(RuntimeError):
    """Code objects were demanded (``package.create_library: always``) from winners that were not measured."""


def record_path(logic_path: Path | str) -> Path:
    """``logic/gfx90c_Cijk_Ailk_Bljk_DB.yaml`` → ``logic/gfx90c_Cijk_Ailk_Bljk_DB.provenance.json``."""
    p = Path(logic_path)
    return p.with_name(p.stem + SUFFIX)


def logic_record(final: Mapping[str, Any], logic_file: Path, label: str) -> dict[str, Any]:
    """The provenance record of one logic file, from the library's final.yaml."""
    prov = dict(final.get("provenance") or {})
    facts = {k: v for k, v in prov.items() if k not in ("stream",)}
    backend = prov.get("backend", "unknown")
    return {
        "logic_file": Path(logic_file).name,
        "library": final.get("library"),
        "label": label,
        "numbers": prov.get("numbers", "unknown"),
        # a merged library (oto merge) names every backend its devices used
        "backend": "+".join(map(str, backend)) if isinstance(backend, list) else backend,
        "provenance": facts,
        "measurement": dict(final.get("measurement") or {}),
        "generations": final.get("generations"),
        "oto_version": oto.__version__,
        "about": "written by oto beside the logic file; TensileCreateLibrary reads only *.yaml/*.yml logic "
        "files",
    }


def write_record(record: Mapping[str, Any], out: Path) -> Path:
    atomic_write_text(Path(out), json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return Path(out)


def read_records(paths: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        try:
            doc = json.loads(Path(p).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ProvenanceError(f"{p}: unreadable provenance record ({exc})") from None
        if not isinstance(doc, dict) or doc.get("numbers") not in (*NUMBERS, "unknown"):
            raise ProvenanceError(f"{p}: field 'numbers' must be one of {', '.join(NUMBERS)}")
        out.append(doc)
    return out


def deliverable_provenance(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The manifest's ``provenance:`` block: what kinds of numbers the logic files hold, per library."""
    libraries = {}
    for r in records:
        prov = r.get("provenance") or {}
        version = {k: prov[k] for k in ("model_version", "tensile_version", "device", "cache") if k in prov}
        libraries[str(r.get("library"))] = {
            "numbers": r.get("numbers"),
            "backend": r.get("backend"),
            **version,
            "drift": (r.get("measurement") or {}).get("drift"),
            "logic_file": r.get("logic_file"),
        }
    return {
        "numbers": sorted({str(r.get("numbers")) for r in records}),
        "backends": sorted({str(r.get("backend")) for r in records}),
        "libraries": libraries,
    }


def code_object_gate(numbers: Sequence[str], allow_simulated: bool) -> tuple[bool, str]:
    """(may TensileCreateLibrary build code objects from these winners, why). Only measured winners, unless
    ``package.allow_simulated`` opts in to building from simulated (or replayed) ones."""
    other = sorted(n for n in set(numbers) if n != "measured")
    if not numbers:
        other = ["of unknown provenance (no provenance record beside the logic files)"]
    if not other:
        return True, "every winner was measured on the GPU"
    if allow_simulated:
        return True, f"winners are {', '.join(other)}; built because package.allow_simulated is true"
    return False, (
        f"winners are {', '.join(other)}, not measured on the GPU: no installable code objects are built "
        "from them (set package.allow_simulated: true to build them anyway)"
    )


def simulated_build_banner(numbers: Sequence[str], package: Mapping[str, Any]) -> str:
    """The warning the report and the dashboard show when code objects will be built from numbers that were
    not measured (``package.allow_simulated: true``), else ''."""
    other = sorted(n for n in set(numbers) if n != "measured")
    if not other or not package.get("allow_simulated") or package.get("create_library") == "never":
        return ""
    return (
        f"package.allow_simulated is true: TensileCreateLibrary builds installable code objects into "
        f"library/ from {' and '.join(other)} winners. They were not measured on this GPU; do not install "
        "them as tuned kernels."
    )
