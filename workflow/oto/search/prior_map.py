"""Another GPU's kernels as priors of this GPU's space (``registry.warm_start``): each donor kernel goes to
its nearest legal point here, so a prior from an ISA with other instructions (RDNA2's VALU and dot kernels for
RDNA3, whose half and int8 spaces hold WMMA kernels) still tells the search where to start.

The rules come from the target's legality (:mod:`oto.tensile.legality`, through the space's ``valid``):

1. **Form.** Every knob of the target's space takes the donor kernel's value; a value the target's space
   lacks is snapped to its nearest legal value (log2 distance for numbers, component-wise for tuples); a knob
   the donor's kernel does not set takes its default (Tensile's).
2. **Instruction.** A kernel from an ISA without a matrix instruction for the library's types (``valu_only``)
   takes the target's matrix instruction when the target's space offers one (RDNA3's WMMA [16, 16, 16, 1] for
   half, bf16 and int8). The wave size follows the instruction (WMMA is wave32); a VALU kernel keeps its own.
3. **Geometry.** The thread tile and work-group are re-chosen among the target's values, under that
   instruction, to keep the donor's macro tile, thread count and work-group shape. Geometry distance:
   ``|log2 MT0'/MT0| + |log2 MT1'/MT1| + 0.5 |log2 NT'/NT| + 0.5 [LSU' != LSU]
   + 0.25 |log2 (WG0'/WG1') - log2 (WG0/WG1)|`` (the donor's own shape, when the target has it, first among
   equals).
4. **Repair.** Where the form is illegal at a geometry, the cheapest single knob move that makes it legal
   (DepthU costing its log2 ratio, any other knob 0.25); failing that, the other knobs restart from their
   defaults with the donor's DepthU (else the nearest legal one, each allowed one knob move), and the
   donor's values come back one knob at a time, in the space's order, wherever the kernel stays legal.

The **distance** of a mapped prior is its geometry distance + ``|log2 DepthU'/DepthU|`` + 0.25 for each other
knob whose value differs from the donor's (snapped ones included); the instruction and wave size of rule 2
count nothing; a mapped prior is at least 0.25 away (one knob), so that distance 0 means legal here as it is.
Geometries are tried in order of distance (at most :data:`GEOMETRIES_TRIED`), stopping once no
further one can be nearer than the best legal point found. A prior legal here as it is passes **unchanged**
(the same observation, distance 0).

**Dedupe:** priors come best first; two that land on one point (one kernel id of this space) keep the first,
and the other is counted as merged. A prior with no legal point within the geometries tried is counted as
unmapped, with why. Nothing is dropped without being counted (:class:`PriorTransfer`)."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from oto.search.space import Index, Space
from oto.search.strategies.base import Observation
from oto.tensile.params import macro_tile, num_threads

GEOMETRIES_TRIED = 24
KNOB_WEIGHT = 0.25  # distance of one knob whose value differs from the donor's
SHAPE_WEIGHT = 0.25  # per log2 step of the work-group's aspect WG0/WG1 away from the donor's
_GEOMETRY = ("ThreadTile", "WorkGroup")
_INSTRUCTION = ("MatrixInstruction", "WavefrontSize")


@dataclass
class PriorTransfer:
    """What the search gets of another GPU's priors, and what became of each of them."""

    priors: list[Observation] = field(default_factory=list)  # best first, one per point of this space
    as_is: int = 0  # legal here unchanged
    mapped: int = 0  # moved to their nearest legal point
    merged: int = 0  # landed on a point a better prior already holds
    unmapped: list[tuple[str, str]] = field(default_factory=list)  # (donor kernel id, why)
    distances: list[float] = field(default_factory=list)  # of the mapped ones

    @property
    def total(self) -> int:
        return self.as_is + self.mapped + self.merged + len(self.unmapped)

    def summary(self) -> str:
        """One line for a job's log."""
        dist = (
            f" (distance mean {statistics.mean(self.distances):.2f}, max {max(self.distances):.2f})"
            if self.distances
            else ""
        )
        why = f": {self.unmapped[0][1]}" if self.unmapped else ""
        return (
            f"{self.total} prior(s) from other GPUs: {self.as_is} legal here as they are, {self.mapped} "
            f"mapped to their nearest legal point{dist}, {self.merged} merged onto a point a better prior "
            f"holds, {len(self.unmapped)} with no legal point here{why}"
        )


def map_priors(priors: Sequence[Observation], space: Space, valu_only: Sequence[bool] = ()) -> PriorTransfer:
    """``priors`` (best first) as points of ``space``: each unchanged when legal here, else at its nearest
    legal point (module docstring); ``valu_only[i]``: prior i comes from an ISA with no matrix instruction for
    this library's types (it adopts the target's)."""
    out = PriorTransfer()
    held: set[str] = set()
    tensile = all(name in space.names for name in (*_GEOMETRY, "DepthU"))
    for i, prior in enumerate(priors):
        adopt = bool(valu_only[i]) if i < len(valu_only) else False
        found = _nearest(prior.params, space, adopt) if tensile else _as_given(prior.params, space)
        if isinstance(found, str):
            out.unmapped.append((prior.kernel_id, found))
            continue
        idx, distance = found
        key = space.key(idx)
        if key in held:
            out.merged += 1
            continue
        held.add(key)
        if distance is None:
            out.as_is += 1
            out.priors.append(prior)
            continue
        # a moved kernel is at least one knob away: the geometry terms leave the adopted instruction and the
        # vector widths out, and a distance of 0 would pass it off as legal here as it is (the surrogate
        # weighs priors with distance 0 as this GPU's own)
        distance = max(distance, KNOB_WEIGHT)
        out.mapped += 1
        out.distances.append(distance)
        where = f"mapped from {prior.kernel_id} to the nearest legal point here (distance {distance:.2f})"
        source = f"{prior.source}, {where}" if prior.source else where
        out.priors.append(
            replace(prior, kernel_id=key, params=space.config(idx), source=source, distance=distance)
        )
    return out


def _as_given(params: Mapping[str, Any], space: Space) -> tuple[Index, None] | str:
    idx = space.index(params)
    if idx is None or not space.valid(idx):
        return "not a legal point of this space, and the space has no Tensile geometry to map it by"
    return idx, None


def _default(space: Space, name: str) -> Any:
    value = space.parameter(name).default_value
    return list(value) if isinstance(value, tuple) else value


def _donor_values(params: Mapping[str, Any], space: Space) -> dict[str, Any]:
    """The donor kernel's value of every knob of ``space`` (its default where the kernel does not set it)."""
    out = {}
    for name in space.names:
        value = params.get(name, _default(space, name))
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _gap(a: Any, b: Any) -> float:
    """How far apart two values of one knob are: log2 ratio for positive numbers, else their difference;
    component-wise for tuples."""
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        a, b = tuple(a or ()), tuple(b or ())
        if len(a) != len(b):
            return math.inf
        return sum(_gap(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) or isinstance(b, str):
        return 0.0 if a == b else math.inf
    if a > 0 and b > 0:
        return abs(math.log2(a / b))
    return abs(a - b)


def _snap(space: Space, name: str, value: Any) -> Any:
    values = space.parameter(name).values
    want = tuple(value) if isinstance(value, list) else value
    if want in values:
        return value
    best = min(values, key=lambda v: _gap(v, want))  # ties: the earlier value
    if _gap(best, want) == math.inf:
        return _default(space, name)
    return list(best) if isinstance(best, tuple) else best


def _point(space: Space, config: Mapping[str, Any]) -> tuple[Index, dict[str, Any]] | None:
    """The legal point of a configuration (its completed form), or None."""
    idx = space.index(config)
    if idx is None or not space.valid(idx):
        return None
    return idx, space.config(idx)


def _nearest(params: Mapping[str, Any], space: Space, adopt: bool) -> tuple[Index, float | None] | str:
    donor = _donor_values(params, space)
    mi = "MatrixInstruction" in space.names
    instructions = [v for v in space.parameter("MatrixInstruction").values if v] if mi else []
    form = {name: _snap(space, name, value) for name, value in donor.items()}
    if adopt and instructions and not form.get("MatrixInstruction"):
        form["MatrixInstruction"] = list(instructions[0])
    if form == donor:
        exact = _point(space, form)
        if exact is not None and all(exact[1][name] == form[name] for name in space.names):
            return exact[0], None
    shape = {"ThreadTile": params.get("ThreadTile", donor["ThreadTile"])}
    shape["WorkGroup"] = list(params.get("WorkGroup", donor["WorkGroup"]))
    shape["WorkGroup"] += [1] * (3 - len(shape["WorkGroup"]))
    for key in ("MatrixInstruction", "WavefrontSize"):
        if params.get(key) is not None:
            shape[key] = params[key]
    mt0, mt1 = macro_tile(shape)
    wg = shape["WorkGroup"]
    want = (mt0, mt1, num_threads(shape), wg[2], math.log2(wg[0] / wg[1]))
    instruction = tuple(form.get("MatrixInstruction") or ())
    wave = 32 if instruction else form.get("WavefrontSize", 64)
    table = _geometries(space, instruction, wave)
    gaps = (
        np.abs(np.log2(table["mt0"] / want[0]))
        + np.abs(np.log2(table["mt1"] / want[1]))
        + 0.5 * np.abs(np.log2(table["nt"] / want[2]))
        + 0.5 * (table["lsu"] != want[3])
        + SHAPE_WEIGHT * np.abs(table["aspect"] - want[4])
    )
    own = np.array(
        [tt == tuple(form["ThreadTile"]) and wg == tuple(form["WorkGroup"]) for tt, wg in table["shapes"]]
    )
    order = np.lexsort((~own, gaps))
    best: tuple[float, Index] | None = None
    for j in order[:GEOMETRIES_TRIED]:
        g = float(gaps[j])
        if best is not None and g >= best[0]:
            break
        tt, wg = table["shapes"][j]
        at = {**form, "ThreadTile": list(tt), "WorkGroup": list(wg)}
        if "WavefrontSize" in form:
            at["WavefrontSize"] = wave
        # a repair costs at least one knob: past the best found, only the form itself can still be nearer
        repair = best is None or g + KNOB_WEIGHT < best[0]
        got = _at_geometry(space, at, form) if repair else _point(space, at)
        if got is None:
            continue
        idx, cfg = got
        d = g + _gap(cfg["DepthU"], donor["DepthU"])
        d += KNOB_WEIGHT * sum(
            1
            for name in space.names
            if name not in (*_GEOMETRY, *_INSTRUCTION, "DepthU") and cfg[name] != donor[name]
        )
        if best is None or d < best[0]:
            best = (d, idx)
    if best is None:
        what = "the target's matrix instruction" if instruction else "VALU"
        return (
            f"no legal kernel ({what}) at the {GEOMETRIES_TRIED} work-group shapes nearest to macro tile "
            f"{want[0]}x{want[1]} with {want[2]} threads"
        )
    return best[1], best[0]


def _at_geometry(
    space: Space, at: dict[str, Any], form: Mapping[str, Any]
) -> tuple[Index, dict[str, Any]] | None:
    """The legal kernel of one geometry nearest to the donor's knobs: the form itself, else the form with one
    knob moved (the cheapest such move), else a repair from the defaults."""
    got = _point(space, at)
    if got is not None:
        return got
    fixed = (*_GEOMETRY, *_INSTRUCTION)
    free = [name for name in space.names if name not in fixed]
    moved = _one_knob(space, at, free, form)
    if moved is not None:
        return moved
    base = {name: (at[name] if name in fixed else _default(space, name)) for name in space.names}
    cur = None
    for depth in sorted(space.parameter("DepthU").values, key=lambda v: _gap(v, form["DepthU"])):
        start = {**base, "DepthU": depth}
        cur = _point(space, start) or _one_knob(space, start, [n for n in free if n != "DepthU"], form)
        if cur is not None:
            break
    if cur is None:
        return None
    for name in (*(n for n in free if n != "DepthU"), "DepthU"):
        if cur[1][name] != form[name]:
            trial = _point(space, {**cur[1], name: form[name]})
            if trial is not None:
                cur = trial
    return cur


def _one_knob(
    space: Space, at: Mapping[str, Any], names: Sequence[str], form: Mapping[str, Any]
) -> tuple[Index, dict[str, Any]] | None:
    """The legal kernel one knob away from ``at`` that costs least by the distance (DepthU by its log2 ratio
    to the donor's, any other knob :data:`KNOB_WEIGHT`); per knob its value nearest the donor's is tried
    first."""
    best: tuple[float, tuple[Index, dict[str, Any]]] | None = None
    for name in names:
        values = sorted(space.parameter(name).values, key=lambda v, n=name: _gap(v, form[n]))
        for value in values:
            value = list(value) if isinstance(value, tuple) else value
            if value == at[name]:
                continue
            cost = _gap(value, form["DepthU"]) if name == "DepthU" else KNOB_WEIGHT
            if best is not None and cost >= best[0]:
                break
            got = _point(space, {**at, name: value})
            if got is not None:
                best = (cost, got)
                break
    return best[1] if best else None


@functools.lru_cache(maxsize=64)
def _geometry_table(thread_tiles: tuple, work_groups: tuple, instruction: tuple, wave: int) -> dict[str, Any]:
    shapes, mts = [], []
    for tt in thread_tiles:
        for wg in work_groups:
            shape = {"ThreadTile": tt, "WorkGroup": wg, "WavefrontSize": wave}
            if instruction:
                if tt[1] % instruction[0] or (wg[0] * wg[1]) % wave:
                    continue  # not a matrix-instruction geometry (legality's first checks)
                shape["MatrixInstruction"] = instruction
            elif max(tt) > 16 or (wg[0] * wg[1] * wg[2]) % wave:
                continue
            mt = macro_tile(shape)
            if mt[0] <= 0 or mt[1] <= 0:
                continue
            shapes.append((tt, wg))
            mts.append((*mt, wg[0] * wg[1] * wg[2], wg[2], math.log2(wg[0] / wg[1])))
    arr = np.asarray(mts, dtype=float).reshape(-1, 5)
    cols = ("mt0", "mt1", "nt", "lsu", "aspect")
    return {"shapes": shapes, **{name: arr[:, j] for j, name in enumerate(cols)}}


def _geometries(space: Space, instruction: tuple, wave: int) -> dict[str, Any]:
    return _geometry_table(
        tuple(space.parameter("ThreadTile").values),
        tuple(space.parameter("WorkGroup").values),
        instruction,
        int(wave),
    )
