"""package: every library's logic file → one TensileLibrary.dat (Tensile's MasterSolutionLibrary, msgpack).

Where Tensile is installed (``package.create_library``: auto), TensileCreateLibrary also builds the code
objects rocBLAS needs into ``results/<arch>/library/`` (lazy, separate architectures, msgpack; see
:mod:`oto.tensile.create_library`), from measured winners only unless ``package.allow_simulated: true``
(:mod:`oto.tensile.provenance`); ``library/manifest.yaml`` says where the numbers came from, which files were
built, or why none were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.stages import Stage
from oto.tensile.install import REGISTRATION_FIELDS
from oto.tensile.labels import LABEL_FIELDS
from oto.tensile.legality import Limits
from oto.tensile.packaging import PackageSettings, package_library

STAGE = Stage(
    name="package",
    scope="run",
    home="",  # TensileLibrary.dat and library/
    reads=("dashboard", "logic", "registry", "report"),
    profile=(*LABEL_FIELDS, *Limits.PROFILE_FIELDS, *REGISTRATION_FIELDS),
)


def run(
    logic_paths: Sequence[Path], profile: Mapping, out: Path, settings: PackageSettings, **options: Any
) -> Path:
    """The library and, given ``manifest=``, the manifest and code objects; options as
    :func:`oto.tensile.packaging.package_library` takes them."""
    package_library(logic_paths, profile, out, settings, **options)
    return Path(out)
