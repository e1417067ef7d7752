"""The coverage deck: which libraries rocBLAS ships for the reference GPU, at which sizes, with which kernels.

Every library keeps its shipped solutions as canonical oto parameters, its unique sizes ([M, N, B, K], or 8
long with LDD, LDC, LDA, LDB when the file has them) and, parallel to the sizes, the shipped ``[solution
position, gflops]``: what the tuned kernels must beat. :mod:`oto.deck.sources` reads decks; the workflow
keeps them as ``deck.yaml`` files (below).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.files import read_yaml, write_yaml
from oto.gemm import PATTERNS, Library
from oto.tensile import legality
from oto.tensile.logic_reader import size_problem
from oto.tensile.params import CandidateError, candidate_id, canonical

_LIBRARY_FIELDS = ("name", "family", "pattern", "problem_type", "logic", "solutions", "sizes", "shipped")


class DeckError(ValueError):
    """A deck file is malformed or a selection is invalid; the message names the file or the codes."""


def check_sizes(sizes: list, where: str) -> None:
    """Every size is [M, N, B, K] (or 8 long with LDD, LDC, LDA, LDB) of integers in [1, 2^31 - 1]: a zero
    or negative size fails here, naming the file and the size, not at finalize after a night of tuning."""
    for i, s in enumerate(sizes):
        if not (
            isinstance(s, list | tuple)
            and len(s) in (4, 8)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in s)
        ):
            raise DeckError(f"{where}: sizes[{i}] = {s!r:.80} is not [M, N, B, K] of integers")
        why = size_problem(s)
        if why:
            raise DeckError(f"{where}: sizes[{i}] {list(s)}: {why}")


@dataclass
class LibraryDeck:
    name: str
    family: str
    pattern: str
    problem_type: dict
    # minimum_required_version, key_length, schedule, architecture, device_names, index_order, distance,
    # perf_metric, exact_rows (rows before dedup) and defaulted_params (knobs the source did not record)
    logic: dict
    solutions: list[dict]  # {index, name, params}
    sizes: list[list[int]]
    shipped: list[list]  # [solution position, gflops], parallel to sizes

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _LIBRARY_FIELDS}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> LibraryDeck:
        if not isinstance(data, Mapping):
            raise DeckError(f"{where}: library entry is {type(data).__name__}, expected a mapping")
        missing = [k for k in _LIBRARY_FIELDS if k not in data]
        if missing:
            raise DeckError(f"{where}: library {data.get('name', '?')} lacks {', '.join(missing)}")
        lib = cls(**{k: data[k] for k in _LIBRARY_FIELDS})
        for key in ("solutions", "sizes", "shipped"):
            if not isinstance(getattr(lib, key), list):
                raise DeckError(f"{where}: {lib.name}: field '{key}' is not a list")
        if len(lib.sizes) != len(lib.shipped):
            raise DeckError(
                f"{where}: {lib.name}: {len(lib.sizes)} sizes but {len(lib.shipped)} shipped entries"
            )
        check_sizes(lib.sizes, f"{where}: {lib.name}")
        for pos, sol in enumerate(lib.solutions):
            try:  # JSON manifests store AssertStride*Equal's integer keys as strings
                sol["params"] = canonical(sol["params"])
            except (CandidateError, KeyError, TypeError) as exc:
                raise DeckError(f"{where}: {lib.name}: solutions[{pos}] params: {exc}") from None
        n = len(lib.solutions)
        for i, entry in enumerate(lib.shipped):
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
        return lib

    def reference_params(self, size_index: int) -> dict[str, Any]:
        """The shipped solution the spoof runs at this deck size (the spoof floor, the reference kernel)."""
        return dict(self.solutions[int(self.shipped[size_index][0])]["params"])

    def references(
        self, indices: list[int], limits: legality.Limits | None = None
    ) -> dict[int, dict[str, Any]]:
        """The spoof-floor kernel of each deck size in ``indices``, as Tensile resolves it.

        ``{size_index: {id, params, position}}``, plus ``substitute`` when the shipped solution cannot be
        built (no form of it is legal for Tensile 4.44: see oto.deck.sources.reference_params): then the
        size is handed to the legal shipped solution of the nearest deck size (Euclidean in M, N, K, as
        Tensile's Matching table picks), and ``substitute`` says which and why."""
        library = Library.parse(self.name)
        verdicts: dict[int, legality.Verdict] = {}
        resolved: dict[int, dict[str, Any]] = {}

        def verdict(pos: int) -> legality.Verdict:
            if pos not in verdicts:
                verdicts[pos] = legality.check(library, self.solutions[pos]["params"], limits)
            return verdicts[pos]

        out = {}
        for i in indices:
            shipped = int(self.shipped[i][0])
            pos, note = shipped, None
            if not verdict(shipped).valid:
                m, n, _, k = self.sizes[i][:4]
                order = sorted(
                    range(len(self.sizes)),
                    key=lambda j: ((self.sizes[j][0] - m) ** 2 + (self.sizes[j][1] - n) ** 2
                                   + (self.sizes[j][3] - k) ** 2, j),
                )  # fmt: skip
                legal = (int(self.shipped[j][0]) for j in order if verdict(int(self.shipped[j][0])).valid)
                pos = next(legal, None)
                note = {
                    "shipped": self.solutions[shipped]["name"] or f"solution {shipped}",
                    "reason": "; ".join(verdict(shipped).reasons),
                    "used": None if pos is None else (self.solutions[pos]["name"] or f"solution {pos}"),
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
        },
    )


def write_library_yaml(library_deck: LibraryDeck, path: str | Path, provenance: Mapping[str, Any]) -> None:
    """``results/<arch>/<library>/deck.yaml``: one library's full deck, sizes one flow list per line."""
    write_yaml(path, {"provenance": dict(provenance), **library_deck.to_dict()})


def read_library_yaml(path: str | Path) -> LibraryDeck:
    return LibraryDeck.from_dict(read_yaml(path), str(path))
