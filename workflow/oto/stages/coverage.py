"""coverage: every library's deck slice → results/<arch>/deck.yaml, the libraries the deliverables cover (this
run's and those earlier runs finished in the folder), counted, with the deck's stats and source."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from oto.deck.model import Deck, read_library_yaml, write_deck_yaml
from oto.deck.size_cap import cap_summary
from oto.deck.sources import workload_coverage
from oto.files import read_yaml
from oto.stages import Stage

STAGE = Stage(name="coverage", scope="run", home="", reads=("deck",))  # results/<arch>/deck.yaml
log = logging.getLogger(__name__)


def run(slice_paths: Sequence[str | Path], current: str | Path, settings: Mapping, out: str | Path) -> Deck:
    """``current``: a slice of this run's deck, whose source and stats the file names; ``settings``: the
    plan's deck settings (a workload's record covers the delivered libraries: nothing dropped silently)."""
    provenance = (read_yaml(current) or {}).get("provenance") or {}
    libs = {lib.name: lib for lib in map(read_library_yaml, sorted(map(str, slice_paths)))}
    deck = Deck(dict(provenance.get("deck_source") or {}), provenance.get("deck_of"), libs)
    deck.workload = workload_coverage(settings, deck)
    deck.size_cap = cap_summary(libs, settings.get("max_sizes"))  # capped slices of earlier nights count too
    if deck.size_cap is not None:
        log.info("size cap: %s", deck.size_cap["text"])
    if deck.workload is not None:
        w = deck.workload
        log.info("workload: %d calls covered, %d uncovered", w["calls_covered"], w["calls_uncovered"])
        for u in w["uncovered"]:
            log.warning("uncovered: %s: %s (%d calls): %s", u["where"], u["gemm"], u["calls"], u["reason"])
    write_deck_yaml(deck, out, provenance)
    log.info("coverage: %d libraries: %s", len(libs), deck.stats())
    return deck
