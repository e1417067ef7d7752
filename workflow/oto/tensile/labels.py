"""How a tuned library is labelled, and which stock library a GPU's owners run today: one place for both.

A profile's ``stock_library`` (arch_profiles/*.yaml) names the rocBLAS library its owners get from a stock
install: the arch whose logic files they run (gfx90c and gfx902 spoof gfx900; gfx900 and gfx906 run their
own), that library's logic-file prefix (``vega10``) and the ``HSA_OVERRIDE_GFX_VERSION`` that makes HIP
load it (``9.0.0``). The rocBLAS deck source reads that arch's library, and config ``package.label`` picks
what the deliverables claim to be:

- ``native``: the tuned arch itself (its own prefix, e.g. ``gfx90c_*.yaml``, architecture gfx90c);
- ``spoof``: the stock library's arch, a drop-in for stock rocBLAS under the override (``vega10_*.yaml``,
  architecture gfx900 for gfx90c);
- ``gfx900``: the older spelling of ``spoof``, kept for configs that use it; it is refused for a profile whose
  stock library is not gfx900's (the label would claim an arch the GPU does not run as).

The device names are the tuned GPU's own under every label: TensileCreateLibrary matches on the
architecture, and the names say which devices the kernels were tuned on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LABELS = ("native", "spoof", "gfx900")  # config package.label (its schema enum is tested against these)
# The arch-profile fields logic_label reads (oto.run.profile_views: the logic and package stages' views).
LABEL_FIELDS = ("arch", "tensile.logic_prefix", "tensile.device_names", "stock_library")


@dataclass(frozen=True)
class StockLibrary:
    """The rocBLAS library a GPU's owners run today (a profile's ``stock_library``)."""

    arch: str  # the arch whose shipped logic they run (gfx900 for gfx90c)
    logic_prefix: str  # that library's logic-file prefix and ScheduleName (vega10)
    hsa_override_gfx_version: str  # what makes HIP load it (9.0.0); the arch's own version when it is native

    @classmethod
    def of(cls, profile: Mapping[str, Any]) -> StockLibrary:
        stock = profile["stock_library"]
        return cls(str(stock["arch"]), str(stock["logic_prefix"]), str(stock["hsa_override_gfx_version"]))


@dataclass(frozen=True)
class LogicLabel:
    """What a labelled logic file and library claim: the file prefix (also the ScheduleName), the Tensile
    architecture (TensileCreateLibrary's ``--architecture``) and the device names."""

    prefix: str
    architecture: str
    device_names: tuple[str, ...]

    def __iter__(self):  # (prefix, architecture, device names), as the callers unpack it
        return iter((self.prefix, self.architecture, list(self.device_names)))


def logic_label(profile: Mapping[str, Any], label: str) -> LogicLabel:
    """The label ``label`` (config ``package.label``) of a library tuned for ``profile``'s GPU.

    Raises ValueError naming the field for an unknown label, or ``gfx900`` on a GPU that does not run
    gfx900's library."""
    devices = tuple(profile["tensile"]["device_names"])
    if label == "native":
        return LogicLabel(str(profile["tensile"]["logic_prefix"]), str(profile["arch"]), devices)
    if label not in LABELS:
        raise ValueError(f"field 'package.label': unknown label {label!r} (known: {', '.join(LABELS)})")
    stock = StockLibrary.of(profile)
    if label == "gfx900" and stock.arch != "gfx900":
        raise ValueError(
            f"field 'package.label': gfx900 labels a drop-in for gfx900's stock library, but "
            f"{profile['arch']}'s owners run {stock.arch}'s (profile field 'stock_library.arch'); use "
            "label spoof (or native)"
        )
    return LogicLabel(stock.logic_prefix, stock.arch, devices)
