"""compile: build every kernel of the generation through the backend; failures are recorded as data."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from oto.backends import job_stream, resolve
from oto.backends.base import Kernel, Problem
from oto.deck.model import read_library_yaml
from oto.files import read_yaml_mirrored, write_yaml
from oto.stages import BACKEND_FIELDS, Stage

STAGE = Stage(
    name="compile",
    scope="generation",
    home="{library}/gen{gen}",
    reads=("deck", "emit"),
    profile=("arch", BACKEND_FIELDS),
)
log = logging.getLogger(__name__)


def run(
    candidates_path: Path, deck_path: Path, profile: Mapping, config: Mapping, workdir: Path, out_build: Path
) -> dict:
    cands = read_yaml_mirrored(candidates_path)
    deck = read_library_yaml(deck_path)
    backend = resolve(config, profile, job_stream(deck.name, f"gen{cands['generation']}"))
    kernels = [Kernel(k["id"], k["params"]) for k in cands.get("kernels", [])]
    results = backend.build(Problem.of(deck, profile), kernels, Path(workdir)) if kernels else []
    doc = {
        "library": deck.name,
        "generation": cands["generation"],
        "frozen": cands.get("frozen", False),
        "provenance": backend.provenance(),
        "kernels": [
            {"id": r.kernel_id, "status": r.status, "reason": r.reason, "resources": dict(r.resources)}
            for r in results
        ],
    }
    write_yaml(out_build, doc)
    log.info("%s gen%s: built %s", deck.name, cands["generation"], dict(Counter(r.status for r in results)))
    return doc
