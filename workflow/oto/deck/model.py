"""The coverage deck: which libraries to tune, at which sizes with what weight, and what each size's floor is.

Every library keeps its unique sizes ([M, N, B, K], or 8 long with LDD, LDC, LDA, LDB when the file has
them), a weight per size (how much the size counts: 1 for every size of a shipped library; from a
workload's call counts, kept beside it as ``calls``, with config ``deck.source: tunableop | rocblas-log`` or
``deck.workload``: :mod:`oto.deck.sources`) and, where its
source ships Tensile kernels, its shipped solutions as canonical oto parameters and, parallel to the sizes,
the shipped ``[solution position, gflops]`` (null where nothing is shipped at a size): what the tuned kernels
must beat. The reference kernel of a size comes from the library's floor (:mod:`oto.deck.floors`): by default
the shipped solution, else another source's shipped library or a baseline kernel. :mod:`oto.deck.sources`
reads decks; the workflow keeps them as ``deck.yaml`` files (below).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.deck.floors import Floor, FloorError, MatchingFloor, floor_from_dict, own_floor
from oto.files import atomic_write_text, dumps_exact, read_yaml_mirrored, write_yaml, write_yaml_mirrored
from oto.gemm import PATTERNS, Library
from oto.tensile import legality
from oto.tensile.logic_reader import SIZE_MAX, size_problem
from oto.tensile.params import CandidateError, canonical

# What a library's figures are (the manifest stores these); deck.yaml adds its weights and, when the floor is
# not the library's own shipped kernels, the floor.
_LIBRARY_FIELDS = ("name", "family", "pattern", "problem_type", "logic", "solutions", "sizes", "shipped")


class DeckError(ValueError):
    """A deck file is malformed or a selection is invalid; the message names the file or the codes."""


def check_sizes(sizes: list, where: str) -> None:
    """Every size is [M, N, B, K] (or 8 long with LDD, LDC, LDA, LDB) of integers in [1, 2^31 - 1]: a zero
    or negative size fails here, naming the file and the size, not at finalize after a night of tuning."""
    for i, s in enumerate(sizes):
        if type(s) is list and len(s) in (4, 8) and all(type(v) is int and 1 <= v <= SIZE_MAX for v in s):
            continue  # a well-formed size (a navi31 manifest holds 48,106): nothing more to check
        if not (
            isinstance(s, list | tuple)
            and len(s) in (4, 8)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in s)
        ):
            raise DeckError(f"{where}: sizes[{i}] = {s!r:.80} is not [M, N, B, K] of integers")
        why = size_problem(s)
        if why:
            raise DeckError(f"{where}: sizes[{i}] {list(s)}: {why}")


# final.yaml's per-size field for the GFLOPS the source recorded for its shipped solution (the arch they were
# measured on is stated once, in shipped_gflops_arch); files written before it was arch-neutral name it after
# the arch of the only deck there was.
SHIPPED_GFLOPS = "shipped_gflops"
OLD_SHIPPED_GFLOPS = {"shipped_gflops_gfx900": "gfx900"}


def current_final(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A final.yaml document with today's field names: rows of older files get ``shipped_gflops`` and the
    document ``shipped_gflops_arch`` from the name their figure had (``shipped_gflops_gfx900``)."""
    out = dict(doc)
    rows = []
    for row in doc.get("per_size") or []:
        old = next((k for k in OLD_SHIPPED_GFLOPS if isinstance(row, Mapping) and k in row), None)
        if old is None:
            rows.append(row)
            continue
        rows.append({(SHIPPED_GFLOPS if k == old else k): v for k, v in row.items()})
        out.setdefault("shipped_gflops_arch", OLD_SHIPPED_GFLOPS[old])
    if "per_size" in doc:
        out["per_size"] = rows
    return out


@dataclass
class LibraryDeck:
    name: str
    family: str
    pattern: str
    problem_type: dict
    # minimum_required_version, key_length, schedule, architecture, device_names, index_order, distance,
    # perf_metric, exact_rows (rows before dedup) and defaulted_params (knobs the source did not record)
    logic: dict
    solutions: list[dict]  # {index, name, params}; empty for a source that ships no Tensile kernels
    sizes: list[list[int]]
    shipped: list[list | None]  # [solution position, gflops] or None, parallel to sizes
    weights: list[float] | None = None  # parallel to sizes; None: every size weighs 1
    # parallel to sizes: how often the workload calls each size (0: a footprint size it does not call); None:
    # no workload (config deck.source tunableop / rocblas-log, or deck.workload)
    calls: list[int] | None = None
    # the floor as deck.yaml carries it (oto.deck.floors); None: the library's own shipped kernels
    floor: dict | None = None
    # a second floor raced in finalize and reported beside the floor: upstream's native library for the GPU
    # (config deck.native_floor), as deck.yaml carries it; None: none
    native_floor: dict | None = None
    # what config deck.max_sizes kept of a library with more sizes (oto.deck.size_cap.cap_library: kept, of,
    # max_sizes...); None: every size of its source
    size_cap: dict | None = None
    # the shipped rows config deck.max_sizes dropped, with those it kept ({sizes, shipped}: the own floor's
    # Matching table is the whole shipped file's, as the spoof library holds it); None: nothing dropped
    floor_rows: dict | None = None
    # the floor object of ``floor``, rebuilt when ``floor`` is replaced (emit asks once per reference kernel)
    _floor_cache: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.weights is None:
            self.weights = [1.0] * len(self.sizes)

    def figures(self) -> dict[str, Any]:
        """What the library is, without weights and floor (the manifest's entry)."""
        return {k: getattr(self, k) for k in _LIBRARY_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        out = {**self.figures(), "weights": self.weights}
        if self.calls is not None:
            out["calls"] = self.calls
        if self.floor is not None:
            out["floor"] = self.floor
        if self.native_floor is not None:
            out["native_floor"] = self.native_floor
        if self.size_cap is not None:
            out["size_cap"] = self.size_cap
        if self.floor_rows is not None:
            out["floor_rows"] = self.floor_rows
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str, checked: bool = True) -> LibraryDeck:
        """The library of a manifest entry or deck.yaml. ``checked`` False skips the per-size and per-kernel
        checks and leaves the kernels as stored: a library read for its name and counts only (a deck job
        reads the one library it tunes of a manifest the plan has checked whole)."""
        if not isinstance(data, Mapping):
            raise DeckError(f"{where}: library entry is {type(data).__name__}, expected a mapping")
        missing = [k for k in _LIBRARY_FIELDS if k not in data]
        if missing:
            raise DeckError(f"{where}: library {data.get('name', '?')} lacks {', '.join(missing)}")
        # weights and floor are absent from the manifest and from deck.yaml files written before them
        lib = cls(
            **{k: data[k] for k in _LIBRARY_FIELDS},
            weights=data.get("weights"),
            calls=data.get("calls"),
            floor=data.get("floor"),
            native_floor=data.get("native_floor"),
            size_cap=data.get("size_cap"),
            floor_rows=data.get("floor_rows"),
        )
        if lib.size_cap is not None and not isinstance(lib.size_cap, Mapping):
            raise DeckError(f"{where}: {lib.name}: field 'size_cap' is not a mapping")
        rows = lib.floor_rows
        if rows is not None and not (
            isinstance(rows, Mapping)
            and isinstance(rows.get("sizes"), list)
            and isinstance(rows.get("shipped"), list)
            and len(rows["sizes"]) == len(rows["shipped"])
        ):
            raise DeckError(f"{where}: {lib.name}: field 'floor_rows' is not {{sizes, shipped}}, one length")
        for key in ("solutions", "sizes", "shipped", "weights"):
            if not isinstance(getattr(lib, key), list):
                raise DeckError(f"{where}: {lib.name}: field '{key}' is not a list")
        for key in ("shipped", "weights"):
            if len(lib.sizes) != len(getattr(lib, key)):
                raise DeckError(
                    f"{where}: {lib.name}: {len(lib.sizes)} sizes but {len(getattr(lib, key))} {key} entries"
                )
        if not checked:
            return lib
        check_sizes(lib.sizes, f"{where}: {lib.name}")
        if lib.calls is not None:
            if not isinstance(lib.calls, list) or len(lib.calls) != len(lib.sizes):
                raise DeckError(f"{where}: {lib.name}: field 'calls' is not a list parallel to the sizes")
            for i, c in enumerate(lib.calls):
                if isinstance(c, bool) or not isinstance(c, int) or c < 0:
                    raise DeckError(f"{where}: {lib.name}: calls[{i}] = {c!r} is not a count (integer >= 0)")
        for i, w in enumerate(lib.weights):
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
                raise DeckError(f"{where}: {lib.name}: weights[{i}] = {w!r} is not a positive finite number")
        for pos, sol in enumerate(lib.solutions):
            try:  # JSON manifests store AssertStride*Equal's integer keys as strings
                sol["params"] = canonical(sol["params"])
            except (CandidateError, KeyError, TypeError) as exc:
                raise DeckError(f"{where}: {lib.name}: solutions[{pos}] params: {exc}") from None
        n = len(lib.solutions)
        for i, entry in enumerate(lib.shipped):
            if entry is None:
                continue  # nothing shipped at this size
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and isinstance(entry[0], int)
                and 0 <= entry[0] < n
            ):
                raise DeckError(
                    f"{where}: {lib.name}: shipped[{i}] = {entry!r} is not [position < {n}, gflops]"
                )
            gflops = entry[1]
            if isinstance(gflops, bool) or not isinstance(gflops, int | float) or not math.isfinite(gflops):
                raise DeckError(
                    f"{where}: {lib.name}: shipped[{i}]: GFLOPS {gflops!r} is not a finite number"
                )
        try:
            floor_from_dict(lib.floor, f"{where}: {lib.name}")
            native = lib.native_floor
            if native is not None and not isinstance(
                floor_from_dict(native, f"{where}: {lib.name}"), MatchingFloor
            ):
                raise FloorError(f"{where}: {lib.name}: field 'native_floor': not a shipped library's floor")
        except FloorError as exc:
            raise DeckError(str(exc).replace("field 'floor'", "field 'native_floor'", 1)) from None
        return lib

    def reference_params(self, size_index: int) -> dict[str, Any]:
        """The shipped solution the spoof runs at this deck size (the spoof floor, the reference kernel)."""
        return dict(self.solutions[int(self.shipped[size_index][0])]["params"])

    def reference_floor(self) -> Floor:
        """Where this library's reference kernels come from (oto.deck.floors)."""
        if self._floor_cache is None or self._floor_cache[0] is not self.floor:
            self._floor_cache = (self.floor, floor_from_dict(self.floor, self.name) or own_floor(self))
        return self._floor_cache[1]

    def native_references(
        self, indices: Sequence[int], limits: legality.Limits | None = None
    ) -> dict[int, dict[str, Any]]:
        """The native floor's kernel of each deck size in ``indices`` (as :meth:`references`); {} without
        a native floor."""
        if self.native_floor is None:
            return {}
        return floor_from_dict(self.native_floor, self.name).references(self, indices, limits)

    def references(
        self,
        indices: list[int],
        limits: legality.Limits | None = None,
        avoid: Mapping[str, str] | None = None,
    ) -> dict[int, dict[str, Any]]:
        """The floor's kernel of each deck size in ``indices``, as Tensile resolves it.

        ``{size_index: {id, params, position}}``, plus ``substitute`` when the floor's solution cannot be
        built (no form of it is legal for Tensile 4.44: see oto.deck.sources.reference_params): then the
        size is handed to the legal shipped solution of the nearest size (Euclidean in M, N, K, as Tensile's
        Matching table picks), and ``substitute`` says which and why; ``baseline`` when the floor is the
        baseline kernel; ``avoid`` ({kernel id: why}) names kernels this GPU must not run (quarantined),
        handed on as one that cannot be built. See :mod:`oto.deck.floors`."""
        return self.reference_floor().references(self, indices, limits, avoid)

    def shipped_gflops(self, size_index: int) -> float | None:
        """The GFLOPS the source recorded for its shipped solution at this size (None: nothing shipped)."""
        entry = self.shipped[size_index]
        return None if entry is None else float(entry[1])

    def shipped_arch(self) -> str | None:
        """The arch the shipped GFLOPS were measured on (the source's logic architecture)."""
        if not self.solutions:
            return None
        arch = self.logic.get("architecture")
        return (
            str(arch["Architecture"]) if isinstance(arch, Mapping) else (None if arch is None else str(arch))
        )

    def stats(self) -> dict[str, int]:
        return {
            "solutions": len(self.solutions),
            "sizes": len(self.sizes),
            "exact_rows": int(self.logic.get("exact_rows", len(self.sizes))),
        }


@dataclass
class Deck:
    source: dict  # kind (manifest | logic | rocblas), path, sha256 of the inputs
    arch_source: str
    libraries: dict[str, LibraryDeck] = field(default_factory=dict)
    # a workload's record (oto.deck.sources.workload_summary: its files, the calls covered, the uncovered
    # GEMMs with why); None: no workload
    workload: dict | None = None
    # what config deck.max_sizes kept over the libraries (oto.deck.size_cap.cap_summary); None: no cap
    size_cap: dict | None = None

    def __post_init__(self) -> None:
        self.libraries = dict(sorted(self.libraries.items()))

    def families(self) -> list[str]:
        return sorted({lib.family for lib in self.libraries.values()})

    def select(self, families: list[str] | str, patterns: list[str] | None = None) -> Deck:
        """The libraries of the given family codes (or ``'all'``) and transpose patterns (None: all)."""
        known = self.families()
        if families == "all":
            wanted = set(known)
        elif isinstance(families, str):
            raise DeckError(f"families must be a list of codes or 'all', got {families!r}")
        else:
            unknown = sorted(set(families) - set(known))
            if unknown:
                raise DeckError(
                    f"unknown family code(s) {', '.join(unknown)}; this deck has {', '.join(known)}"
                )
            wanted = set(families)
        if patterns is not None:
            bad = sorted(set(patterns) - set(PATTERNS))
            if bad:
                raise DeckError(f"unknown pattern(s) {', '.join(bad)}; patterns are {', '.join(PATTERNS)}")
        libs = {
            n: lib
            for n, lib in self.libraries.items()
            if lib.family in wanted and (patterns is None or lib.pattern in patterns)
        }
        if not libs:
            raise DeckError(f"no library matches families {families} and patterns {patterns}")
        return Deck(dict(self.source), self.arch_source, libs)

    def stats(self) -> dict[str, int]:
        """Counts as research/tensile.md §7 reports them (unique sizes are per library, then summed)."""
        per = [lib.stats() for lib in self.libraries.values()]
        return {
            "libraries": len(self.libraries),
            "family_codes": len(self.families()),
            "solutions": sum(p["solutions"] for p in per),
            "unique_sizes": sum(p["sizes"] for p in per),
            "exact_rows": sum(p["exact_rows"] for p in per),
        }


def write_deck_yaml(deck: Deck, path: str | Path, provenance: Mapping[str, Any]) -> None:
    """``results/<arch>/deck.yaml``: the selected libraries (counts only), the deck's stats and source."""
    libs = {
        n: {
            "family": lib.family,
            "pattern": lib.pattern,
            "key_length": lib.logic.get("key_length"),
            **lib.stats(),
            **({"size_cap": lib.size_cap} if lib.size_cap else {}),
        }
        for n, lib in deck.libraries.items()
    }
    write_yaml(
        path,
        {
            "provenance": dict(provenance),
            "source": deck.source,
            "arch_source": deck.arch_source,
            "stats": deck.stats(),
            "families": deck.families(),
            "libraries": libs,
            **({"workload": deck.workload} if deck.workload is not None else {}),
            **({"size_cap": deck.size_cap} if deck.size_cap is not None else {}),
        },
    )


def write_library_yaml(library_deck: LibraryDeck, path: str | Path, provenance: Mapping[str, Any]) -> None:
    """``results/<arch>/<library>/deck.yaml``: one library's full deck, sizes one flow list per line; with
    the JSON mirror its many readers parse instead (oto.files.write_yaml_mirrored: a cache, no contract)."""
    write_yaml_mirrored(path, {"provenance": dict(provenance), **library_deck.to_dict()})


# Beside each deck.yaml, the deck job's legality answers for the library's shipped kernels (its own, its
# floor's, its native floor's) under the run's limits: every later job that reads the deck starts its memo
# with them (oto.tensile.legality.seed_memo). A cache: missing, unreadable or of other rules, it is ignored.
LEGALITY_FILE = "legality.json"


def shipped_kernels(library_deck: LibraryDeck) -> list[dict[str, Any]]:
    """Every shipped kernel the library's jobs judge (its own, its floor's, its native floor's), in the
    canonical form a job that reads the deck.yaml passes to the rules."""
    solutions = list(library_deck.solutions)
    for floor in (library_deck.floor, library_deck.native_floor):
        if isinstance(floor, Mapping) and isinstance(floor.get("solutions"), list):
            solutions += floor["solutions"]
    out = []
    for sol in solutions:
        with contextlib.suppress(CandidateError, KeyError, TypeError):  # the deck's reader refuses it anyway
            out.append(canonical(sol["params"]))
    return out


def write_library_legality(library_deck: LibraryDeck, path: str | Path, limits: legality.Limits) -> int:
    """The deck job's legality answers (:data:`LEGALITY_FILE`) for the library's shipped kernels; how many."""
    table = legality.memo_table(Library.parse(library_deck.name), shipped_kernels(library_deck), limits)
    atomic_write_text(path, dumps_exact(table))
    return len(table["kernels"])


def read_library_yaml(path: str | Path) -> LibraryDeck:
    """A deck.yaml; its legality answers (:data:`LEGALITY_FILE` beside it) go in this process's memo before
    its next legality question."""
    legality.seed_memo_file(Path(path).with_name(LEGALITY_FILE))
    return LibraryDeck.from_dict(read_yaml_mirrored(path), str(path))
