"""The floor of a library: the reference kernel each deck size races against (every score is "reference
time / kernel time"), apart from which sizes are tuned.

Config ``deck.floor.source`` says where it comes from:

- ``deck`` (default): the deck source's own shipped kernels, the spoof floor: at each size the solution the
  shipped library runs there (what the GPU's owners get today);
- a deck source's name (``logic``, ``rocblas``, ``manifest``) with its ``path``: that source's shipped
  library of the same name, e.g. navi21's logic files for an RDNA2 APU: at each size the solution its Matching
  table would pick, the nearest shipped size by Tensile's distance (Euclidean in M, N, K);
- ``none``: no shipped kernel at all; each size races the library's baseline kernel
  (:mod:`oto.tensile.baseline`), labelled "floor: baseline — no shipped kernel" in final.yaml and the
  reports.

Under every floor a picked solution that Tensile cannot build (no form of it is legal for Tensile 4.44) hands
its size to the legal shipped solution of the nearest size (``substitute`` says which and why). A floor that
is not the deck's own travels in the library's deck.yaml (:meth:`Floor.to_dict`), so emit, finalize and the
logic stage read it as they read the deck.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from oto.gemm import Library
from oto.tensile import legality
from oto.tensile.baseline import LABEL as BASELINE_LABEL
from oto.tensile.baseline import baseline_kernel
from oto.tensile.params import CandidateError, candidate_id, canonical

if TYPE_CHECKING:
    from oto.deck.model import LibraryDeck

OWN, NONE = "deck", "none"  # deck.floor.source besides the deck sources' names
MATCHING_DISTANCES = ("Euclidean",)  # how a floor library finds the nearest shipped size


class FloorError(ValueError):
    """A floor that cannot serve a library; the message names the library, the floor and the field."""


class Floor(Protocol):
    source: str  # deck | a deck source's name | none

    def references(
        self,
        deck: LibraryDeck,
        indices: Sequence[int],
        limits: legality.Limits | None = None,
        avoid: Mapping[str, str] | None = None,
    ) -> dict[int, dict[str, Any]]:
        """``{size_index: {id, params, position}}`` for each deck size in ``indices`` (``substitute`` when the
        picked kernel cannot be built, or is one of ``avoid`` ({kernel id: why}: quarantined on this GPU),
        and a neighbour's stands in; id None when no kernel can)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What final.yaml and the reports say about this floor."""
        ...

    def note(self, deck: LibraryDeck) -> str:
        """Why a reference kernel is in a generation's candidates (candidates.yaml's rationale)."""
        ...

    def to_dict(self) -> dict[str, Any] | None:
        """The floor as the library's deck.yaml carries it (None: the deck's own kernels)."""
        ...


def _name(solutions: Sequence[Mapping], pos: int) -> str:
    return solutions[pos]["name"] or f"solution {pos}"


@dataclass
class MatchingFloor:
    """A shipped library's Matching table: its solutions and, per shipped size, the solution it runs there.

    ``where`` says whose library it is: ``{"source": "deck"}`` for the deck's own, else the source, its path,
    the arch it was shipped for and the library it came from."""

    solutions: list[dict]
    sizes: list[list[int]]
    shipped: list[list | None]
    where: dict[str, Any] = field(default_factory=lambda: {"source": OWN})

    @property
    def source(self) -> str:
        return str(self.where["source"])

    def references(
        self,
        deck: LibraryDeck,
        indices: Sequence[int],
        limits: legality.Limits | None = None,
        avoid: Mapping[str, str] | None = None,
    ) -> dict[int, dict[str, Any]]:
        library = Library.parse(deck.name)
        verdicts: dict[int, legality.Verdict] = {}
        resolved: dict[int, dict[str, Any]] = {}
        avoid = avoid or {}
        rows = [j for j, s in enumerate(self.shipped) if s is not None]
        if not rows and indices:
            raise FloorError(f"{deck.name}: its floor ({self.source}) has no shipped row to serve a size")
        exact: dict[tuple[int, ...], int] = {}
        for j in rows:
            exact.setdefault(tuple(self.sizes[j][:4]), j)

        def verdict(pos: int) -> legality.Verdict:
            """Whether the solution at ``pos`` can stand as the floor: built by Tensile, and not a kernel this
            GPU must never run again (a quarantined one is no yardstick: it took the GPU down)."""
            if pos not in verdicts:
                verdicts[pos] = legality.check(library, self.solutions[pos]["params"], limits)
                if verdicts[pos].valid and avoid:
                    resolved[pos] = legality.resolve(library, self.solutions[pos]["params"], limits)
                    if why := avoid.get(candidate_id(resolved[pos])):
                        verdicts[pos] = legality.Verdict(False, (f"quarantined on this GPU: {why}",), {})
            return verdicts[pos]

        def nearest(size: Sequence[int]) -> list[int]:
            """Shipped rows by Tensile's Euclidean distance in (M, N, K), then row order."""
            m, n, _, k = size[:4]
            return sorted(
                rows,
                key=lambda j: ((self.sizes[j][0] - m) ** 2 + (self.sizes[j][1] - n) ** 2
                               + (self.sizes[j][3] - k) ** 2, j),
            )  # fmt: skip

        out: dict[int, dict[str, Any]] = {}
        for i in indices:
            size = deck.sizes[i]
            row = exact.get(tuple(size[:4]))
            order = None if row is not None else nearest(size)
            picked = int(self.shipped[row if row is not None else order[0]][0])
            pos, note = picked, None
            if not verdict(picked).valid:
                order = order or nearest(size)
                legal = (int(self.shipped[j][0]) for j in order if verdict(int(self.shipped[j][0])).valid)
                pos = next(legal, None)
                note = {
                    "shipped": _name(self.solutions, picked),
                    "reason": "; ".join(verdict(picked).reasons),
                    "used": None if pos is None else _name(self.solutions, pos),
                }
                if pos is None:
                    out[i] = {"id": None, "params": None, "position": None, "substitute": note}
                    continue
            if pos not in resolved:
                resolved[pos] = legality.resolve(library, self.solutions[pos]["params"], limits)
            params = resolved[pos]
            out[i] = {"id": candidate_id(params), "params": dict(params), "position": pos}
            if note:
                out[i]["substitute"] = note
        return out

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in self.where.items() if k != "sha256"}

    def note(self, deck: LibraryDeck) -> str:
        if self.source == OWN:
            return f"spoof floor: shipped {deck.shipped_arch()} solution for this size"
        return (
            f"floor: the shipped {self.where.get('arch')} solution its Matching table picks for this size "
            f"({self.source} {self.where.get('path')})"
        )

    def to_dict(self) -> dict[str, Any] | None:
        if self.source == OWN:
            return None
        return {**self.where, "solutions": self.solutions, "sizes": self.sizes, "shipped": self.shipped}


@dataclass
class BaselineFloor:
    """No shipped kernel: every size races the library's baseline kernel (oto.tensile.baseline)."""

    source: str = NONE

    def references(
        self,
        deck: LibraryDeck,
        indices: Sequence[int],
        limits: legality.Limits | None = None,
        avoid: Mapping[str, str] | None = None,
    ) -> dict[int, dict[str, Any]]:
        params = baseline_kernel(Library.parse(deck.name), limits)
        kid = candidate_id(params)
        if why := (avoid or {}).get(kid):  # no other kernel to stand in
            note = {"shipped": BASELINE_LABEL, "reason": f"quarantined on this GPU: {why}", "used": None}
            return {i: {"id": None, "params": None, "position": None, "substitute": note} for i in indices}
        return {i: {"id": kid, "params": dict(params), "position": None, "baseline": True} for i in indices}

    def describe(self) -> dict[str, Any]:
        return {"source": NONE, "kernel": "baseline", "label": BASELINE_LABEL}

    def note(self, deck: LibraryDeck) -> str:
        return f"floor: {BASELINE_LABEL} (oto.tensile.baseline)"

    def to_dict(self) -> dict[str, Any] | None:
        return {"source": NONE}


def own_floor(deck: LibraryDeck) -> MatchingFloor:
    """The deck's own shipped kernels (the spoof floor): every shipped row of its file, those config
    deck.max_sizes dropped included (``floor_rows``)."""
    if deck.floor_rows is not None:
        return MatchingFloor(deck.solutions, list(deck.floor_rows["sizes"]), list(deck.floor_rows["shipped"]))
    return MatchingFloor(deck.solutions, deck.sizes, deck.shipped)


def foreign_floor(shipped: LibraryDeck, where: Mapping[str, Any]) -> MatchingFloor:
    """The Matching table of ``shipped`` (another source's library of the same name) as a floor."""
    distance = str(shipped.logic.get("distance") or "Euclidean")
    if distance not in MATCHING_DISTANCES:
        raise FloorError(
            f"{shipped.name} of floor {where.get('path')}: its Matching distance {distance!r} is not one oto "
            f"matches by ({', '.join(MATCHING_DISTANCES)})"
        )
    if not shipped.solutions or all(s is None for s in shipped.shipped):
        raise FloorError(f"{shipped.name} of floor {where.get('path')}: no shipped kernel to be the floor")
    return MatchingFloor(list(shipped.solutions), list(shipped.sizes), list(shipped.shipped), dict(where))


def floor_from_dict(data: Any, where: str) -> Floor | None:
    """The floor a deck.yaml carries (None: the deck's own kernels)."""
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("source"), str):
        raise FloorError(f"{where}: field 'floor': not a mapping with a source")
    if data["source"] == NONE:
        return BaselineFloor()
    if data["source"] == OWN:
        raise FloorError(f"{where}: field 'floor': the deck's own kernels are written as no floor field")
    missing = [k for k in ("solutions", "sizes", "shipped") if not isinstance(data.get(k), list)]
    if missing:
        raise FloorError(f"{where}: field 'floor': lacks the list(s) {', '.join(missing)}")
    floor = MatchingFloor(
        list(data["solutions"]),
        list(data["sizes"]),
        list(data["shipped"]),
        {k: v for k, v in data.items() if k not in ("solutions", "sizes", "shipped")},
    )
    _check_table(floor, f"{where}: field 'floor'")
    return floor


def _check_table(floor: MatchingFloor, where: str) -> None:
    if len(floor.sizes) != len(floor.shipped):
        raise FloorError(f"{where}: {len(floor.sizes)} sizes but {len(floor.shipped)} shipped entries")
    for pos, sol in enumerate(floor.solutions):
        try:
            sol["params"] = canonical(sol["params"])
        except (CandidateError, KeyError, TypeError) as exc:
            raise FloorError(f"{where}: solutions[{pos}] params: {exc}") from None
    n = len(floor.solutions)
    for i, entry in enumerate(floor.shipped):
        if entry is not None and not (
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) and 0 <= entry[0] < n
        ):
            raise FloorError(f"{where}: shipped[{i}] = {entry!r} is not [position < {n}, gflops]")
