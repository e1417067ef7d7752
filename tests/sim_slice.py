"""A slice of one gfx90c library on the simulated GPU, small enough to race in seconds (finalize's tests)."""

from __future__ import annotations

from pathlib import Path

from oto.config import load_config
from oto.deck.sources import load_deck
from oto.hardware.profile import load_profile
from oto.tensile import legality

ROOT = Path(__file__).resolve().parents[1]


def gfx90c_slice(library: str, keep: slice):
    """(config on the sim backend, gfx90c's profile, ``library``'s manifest deck cut to ``keep``, limits)."""
    config = load_config(ROOT / "config" / "config.yaml")
    config["backend"] = "sim"
    profile = load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")
    lib = load_deck("manifest").libraries[library]
    lib.sizes, lib.shipped, lib.weights = lib.sizes[keep], lib.shipped[keep], lib.weights[keep]
    return config, profile, lib, legality.Limits.from_profile(profile)
