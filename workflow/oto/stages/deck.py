"""deck: the configured deck source (manifest, logic folder, rocBLAS install...) → the coverage deck, each
selected library with its sizes, weights and floor."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.deck.model import Deck, write_deck_yaml, write_library_yaml
from oto.deck.sources import load_run_deck
from oto.stages import Stage

STAGE = Stage(name="deck", scope="run", home="")  # results/<arch>/deck.yaml and <library>/deck.yaml
log = logging.getLogger(__name__)


def run(
    settings: Mapping[str, Any],
    libraries: Sequence[str],
    out_deck: str | Path,
    out_slices: Sequence[str | Path],
) -> Deck:
    """``settings``: the plan's deck settings (oto.deck.sources.deck_settings)."""
    full, selected, floor = load_run_deck(settings, libraries)
    provenance = {
        "deck_source": dict(full.source),
        "deck_of": full.arch_source,
        "libraries_in_source": len(full.libraries),
        "stats_of_source": full.stats(),
    }
    if floor is not None:  # absent: the deck's own shipped kernels, as in files written before floors
        provenance["floor"] = floor
    if selected.workload is not None:  # nothing the workload calls is dropped silently
        w = selected.workload
        log.info(
            "workload: %d calls covered by %d libraries, %d calls uncovered",
            w["calls_covered"], len(w["calls_by_library"]), w["calls_uncovered"],
        )  # fmt: skip
        for u in w["uncovered"]:
            log.warning("uncovered: %s: %s (%d calls): %s", u["where"], u["gemm"], u["calls"], u["reason"])
    write_deck_yaml(selected, out_deck, provenance)
    by_name = {Path(p).parent.name: Path(p) for p in out_slices}
    for name, lib in selected.libraries.items():
        write_library_yaml(lib, by_name[name], provenance)
    log.info("deck from %s %s: %s", settings["source"], settings["path"], selected.stats())
    return selected
