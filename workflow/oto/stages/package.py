"""package: every library's logic file → one TensileLibrary.dat (Tensile's MasterSolutionLibrary, msgpack)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from oto.stages.logic import label_of
from oto.tensile_library import build_master_library, write_library

log = logging.getLogger(__name__)


def run(logic_paths: Sequence[Path], profile: Mapping, label: str, out: Path) -> Path:
    _, arch, _ = label_of(profile, label)
    library = build_master_library([Path(p) for p in logic_paths], arch=arch)
    write_library(library, out)
    log.info(
        "%s: %d solutions from %d logic files, labelled %s",
        out,
        len(library["solutions"]),
        len(logic_paths),
        arch,
    )
    return Path(out)
