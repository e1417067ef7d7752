"""Where the deliverables' numbers came from, and whether code objects may be built from them.

* Beside every logic file the logic stage writes ``<logic file stem>.provenance.json``: the library, its
  numbers (simulated | replayed | measured), the backend's provenance (simulator model version and seed, or
  Tensile version and device) and how it was measured (launch order, telemetry, drift estimator). JSON, so
  TensileCreateLibrary, which takes only ``*.yaml``/``*.yml`` logic files (TensileCreateLibrary.py
  ``findLogicFiles``), never reads it, and the logic folder stays a valid ``--logic-path``.
* Every logic file starts with comment lines saying the same (:func:`logic_header`): a reader of the file
  alone can tell simulated numbers from measured ones. YAML comments are nothing to TensileCreateLibrary or
  rocBLAS's build, which load logic files with a YAML parser (Tensile LibraryIO ``readYAML``).
* ``library/manifest.yaml`` gets a ``provenance:`` block summing those records, and ``TensileLibrary.dat``
  carries the same block under the top-level key :data:`DAT_KEY`, which Tensile's loader never reads (see
  :data:`DAT_KEY`).
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
# What each kind of number means for the deliverable, in the words every output uses.
MEANING = {
    "simulated": "simulated — not for installing: oto's model of the GPU (docs/simulator.md), no hardware "
    "was measured",
    "replayed": "replayed — not for installing: recorded measurements replayed, not timed on this GPU",
    "measured": "measured on the GPU",
}
# The top-level key of TensileLibrary.dat that holds oto's provenance block. Tensile's msgpack loader, which
# rocBLAS calls (rocBLAS library/src/tensile_host.cpp: Tensile::LoadLibraryFilePreload), reads the top-level
# map by name and never iterates it (ROCm/Tensile a164ed70d):
#   Tensile/Source/lib/source/msgpack/MessagePack.cpp:127-130  the top level goes straight to
#       PointerMappingTraits<MasterContractionLibrary>::mapping, not through MessagePackInput::input;
#   Tensile/Source/lib/include/Tensile/Serialization/Base.hpp:214  which calls MappingTraits::mapping, so
#       MessagePackInput::checkUsedKeys (MessagePack.hpp:181-193, run from input() at :202-203, and only
#       under TENSILE_DB's data-init bit 0x1000) never sees the top-level map;
#   Tensile/Source/lib/include/Tensile/Serialization/SolutionLibrary.hpp:167,178,206  the keys it reads:
#       "version" (optional), "solutions", "library";
#   Tensile/Source/lib/include/Tensile/msgpack/MessagePack.hpp:125-172  mapRequired/mapOptional look a key
#       up in the map (objectToMap, MessagePack.cpp:37-66, takes string keys and any value).
# Tensile's Python never reads a .dat (LibraryIO writes msgpack, reads YAML only). A key Tensile may add
# later would have to be named exactly this to collide.
DAT_KEY = "oto_provenance"
FACTS = "oto provenance facts:"  # the logic header's key=value line


class ProvenanceError(ValueError):
    """A provenance record that is missing or unreadable; names the file and field."""


class PackagingRefused(RuntimeError):
    """Code objects were demanded (``package.create_library: always``) from winners that were not measured."""


def record_path(logic_path: Path | str) -> Path:
    """``logic/gfx90c_Cijk_Ailk_Bljk_DB.yaml`` → ``logic/gfx90c_Cijk_Ailk_Bljk_DB.provenance.json``."""
    p = Path(logic_path)
    return p.with_name(p.stem + SUFFIX)


def logic_record(
    final: Mapping[str, Any], logic_file: Path, label: str, model_check: str | None = None
) -> dict[str, Any]:
    """The provenance record of one logic file, from the library's final.yaml (``model_check``: how well the
    model behind simulated numbers was checked on the chip, where they are simulated)."""
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
        "night": final.get("night"),  # the run that finished the library (None: a final.yaml from before)
        "oto_version": oto.__version__,
        "oto_commit": oto.source_commit(),  # None: not written from a git checkout
        **({"model_check": model_check} if model_check else {}),
        "about": "written by oto beside the logic file; TensileCreateLibrary reads only *.yaml/*.yml logic "
        "files",
    }


def _version_facts(prov: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the source of the numbers: the simulator's model version, Tensile's version and the
    device, or the replayed cache."""
    return {k: prov[k] for k in ("model_version", "tensile_version", "device", "cache", "seed") if k in prov}


def logic_header(final: Mapping[str, Any], model_check: str | None = None) -> list[str]:
    """The comment lines a logic file starts with: what its numbers are, how well the model behind simulated
    ones was checked on the chip (``model_check``), then the same as ``key=value``."""
    prov = dict(final.get("provenance") or {})
    numbers = str(prov.get("numbers", "unknown"))
    backend = prov.get("backend", "unknown")
    backend = "+".join(map(str, backend)) if isinstance(backend, list) else str(backend)
    facts = {"numbers": numbers, "backend": backend, **_version_facts(prov), "oto": oto.__version__}
    what = MEANING.get(numbers, f"numbers of unknown provenance ({numbers})")
    return [
        f"oto provenance: {what}. The GFLOPS in this file are {numbers}.",
        *([f"oto provenance: {model_check}"] if model_check else []),
        FACTS + " " + " ".join(f"{k}={str(v).replace(' ', '_')}" for k, v in facts.items()),
    ]


def read_logic_header(path: Path | str) -> dict[str, str]:
    """The ``key=value`` facts of a logic file's provenance header ({} for a file without one)."""
    facts: dict[str, str] = {}
    with open(path) as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            text = line[1:].strip()
            if text.startswith(FACTS):
                facts.update(kv.split("=", 1) for kv in text[len(FACTS) :].split() if "=" in kv)
    return facts


def dat_block(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What ``TensileLibrary.dat`` carries under :data:`DAT_KEY`: the manifest's provenance block, the oto
    version and one line saying what the numbers mean for installing the library."""
    block = deliverable_provenance(records)
    kinds = block["numbers"] or ["unknown"]
    block["oto_version"] = oto.__version__
    block["meaning"] = "; ".join(MEANING.get(n, f"{n}: unknown provenance") for n in kinds)
    return block


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


def finished_libraries(logic_dir: Path | str, prefix: str, label: str, backend: str) -> list[str]:
    """The libraries whose logic file (``<prefix>_<library>.yaml``) and provenance record lie in
    ``logic_dir`` with this ``label`` and ``backend``: what earlier runs in the folder finished."""
    out = []
    for path in sorted(Path(logic_dir).glob(f"{prefix}_*{SUFFIX}")):
        (record,) = read_records([path])
        logic = path.with_name(path.name[: -len(SUFFIX)] + ".yaml")
        if record.get("label") == label and record.get("backend") == backend and logic.is_file():
            out.append(str(record.get("library")))
    return out


def deliverable_provenance(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The manifest's ``provenance:`` block: what kinds of numbers the logic files hold, per library."""
    libraries = {}
    for r in records:
        version = {k: v for k, v in _version_facts(r.get("provenance") or {}).items() if k != "seed"}
        libraries[str(r.get("library"))] = {
            "numbers": r.get("numbers"),
            "backend": r.get("backend"),
            **version,
            "drift": (r.get("measurement") or {}).get("drift"),
            "logic_file": r.get("logic_file"),
            "night": (r.get("night") or {}).get("id"),
        }
    checks = sorted({str(r["model_check"]) for r in records if r.get("model_check")})
    return {
        "numbers": sorted({str(r.get("numbers")) for r in records}),
        "backends": sorted({str(r.get("backend")) for r in records}),
        **({"model_check": checks} if checks else {}),  # simulated numbers: how well the model was checked
        "nights": nights(records),
        "libraries": libraries,
    }


def nights(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The runs (nights) that finished the libraries of ``records`` (logic records, or final.yaml documents),
    by id: each night's settings and the libraries it finished. Libraries recorded before nights were are
    left out."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        night = r.get("night")
        if isinstance(night, Mapping) and night.get("id"):
            entry = out.setdefault(str(night["id"]), {k: v for k, v in night.items() if k != "id"})
            entry.setdefault("libraries", []).append(str(r.get("library")))
    for entry in out.values():
        entry["libraries"] = sorted(entry["libraries"])
    return dict(sorted(out.items()))


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
