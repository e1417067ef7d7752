"""deck: the shipped gfx900 library (manifest, logic folder or rocBLAS install) → the coverage deck."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from oto.deck.model import Deck, write_deck_yaml, write_library_yaml
from oto.deck.sources import load_deck
from oto.stages import Stage

STAGE = Stage(name="deck", scope="run", home="")  # results/<arch>/deck.yaml and <library>/deck.yaml
log = logging.getLogger(__name__)


def run(
    kind: str,
    source: str | Path,
    libraries: Sequence[str],
    out_deck: str | Path,
    out_slices: Sequence[str | Path],
) -> Deck:
    full = load_deck(kind, Path(source))
    missing = sorted(set(libraries) - set(full.libraries))
    if missing:
        raise ValueError(f"{source}: the deck has no library {', '.join(missing)}")
    selected = Deck(
        source=full.source,
        arch_source=full.arch_source,
        libraries={name: full.libraries[name] for name in sorted(libraries)},
    )
    provenance = {
        "deck_source": dict(full.source),
        "deck_of": full.arch_source,
        "libraries_in_source": len(full.libraries),
        "stats_of_source": full.stats(),
    }
    write_deck_yaml(selected, out_deck, provenance)
    by_name = {Path(p).parent.name: Path(p) for p in out_slices}
    for name, lib in selected.libraries.items():
        write_library_yaml(lib, by_name[name], provenance)
    log.info("deck from %s %s: %s", kind, source, selected.stats())
    return selected
