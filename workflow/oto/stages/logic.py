"""logic: one library's final winners → a logic file in rocBLAS's format, named like the shipped ones.
Every winner is checked first; one that cannot be written hands its sizes to the next best (the file's
header comment records it)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from oto.deck.model import read_library_yaml
from oto.files import read_yaml
from oto.gemm import Library
from oto.tensile import legality
from oto.tensile.logic_writer import logic_label, plan_logic, solution_entry, write_logic_file

log = logging.getLogger(__name__)


def run(final_path: Path, deck_path: Path, profile: Mapping, label: str, out: Path) -> Path:
    final = read_yaml(final_path)
    deck = read_library_yaml(deck_path)
    if final["library"] != deck.name:
        raise ValueError(
            f"{final_path}: field 'library' is {final['library']!r}, the deck slice is {deck.name!r}"
        )
    library = Library.parse(deck.name)
    limits = legality.Limits.from_profile(profile)
    winners = {int(r["size_index"]) for r in final["per_size"] if r.get("winner")}
    plan = plan_logic(
        library,
        final["per_size"],
        final["kernels"],
        deck.sizes,
        deck.references(sorted(winners), limits),
        limits,
    )
    for note in plan.notes():
        log.warning("%s: %s", deck.name, note)
    solutions = [solution_entry(deck.problem_type, p, i) for i, p in enumerate(plan.solutions.values())]
    rows = plan.rows
    schedule, arch, devices = logic_label(profile, label)
    write_logic_file(
        out,
        problem_type=deck.problem_type,
        solutions=solutions,
        exact_rows=rows,
        schedule=schedule,
        architecture=arch,
        device_names=devices,
        notes=plan.notes(),
    )
    log.info("%s: %d solutions, %d exact rows → %s", deck.name, len(solutions), len(rows), out)
    return Path(out)
