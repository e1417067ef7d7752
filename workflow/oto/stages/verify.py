"""verify: rocBLAS's own client (``rocblas-bench`` with verification) on every library's deck sizes, with
the tuned library installed as a user installs it (``ROCBLAS_TENSILE_LIBPATH`` and the label's environment
from the profile's ``stock_library``) → ``results/<arch>/<library>/verify.yaml``: pass/fail and the norm error
per size, and per library the kernels taken out (the next verified candidate of finalize's race takes their
sizes, else the spoof kernel where it is not known wrong, else the nearest size's row; the logic stage writes
what verify decided). The client is the one the backend
declares (``rocblas_client``); where there is none the file says why verify was skipped.
See :mod:`oto.rocblas.night` and :mod:`oto.rocblas.verify`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.deck.model import read_library_yaml
from oto.files import read_yaml_mirrored, write_yaml
from oto.measurement.samples import read_samples
from oto.rocblas import night
from oto.rocblas.clients import stage_client
from oto.stages import BACKEND_FIELDS, Stage
from oto.tensile.labels import LABEL_FIELDS
from oto.tensile.legality import Limits

PROFILE = ("arch", BACKEND_FIELDS, *LABEL_FIELDS, *Limits.PROFILE_FIELDS)
# one job per library: a library's logic file (and a one-family target) needs only its own verification
STAGE = Stage("verify", "library", "{library}", reads=("deck", "finalize"), gpu=True, profile=PROFILE)
log = logging.getLogger(__name__)


def run(
    final_paths: Sequence[Path],
    sample_paths: Sequence[Path],
    deck_paths: Sequence[Path],
    profile: Mapping,
    config: Mapping,
    label: str,
    out: Path,
    work: Path,
) -> dict[str, Any]:
    runner, what = stage_client(config, profile, "verify", [Path(p).parent.name for p in final_paths])
    if runner is None:
        doc = night.skipped("verify", what)
    else:
        finals = {Path(p).parent.name: read_yaml_mirrored(p) for p in final_paths}
        samples = {Path(p).parent.name: read_samples(Path(p)) for p in sample_paths}
        decks = {Path(p).parent.name: read_library_yaml(p) for p in deck_paths}
        doc = night.verify_night(runner, what, finals, samples, decks, profile, config, label, Path(work))
    write_yaml(out, doc)
    log.info("verify: %s", doc.get("reason") or f"{len(doc['libraries'])} libraries, {doc['numbers']}")
    return doc
