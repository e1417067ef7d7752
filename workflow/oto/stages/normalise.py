"""normalise: samples → drift-normalised scores per (kernel, size) with bootstrap confidence intervals.

scores.csv also says how racing ended at each size (``race``: separated | tie | budget | fixed | no_valid)
and which kernels were still contenders (``contender``); the decision is recomputed from the samples with
the same function the benchmark's race used, so it matches the race's last round."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.config import config_block
from oto.files import atomic_write_text, read_yaml_mirrored
from oto.gemm import Library
from oto.hardware.ceilings import PEAK_FIELDS
from oto.measurement.racing import BUDGET, FIXED, annotate_scores
from oto.measurement.samples import read_samples
from oto.measurement.scoring import ImplausibleReference, measurement_summary, score_library
from oto.stages import Stage

# Scoring reads the family's peak, whose fields include the nominal clock.
STAGE = Stage(
    name="normalise",
    scope="generation",
    home="{library}/gen{gen}",
    reads=("benchmark", "emit"),
    profile=PEAK_FIELDS,
)
log = logging.getLogger(__name__)


def run(samples_path: Path, candidates_path: Path, profile: Mapping, config: Mapping, out_scores: Path):
    cands = read_yaml_mirrored(candidates_path)
    library = Library.parse(cands["library"])
    samples = read_samples(samples_path)
    try:
        scores = score_library(samples, library, cands.get("sizes", []), profile, config)
    except ImplausibleReference as exc:
        raise ImplausibleReference(f"{samples_path}: {exc}") from None
    racing = config_block(config, "benchmark")["racing"]["enabled"]
    scores = annotate_scores(scores, float(config["benchmark"]["tie_tolerance"]), BUDGET if racing else FIXED)
    atomic_write_text(out_scores, scores.to_csv(index=False))
    stops = scores.drop_duplicates("size_index")["race"].value_counts().to_dict() if len(scores) else {}
    how = measurement_summary(samples, float(profile["clock_mhz"]))
    log.info(
        "%s gen%s: launch order %s, clock telemetry %s; drift estimator %s (%s)%s",
        library.name, cands["generation"], how["launch_order"], how["clock_telemetry"], how["drift"],
        how["drift_reason"], f"; telemetry notes: {how['telemetry_notes']}" if how["telemetry_notes"] else "",
    )  # fmt: skip
    log.info(
        "%s gen%s: %d scores from %d samples (%d failed, %d bad timings excluded); sizes stopped: %s",
        library.name, cands["generation"], len(scores), len(samples), int((samples["status"] != "ok").sum()),
        int(scores["excluded"].sum()) if len(scores) else 0, stops,
    )  # fmt: skip
    return scores
