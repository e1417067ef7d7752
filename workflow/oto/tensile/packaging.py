"""Packaging logic files into a deliverable: ``TensileLibrary.dat`` (oto's native writer) and, where
Tensile is installed, TensileCreateLibrary's code objects, with ``library/manifest.yaml`` saying where the
numbers came from (:mod:`oto.tensile.provenance`), which files were built, or why none were.

One path for the workflow's package stage and ``oto merge``: both check the logic files, label them, gate the
code objects on measured winners (``package.allow_simulated`` opts in to others) and register the target ISA
with Tensile from the profile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oto.config import config_block
from oto.files import atomic_write_text
from oto.tensile import legality
from oto.tensile.create_library import build_library
from oto.tensile.install import register_args, tensile_command
from oto.tensile.labels import logic_label
from oto.tensile.logic_reader import check_logic_files
from oto.tensile.native_library import build_master_library, write_library
from oto.tensile.provenance import (
    DAT_KEY,
    PackagingRefused,
    code_object_gate,
    dat_block,
    deliverable_provenance,
    read_records,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackageSettings:
    """Config block ``package`` (its defaults and docs: the config schema), read once."""

    label: str  # native | spoof | gfx900 (oto.tensile.labels)
    create_library: str  # auto | always | never
    allow_simulated: bool  # code objects from winners that were not measured

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PackageSettings:
        package = config_block(config, "package")
        return cls(str(package["label"]), str(package["create_library"]), bool(package["allow_simulated"]))


def package_library(
    logic_paths: Sequence[Path],
    profile: Mapping,
    out: Path,
    settings: PackageSettings,
    manifest: Path | None = None,
    tensile_cfg: Mapping | None = None,
    provenance_paths: Sequence[Path] = (),
) -> dict[str, Any]:
    """Write ``out`` (and ``manifest`` with the code objects beside it, if given), labelled and gated as
    config block ``package`` says (``settings``); return the manifest's document (without a manifest: the
    library's facts only)."""
    label, create_library = settings.label, settings.create_library
    prefix, arch, _ = logic_label(profile, label)
    logic_paths = [Path(p) for p in logic_paths]
    # nothing Tensile would not build is packaged: a bad file stops here, named, before anything is written
    check_logic_files(logic_paths, legality.Limits.from_profile(profile))
    library = build_master_library(logic_paths, arch=arch)
    records = read_records(provenance_paths)
    # the .dat says itself whether its numbers were measured, under a key Tensile's loader never reads
    write_library({**library, DAT_KEY: dat_block(records)}, out)
    log.info(
        "%s: %d solutions from %d logic files, labelled %s",
        out,
        len(library["solutions"]),
        len(logic_paths),
        arch,
    )
    # relative to the manifest that records it, so a copied or moved results folder still points at it
    where = os.path.relpath(out, Path(manifest).parent) if manifest is not None else str(out)
    doc: dict[str, Any] = {
        "label": label,
        "architecture": arch,
        "native_dat": Path(where).as_posix(),
        "solutions": len(library["solutions"]),
        "logic_files": len(logic_paths),
    }
    if manifest is None:
        return doc
    doc["provenance"] = deliverable_provenance(records)
    allowed, gate = code_object_gate(doc["provenance"]["numbers"], settings.allow_simulated)
    built = {}
    if create_library != "never" and not allowed:
        if create_library == "always":
            raise PackagingRefused(f"config field 'package.create_library' is 'always' but {gate}")
        # news where Tensile could have built them; without Tensile (the simulator's demo) one more reason
        tensile_found = tensile_command(tensile_cfg or {}) is not None
        (log.warning if tensile_found else log.info)("TensileCreateLibrary not run: %s", gate)
    elif create_library != "never":
        built = build_library(
            logic_paths,
            arch,
            Path(manifest).parent,
            tensile_cfg or {},
            prefix=prefix,
            register=register_args(profile),
        )
        if not built and create_library == "always":
            raise RuntimeError(
                "config field 'package.create_library' is 'always' but Tensile was not found "
                "(set tensile.python or $OTO_TENSILE_PYTHON)"
            )
        if built:
            built["provenance"] = gate
    why = "Tensile not found" if create_library != "never" else "package.create_library is never"
    why = gate if not allowed and create_library != "never" else why
    doc["tensile_create_library"] = built or {"files": [], "why": f"not run: {why}"}
    if built:
        log.info("TensileCreateLibrary (%s): %s", arch, ", ".join(built["files"]))
    Path(manifest).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(manifest, yaml.safe_dump(doc, sort_keys=False))
    return doc
