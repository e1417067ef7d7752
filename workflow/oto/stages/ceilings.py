"""ceilings: the arch profile → theoretical peaks per workload and the roofline parameters."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.files import write_yaml
from oto.hardware.ceilings import CEILING_FIELDS, ceilings_document
from oto.stages import Stage

STAGE = Stage(name="ceilings", scope="run", home="", profile=CEILING_FIELDS)
log = logging.getLogger(__name__)


def run(profile_path: str | Path, profile: Mapping, out: str | Path) -> dict:
    doc = ceilings_document(profile, str(profile_path))
    write_yaml(out, doc)
    log.info("%s: FP32 %.0f GFLOPS theoretical", profile["arch"], doc["theoretical"]["fp32"]["gflops"])
    return doc
