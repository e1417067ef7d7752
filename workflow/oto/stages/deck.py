"""deck: the shipped gfx900 library (manifest, logic folder or rocBLAS install) → the coverage deck."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from oto import deck as deckmod

log = logging.getLogger(__name__)


def load(kind: str, source: str | Path) -> deckmod.Deck:
    if kind == "manifest":
        return deckmod.read_manifest(Path(source))
    return deckmod.load_deck(kind, Path(source))


def run(
    kind: str,
    source: str | Path,
    libraries: Sequence[str],
    out_deck: str | Path,
    out_slices: Sequence[str | Path],
) -> deckmod.Deck:
    full = load(kind, source)
    missing = sorted(set(libraries) - set(full.libraries))
    if missing:
        raise ValueError(f"{source}: the deck has no library {', '.join(missing)}")
    selected = deckmod.Deck(
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
    deckmod.write_deck_yaml(selected, out_deck, provenance)
    by_name = {Path(p).parent.name: Path(p) for p in out_slices}
    for name, lib in selected.libraries.items():
        deckmod.write_library_yaml(lib, by_name[name], provenance)
    log.info("deck from %s %s: %s", kind, source, selected.stats())
    return selected
