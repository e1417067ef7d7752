"""package: every library's logic file → one TensileLibrary.dat (Tensile's MasterSolutionLibrary, msgpack).

Where Tensile is installed (``package.create_library``: auto), TensileCreateLibrary also builds the code
objects rocBLAS needs into ``results/<arch>/library/`` (lazy, separate architectures, msgpack; see
:mod:`oto.tensile.create_library`), from measured winners only unless ``package.allow_simulated: true``
(:mod:`oto.tensile.provenance`); ``library/manifest.yaml`` says where the numbers came from, which files were
built, or why none were.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from oto.files import atomic_write_text
from oto.tensile import legality
from oto.tensile.create_library import build_library
from oto.tensile.install import register_args
from oto.tensile.logic_reader import check_logic_files
from oto.tensile.logic_writer import logic_label
from oto.tensile.native_library import build_master_library, write_library
from oto.tensile.provenance import PackagingRefused, code_object_gate, deliverable_provenance, read_records

log = logging.getLogger(__name__)


def run(
    logic_paths: Sequence[Path],
    profile: Mapping,
    label: str,
    out: Path,
    manifest: Path | None = None,
    tensile_cfg: Mapping | None = None,
    create_library: str = "auto",
    provenance_paths: Sequence[Path] = (),
    allow_simulated: bool = False,
) -> Path:
    prefix, arch, _ = logic_label(profile, label)
    # nothing Tensile would not build is packaged: a bad file stops here, named, before anything is written
    check_logic_files([Path(p) for p in logic_paths], legality.Limits.from_profile(profile))
    library = build_master_library([Path(p) for p in logic_paths], arch=arch)
    write_library(library, out)
    log.info(
        "%s: %d solutions from %d logic files, labelled %s",
        out,
        len(library["solutions"]),
        len(logic_paths),
        arch,
    )
    if manifest is not None:
        doc = {"label": label, "architecture": arch, "native_dat": str(out)}
        doc["provenance"] = deliverable_provenance(read_records(provenance_paths))
        allowed, gate = code_object_gate(doc["provenance"]["numbers"], allow_simulated)
        built = {}
        if create_library != "never" and not allowed:
            if create_library == "always":
                raise PackagingRefused(f"config field 'package.create_library' is 'always' but {gate}")
            log.warning("TensileCreateLibrary not run: %s", gate)
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
    return Path(out)
