"""The baseline kernel: what a size races against when no shipped kernel is its floor (config
``deck.floor: {source: none}``), so that every score stays "reference time / kernel time".

One conservative, legal configuration per problem type, chosen deterministically: the first entry of
:func:`ladder` that the legality checker accepts for the library on the arch profile's limits. The ladder
starts from Tensile's defaults for a VALU GEMM (oto.tensile.params.PARAMS: a 64 x 64 macro tile of 4 x 4
thread tiles on 16 x 16 threads, DepthU 16, VectorWidth 4, no split, prefetching on) and backs off one step
at a time: narrower vectors (a double or complex element allows fewer per 16-byte load), a shallower
unroll, a smaller tile, then HIP source instead of assembly. It is never tuned and never the fastest on
purpose: a score against it says how much faster than an ordinary kernel the tuned one is, and the reports
say "floor: baseline — no shipped kernel".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from oto.gemm import Library
from oto.tensile import legality
from oto.tensile.params import PARAMS, canonical

LABEL = "baseline — no shipped kernel"  # how final.yaml and the reports name this floor


def ladder() -> Iterator[dict[str, Any]]:
    """The baseline's candidates, most conservative-but-reasonable first."""
    defaults = {name: p.default for name, p in PARAMS.items()}
    for language in ("Assembly", "Source"):
        for tile, group in (((4, 4), (16, 16, 1)), ((2, 2), (16, 16, 1)), ((4, 4), (8, 8, 1))):
            for depth_u in (16, 8):
                for width in (4, 2, 1):
                    yield {
                        **defaults,
                        "KernelLanguage": language,
                        "ThreadTile": list(tile),
                        "WorkGroup": list(group),
                        "DepthU": depth_u,
                        "VectorWidth": width,
                    }


def baseline_kernel(library: Library, limits: legality.Limits | None = None) -> dict[str, Any]:
    """The baseline kernel of ``library`` as Tensile resolves it. Raises ValueError when no entry of the
    ladder is legal (a problem type or ISA the ladder does not cover), naming the library."""
    for params in ladder():
        if legality.check(library, params, limits).valid:
            return legality.resolve(library, canonical(params), limits)
    raise ValueError(
        f"{library.name}: no baseline kernel is legal on this arch (oto.tensile.baseline.ladder)"
    )
