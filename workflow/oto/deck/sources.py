"""Where a deck comes from: the manifest shipped with oto (``data/deck_vega10.json.gz``, the figures of
rocBLAS's 46 gfx900 logic files), a folder of Tensile logic files, or an installed rocBLAS library folder;
and ``oto deck-manifest``, which derives the manifest from logic files, byte for byte reproducibly."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from oto.deck.model import Deck, DeckError, LibraryDeck, check_sizes
from oto.gemm import FamilyCodeError, Library
from oto.tensile import legality
from oto.tensile.dat_reader import DatLibrary, master_file, read_rocblas_dir
from oto.tensile.logic_reader import LogicFile, LogicFileError, read_logic_dir, solution_knobs
from oto.tensile.params import EXTRA_PARAMS, CandidateError, canonical

SHIPPED_MANIFEST = Path(__file__).resolve().parent / "data" / "deck_vega10.json.gz"
MANIFEST_FORMAT = "oto-deck-manifest/1"


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


# Extras old logic files store that Tensile 4.44 reads differently: a half-compute VectorAtomicWidth of 2 on
# an HHS/HSS kernel (4.44 allows only 1), the GlobalLoadVectorWidth an older derivation arrived at.
_STALE_EXTRAS = (("VectorAtomicWidth",), ("GlobalLoadVectorWidthA", "GlobalLoadVectorWidthB"))


def reference_params(library: Library, solution: Mapping, knobs: Mapping) -> dict:
    """A shipped solution as a kernel oto can build: its knobs plus the extra parameters its file sets
    (:data:`oto.tensile.params.EXTRA_PARAMS`) that keep it the legal kernel that shipped.

    The file's own extras come first (FractionalLoad, GlobalSplitUAlgorithm: MultipleBuffer, ... make
    kernels legal that the knobs alone are not); extras 4.44 reads differently are dropped only when they
    make an otherwise legal kernel illegal. A solution legal in no form keeps every extra: emit then stands
    in the next shipped kernel for it (oto.deck.model.LibraryDeck.reference_for)."""
    extra = {k: solution[k] for k in EXTRA_PARAMS if k in solution}
    tries = [extra]
    for group in _STALE_EXTRAS:
        tries.append({k: v for k, v in tries[-1].items() if k not in group})
    tries.append({})
    for ex in tries:
        params = canonical({**knobs, **ex})
        if legality.check(library, params).valid:
            return params
    return canonical({**knobs, **extra})


def library_from_logic(lf: LogicFile) -> LibraryDeck:
    """The deck of one parsed logic file."""
    lib = _names(lf.library_name, lf.path.name)
    solutions, defaulted = [], set()
    for pos, (sol, index) in enumerate(zip(lf.solutions, lf.solution_indices, strict=True)):
        knobs, filled = solution_knobs(sol)
        defaulted.update(filled)
        try:
            params = reference_params(lib, sol, knobs)
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
    check_sizes(sizes, f"{dl.path.name}: {lib.name}")
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


def manifest_main(argv: list[str] | None = None) -> int:
    """``oto deck-manifest --logic-dir DIR [--out PATH]``: derive the coverage manifest from logic files.

    Reads every ``*.yaml`` in DIR (rocBLAS's ``asm_full/vega10`` folder), and writes the deterministic
    manifest (default: the one shipped inside oto), then prints its stats and size.
    """
    parser = argparse.ArgumentParser(
        prog="oto deck-manifest", description="Derive oto's coverage manifest from Tensile logic files."
    )
    parser.add_argument(
        "--logic-dir",
        required=True,
        type=Path,
        help="folder of Tensile logic YAML files, e.g. rocBLAS's Tensile/Logic/asm_full/vega10",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=SHIPPED_MANIFEST,
        help="manifest to write (.json.gz; default: the one shipped inside oto)",
    )
    args = parser.parse_args(argv)
    deck = deck_from_logic_files(read_logic_dir(args.logic_dir))
    write_manifest(deck, args.out)
    stats = ", ".join(f"{k} {v}" for k, v in deck.stats().items())
    print(f"{args.out}: {args.out.stat().st_size} bytes; {stats}")
    return 0
