"""A Tensile-style fork lattice of one library: the coarse grid of tile and schedule knobs that Tensile's own
tuning forks over (ForkParameters, every combination benchmarked), kept to what oto's legality rules accept.

A search strategy moves from kernel to kernel; on a plateau its next kernels are neighbours of the ones it
has, and a kernel several knobs away (another macro tile, depth and split) is never proposed. The lattice
is the other way to spend GPU time: every point of a small grid, measured once. Config ``budget.sweep``
spends a budget's spare time on it for the libraries with a gap to gain on (oto.measurement.budget).

The grid: ThreadTile {2,4,8}², WorkGroup {8,16,32}² × LocalSplitU {1,2}, DepthU {8,16,32},
PrefetchGlobalRead {1,2}, VectorWidth {2,4,8} (1 for 16-byte elements, ≤ 2 for 8-byte ones, at most 16
bytes a load), GlobalSplitU {1,4}; the other knobs at oto's defaults, LdsPad resolved by Tensile (-1). Its
points are VALU kernels: on an ISA whose libraries need matrix instructions, the legal ones are what is left.
"""

from __future__ import annotations

import itertools
from typing import Any

from oto.gemm import Library
from oto.tensile import legality
from oto.tensile.params import PARAMS, canonical

THREAD_TILE_SIDES = {2, 4, 8}
WORKGROUP_SIDES = (8, 16, 32)
DEPTH_U = (8, 16, 32)
PREFETCH_GLOBAL_READ = (1, 2)
GLOBAL_SPLIT_U = (1, 4)
SWEEP_PROPOSER = "sweep"  # a lattice point's proposer in candidates.yaml: the generation sweeps


def fork_lattice(library: Library, limits: legality.Limits) -> list[dict[str, Any]]:
    """The lattice's points legal for ``library`` under ``limits``, canonical, in a fixed order (the grid's
    product order: ThreadTile, WorkGroup, DepthU, PrefetchGlobalRead, VectorWidth, GlobalSplitU)."""
    thread_tiles = [t for t in PARAMS["ThreadTile"].values if set(t) <= THREAD_TILE_SIDES]
    workgroups = [
        w
        for w in PARAMS["WorkGroup"].values
        if w[0] in WORKGROUP_SIDES and w[1] in WORKGROUP_SIDES and w[2] <= 2
    ]
    element = library.family.a.bytes
    widths = (1,) if element >= 16 else (2, 4, 8)
    out = []
    grid = itertools.product(thread_tiles, workgroups, DEPTH_U, PREFETCH_GLOBAL_READ, widths, GLOBAL_SPLIT_U)
    for tt, wg, du, pgr, vw, gsu in grid:
        if vw * element > 16 or (element > 4 and vw > 2):
            continue
        params = canonical(
            {"ThreadTile": tt, "WorkGroup": wg, "DepthU": du, "PrefetchGlobalRead": pgr, "VectorWidth": vw,
             "GlobalSplitU": gsu, "LdsPadA": -1, "LdsPadB": -1}
        )  # fmt: skip
        if legality.check(library, params, limits).valid:
            out.append(params)
    return out
