"""family: one family's libraries (all selected contraction patterns) summarised in one file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from oto.files import read_yaml_mirrored, write_yaml
from oto.stages import Stage

STAGE = Stage(name="family", scope="family", home="family", reads=("finalize", "logic"))
log = logging.getLogger(__name__)


def run(family: str, final_paths: Sequence[Path], logic_paths: Sequence[Path], out: Path) -> dict:
    libraries = {}
    provenance = {}
    for path in final_paths:
        final = read_yaml_mirrored(path)
        if final["family"] != family:
            raise ValueError(f"{path}: field 'family' is {final['family']!r}, expected {family!r}")
        provenance = final["provenance"]
        libraries[final["library"]] = {
            "pattern": final["pattern"],
            "final": str(path),
            "summary": final["summary"],
            "generations": final["generations"],
            "converged": final["converged"],
        }
    doc = {
        "family": family,
        "provenance": provenance,
        "libraries": libraries,
        "logic": [str(p) for p in logic_paths],
    }
    write_yaml(out, doc)
    log.info("family %s: %d libraries", family, len(libraries))
    return doc
