"""deck: the configured deck source (manifest, logic folder, rocBLAS install...) → one library's coverage
deck, its sizes (config deck.max_sizes: a sample of them), weights and floor, and beside it the legality
answers for its shipped kernels under this arch's limits (every later job of the library starts from them:
oto.deck.model.LEGALITY_FILE). One job per library: a run selecting other libraries leaves it alone."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto.deck.model import LibraryDeck, write_library_legality, write_library_yaml
from oto.deck.size_cap import kept_text
from oto.deck.sources import load_run_deck
from oto.stages import Stage
from oto.tensile import legality

# results/<arch>/<library>/deck.yaml and legality.json
STAGE = Stage(name="deck", scope="library", home="{library}", profile=legality.Limits.PROFILE_FIELDS)
log = logging.getLogger(__name__)


def run(
    settings: Mapping[str, Any],
    library: str,
    out: str | Path,
    profile: Mapping[str, Any],
    out_legality: str | Path,
) -> LibraryDeck:
    """``settings``: the plan's deck settings (oto.deck.sources.deck_settings)."""
    full, selected, floor = load_run_deck(settings, [library])
    provenance = {
        "deck_source": dict(full.source),
        "deck_of": full.arch_source,
        "libraries_in_source": len(full.libraries),
        "stats_of_source": full.stats(),
    }
    if floor is not None:  # absent: the deck's own shipped kernels, as in files written before floors
        provenance["floor"] = floor
    lib = selected.libraries[library]
    write_library_yaml(lib, out, provenance)
    judged = write_library_legality(lib, out_legality, legality.Limits.from_profile(profile))
    log.info("%s: deck from %s %s: %s", library, settings["source"], settings["path"], lib.stats())
    log.info("%s: %d shipped kernels judged for this arch's later jobs (%s)", library, judged, out_legality)
    if lib.size_cap:  # a demo's sample, not the footprint: said wherever the deck is read
        cap = lib.size_cap
        log.info("%s: %s", library, kept_text(cap["kept"], cap["of"], [cap["max_sizes"]], cap["of_what"]))
        if cap.get("note"):
            log.warning("%s: deck.max_sizes %d: %s", library, cap["max_sizes"], cap["note"])
    return lib
