"""logic: one library's final winners → a logic file in rocBLAS's format, named like the shipped ones."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.deck.model import read_library_yaml
from oto.files import read_yaml
from oto.tensile.logic_writer import logic_label, solution_entry, write_logic_file
from oto.tensile.provenance import logic_record, write_record

log = logging.getLogger(__name__)


def run(
    final_path: Path,
    deck_path: Path,
    profile: Mapping,
    label: str,
    out: Path,
    out_provenance: Path | None = None,
) -> Path:
    final = read_yaml(final_path)
    deck = read_library_yaml(deck_path)
    if final["library"] != deck.name:
        raise ValueError(
            f"{final_path}: field 'library' is {final['library']!r}, the deck slice is {deck.name!r}"
        )
    order: dict[str, int] = {}
    rows = []
    for r in final["per_size"]:
        if not r.get("winner"):
            continue  # no valid kernel at this size: Tensile falls back to the nearest size's solution
        index = order.setdefault(r["winner"], len(order))
        rows.append((list(deck.sizes[r["size_index"]]), index, float(r["gflops"])))
    solutions = [solution_entry(deck.problem_type, final["kernels"][kid], i) for kid, i in order.items()]
    schedule, arch, devices = logic_label(profile, label)
    write_logic_file(
        out,
        problem_type=deck.problem_type,
        solutions=solutions,
        exact_rows=rows,
        schedule=schedule,
        architecture=arch,
        device_names=devices,
    )
    if out_provenance is not None:
        write_record(logic_record(final, Path(out), label), out_provenance)
    log.info("%s: %d solutions, %d exact rows → %s", deck.name, len(solutions), len(rows), out)
    return Path(out)
