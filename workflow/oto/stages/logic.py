"""logic: one library's final winners → a logic file in rocBLAS's format, named like the shipped ones.
A kernel verify took out (rocBLAS's own client found it wrong) is replaced as verify decided
(:func:`oto.rocblas.decisions.apply_replacements`). Every winner is checked first; one that cannot be written
hands its sizes to the next best (the file's header comment records it)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.deck.model import read_library_yaml
from oto.files import read_yaml, read_yaml_mirrored
from oto.hardware.simulated.checks import final_model_check
from oto.rocblas.decisions import apply_replacements
from oto.rocblas.verify import log_replacements
from oto.stages import Stage
from oto.tensile.labels import LABEL_FIELDS
from oto.tensile.legality import Limits
from oto.tensile.logic_writer import write_library_logic
from oto.tensile.provenance import logic_record, write_record

STAGE = Stage(
    name="logic",
    scope="library",
    home="logic",
    reads=("deck", "finalize", "verify"),
    profile=(*LABEL_FIELDS, *Limits.PROFILE_FIELDS),  # the file's name and header; each winner re-checked
)
log = logging.getLogger(__name__)


def run(
    final_path: Path,
    deck_path: Path,
    profile: Mapping,
    label: str,
    out: Path,
    out_provenance: Path | None = None,
    verify_path: Path | None = None,
) -> Path:
    final = read_yaml_mirrored(final_path)
    deck = read_library_yaml(deck_path)
    if verify_path is not None:
        verified = ((read_yaml(verify_path) or {}).get("libraries") or {}).get(deck.name)
        final = apply_replacements(final, verified)
        log_replacements(log, deck.name, (verified or {}).get("replacements") or {})
    check = final_model_check(final, profile["arch"])
    solutions, rows, notes = write_library_logic(
        final, deck, profile, label, out, source=str(final_path), model_check=check
    )
    for note in notes:
        log.warning("%s: %s", deck.name, note)
    if out_provenance is not None:
        write_record(logic_record(final, Path(out), label, check), out_provenance)
    log.info("%s: %d solutions, %d exact rows → %s", deck.name, solutions, rows, out)
    return Path(out)
