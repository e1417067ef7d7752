"""compare: a paired, interleaved A/B through rocBLAS's own client of the tuned library (as verify left it)
against the stock spoof library and the upstream path, on every library's deck sizes →
``results/<arch>/compare/compare.yaml`` (per baseline and family the speed-up distribution with its confidence
interval, and every regression) and ``compare/samples.csv`` (every call). The client is the one the backend
declares (``rocblas_client``); where there is none the file says why (:mod:`oto.rocblas.night`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.deck.model import read_library_yaml
from oto.files import atomic_write_text, read_yaml, read_yaml_mirrored, write_yaml
from oto.rocblas import night
from oto.rocblas.clients import stage_client
from oto.rocblas.verify import merged_verify
from oto.stages import BACKEND_FIELDS, Stage
from oto.tensile.labels import LABEL_FIELDS
from oto.tensile.legality import Limits

PROFILE = ("arch", BACKEND_FIELDS, *LABEL_FIELDS, *Limits.PROFILE_FIELDS)
READS = ("deck", "finalize", "logic", "verify")
STAGE = Stage("compare", "run", "compare", reads=READS, gpu=True, profile=PROFILE)
log = logging.getLogger(__name__)


def run(
    final_paths: Sequence[Path],
    deck_paths: Sequence[Path],
    logic_paths: Sequence[Path],
    verify_paths: Sequence[Path],
    profile: Mapping,
    config: Mapping,
    label: str,
    out: Path,
    out_samples: Path,
    work: Path,
) -> dict[str, Any]:
    runner, what = stage_client(config, profile, "compare")
    if runner is None:
        doc, text = night.skipped("compare", what), ""
    else:
        verified = (merged_verify([read_yaml(p) for p in verify_paths]) or {}).get("libraries") or {}
        finals = {(n := Path(p).parent.name): night.apply_replacements(read_yaml_mirrored(p), verified.get(n))
                  for p in final_paths}  # fmt: skip
        decks = {Path(p).parent.name: read_library_yaml(p) for p in deck_paths}
        doc, samples = night.compare_night(
            runner, what, finals, decks, logic_paths, profile, config, label, work
        )
        text = samples.to_csv(index=False)
    write_yaml(out, doc)
    atomic_write_text(out_samples, text)
    log.info("compare: %s", doc.get("reason") or f"against {', '.join(doc['against'])}, {doc['numbers']}")
    return doc
