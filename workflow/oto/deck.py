"""The coverage deck: which libraries rocBLAS ships for the reference GPU, at which sizes, with which kernels.

A deck comes from one of three sources: the manifest shipped with oto (``data/deck_vega10.json.gz``, the
figures of rocBLAS's 46 gfx900 logic files), a folder of Tensile logic files, or an installed rocBLAS
library folder. Every library keeps its shipped solutions as canonical oto parameters, its unique sizes
([M, N, B, K], or 8 long with LDD, LDC, LDA, LDB when the file has them) and, parallel to the sizes, the
shipped ``[solution position, gflops]``: what the tuned kernels must beat.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.dat_reader import DatLibrary, master_file, read_rocblas_dir
from oto.datatypes import PATTERNS, FamilyCodeError, Library
from oto.files import read_yaml, write_yaml
from oto.logic_reader import LogicFile, LogicFileError, read_logic_dir, solution_knobs
from oto.tensile_params import CandidateError, canonical

SHIPPED_MANIFEST = Path(__file__).resolve().parent / "data" / "deck_vega10.json.gz"
MANIFEST_FORMAT = "oto-deck-manifest/1"
_LIBRARY_FIELDS = ("name", "family", "pattern", "problem_type", "logic", "solutions", "sizes", "shipped")


class DeckError(ValueError):
    """A deck file is malformed or a selection is invalid; the message names the file or the codes."""


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
        return lib

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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest(inputs: Mapping[str, str]) -> str:
    """One hash over several files: sha256 of their sorted ``name sha256`` lines."""
    text = "".join(f"{name} {sha}\n" for name, sha in sorted(inputs.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _unique_sizes(rows: Iterable[tuple[tuple[int, ...], int, float]]) -> tuple[list, list]:
    """Deck sizes and shipped entries; a size repeated (the LdcEqualsLdd twins) keeps its first row."""
    seen: set[tuple[int, ...]] = set()
    sizes, shipped = [], []
    for key, position, gflops in rows:
        if key[:4] in seen:
            continue
        seen.add(key[:4])
        sizes.append(list(key))
        shipped.append([position, gflops])
    return sizes, shipped


def _names(name: str, where: str) -> Library:
    try:
        return Library.parse(name)
    except FamilyCodeError as exc:
        raise DeckError(f"{where}: {exc}") from None


def library_from_logic(lf: LogicFile) -> LibraryDeck:
    """The deck of one parsed logic file."""
    lib = _names(lf.library_name, lf.path.name)
    solutions, defaulted = [], set()
    for pos, (sol, index) in enumerate(zip(lf.solutions, lf.solution_indices, strict=True)):
        knobs, filled = solution_knobs(sol)
        defaulted.update(filled)
        try:
            params = canonical(knobs)
        except CandidateError as exc:
            raise LogicFileError(f"{lf.path.name}: element 5 (solutions) entry {pos}: {exc}") from None
        solutions.append({"index": index, "name": str(sol.get("SolutionNameMin", "")), "params": params})
    sizes, shipped = _unique_sizes(lf.exact_rows)
    logic = {
        "minimum_required_version": lf.minimum_required_version,
        "key_length": lf.key_length,
        "schedule": lf.schedule,
        "architecture": lf.architecture,
        "device_names": lf.device_names,
        "index_order": lf.index_order,
        "distance": lf.distance,
        "perf_metric": lf.perf_metric,
        "exact_rows": len(lf.exact_rows),
        "defaulted_params": sorted(defaulted),
    }
    return LibraryDeck(
        lib.name, lib.family.code, lib.pattern, lf.problem_type, logic, solutions, sizes, shipped
    )


def _arch_name(arch: str | Mapping) -> str:
    return str(arch["Architecture"]) if isinstance(arch, Mapping) else str(arch)


def deck_from_logic_files(files: list[LogicFile]) -> Deck:
    if not files:
        raise DeckError("no logic files given")
    archs = sorted({_arch_name(f.architecture) for f in files})
    if len(archs) != 1:
        raise DeckError(f"logic files target several architectures: {', '.join(archs)}")
    libs: dict[str, LibraryDeck] = {}
    for lf in files:
        if lf.library_name in libs:
            raise DeckError(f"{lf.path.name}: a second file for {lf.library_name}")
        libs[lf.library_name] = library_from_logic(lf)
    inputs = {f.path.name: _sha256(f.path) for f in files}
    folders = sorted({str(f.path.parent.resolve()) for f in files})
    source = {
        "kind": "logic",
        "path": folders[0] if len(folders) == 1 else folders,
        "sha256": _digest(inputs),
        "inputs": inputs,
    }
    return Deck(source, archs[0], libs)


def library_from_dat(dl: DatLibrary) -> LibraryDeck:
    """The deck of one problem type of a rocBLAS library folder; batch is not in the Matching key: 1."""
    lib = _names(dl.library_name, dl.path.name)
    solutions, defaulted = [], set()
    for pos, sol in enumerate(dl.solutions):
        defaulted.update(sol["defaulted"])
        try:
            params = canonical(sol["knobs"])
        except CandidateError as exc:
            raise DeckError(f"{dl.path.name}: solution {pos} ({sol['name']}): {exc}") from None
        solutions.append({"index": sol["index"], "name": sol["name"], "params": params})
    rows = (((m, n, 1, k), pos, speed) for (m, n, k), pos, speed in dl.rows)
    sizes, shipped = _unique_sizes(rows)
    logic = {
        "minimum_required_version": None,
        "key_length": 4,
        "schedule": None,
        "architecture": dl.architecture,
        "device_names": [],
        "index_order": [2, 3, 0, 1],  # FreeSizeA, FreeSizeB, batch, BoundSize: the Matching key order
        "distance": dl.distance,
        "perf_metric": dl.perf_metric,
        "exact_rows": len(dl.rows),
        "defaulted_params": sorted(defaulted),
    }
    return LibraryDeck(
        lib.name, lib.family.code, lib.pattern, dl.problem_type, logic, solutions, sizes, shipped
    )


def deck_from_rocblas_dir(path: str | Path, arch: str = "gfx900", *, fallback: bool = False) -> Deck:
    """The deck of an installed rocBLAS library folder; ``fallback`` adds the HIP fallback (TruePred) rows."""
    path = Path(path)
    found = read_rocblas_dir(path, arch, fallback=fallback)
    files = {master_file(path, arch)} | {dl.path for dl in found}
    inputs = {f.name: _sha256(f) for f in files}
    source = {"kind": "rocblas", "path": str(path.resolve()), "sha256": _digest(inputs), "inputs": inputs}
    return Deck(source, arch, {dl.library_name: library_from_dat(dl) for dl in found})


# ---- manifest ---------------------------------------------------------------------------------------------


def manifest_bytes(deck: Deck) -> bytes:
    """Deterministic gzip'd JSON of a deck's figures: same deck, same bytes."""
    src = dict(deck.source)
    if src.get("path") is not None and not isinstance(src["path"], list):
        src["path"] = Path(src["path"]).name  # where it was derived must not change the bytes
    doc = {
        "format": MANIFEST_FORMAT,
        "source": src,
        "arch_source": deck.arch_source,
        "libraries": {n: lib.to_dict() for n, lib in deck.libraries.items()},
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the manifest is package data, readable by all
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_manifest(deck: Deck, out_path: str | Path) -> None:
    _atomic_write_bytes(Path(out_path), manifest_bytes(deck))


def read_manifest(path: str | Path) -> Deck:
    path = Path(path)
    try:
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw))
    except OSError as exc:  # also gzip.BadGzipFile
        raise DeckError(f"{path}: cannot read the manifest: {exc}") from exc
    except (ValueError, EOFError) as exc:
        raise DeckError(f"{path}: not a gzip'd JSON manifest: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise DeckError(f"{path}: not an oto deck manifest (format {MANIFEST_FORMAT} expected)")
    libs = {n: LibraryDeck.from_dict(d, path.name) for n, d in (doc.get("libraries") or {}).items()}
    source = {
        "kind": "manifest",
        "path": str(path),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "derived_from": doc.get("source"),
    }
    return Deck(source, str(doc.get("arch_source")), libs)


def load_deck(kind: str, path: str | Path | None = None) -> Deck:
    """A deck from config ``deck: {source, path}``; the manifest defaults to the one shipped with oto."""
    if kind == "manifest":
        return read_manifest(SHIPPED_MANIFEST if path is None else path)
    if path is None:
        raise DeckError(f"deck source {kind!r} needs a path")
    if kind == "logic":
        return deck_from_logic_files(read_logic_dir(path))
    if kind == "rocblas":
        return deck_from_rocblas_dir(path)
    raise DeckError(f"unknown deck source {kind!r} (manifest, logic or rocblas)")


# ---- YAML slices used by the workflow ---------------------------------------------------------------------


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


def manifest_main(argv: list[str] | None = None) -> int:
    """``oto deck-manifest --logic-dir DIR [--out PATH]``: derive the coverage manifest from logic files.

    Reads every ``*.yaml`` in DIR (rocBLAS's ``asm_full/vega10`` folder), and writes the deterministic
    manifest (default: the one shipped inside oto), then prints its stats and size.
    """
    parser = argparse.ArgumentParser(
        prog="oto deck-manifest", description="Derive oto's coverage manifest from Tensile logic files."
    )
    parser.add_argument("--logic-dir", required=True, type=Path, help="folder of Tensile logic YAML files")
    parser.add_argument("--out", type=Path, default=SHIPPED_MANIFEST, help="manifest to write (.json.gz)")
    args = parser.parse_args(argv)
    deck = deck_from_logic_files(read_logic_dir(args.logic_dir))
    write_manifest(deck, args.out)
    stats = ", ".join(f"{k} {v}" for k, v in deck.stats().items())
    print(f"{args.out}: {args.out.stat().st_size} bytes; {stats}")
    return 0
