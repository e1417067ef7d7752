"""Where a deck comes from: deck sources as plug-ins, one small protocol (:class:`DeckSource`), one registry
(:data:`DECK_SOURCES`, config ``deck.source``; the schema's enum is tested against it).

A source answers two questions. At plan time, cheaply (a dry-run must stay fast): which libraries it holds and
which files the deck rule reads (:meth:`DeckSource.plan`), and whether the selected libraries' sizes are sane
(:meth:`DeckSource.check`: a zero or negative size fails the dry-run naming file and row). At deck time:
which libraries and sizes, with what weight (:meth:`DeckSource.load`). Separately and optionally, a source
whose libraries ship Tensile kernels (``ships_kernels``) can be a library's floor: the reference kernel of a
size (:mod:`oto.deck.floors`; config ``deck.floor``).

Registered: ``manifest`` (the figures of rocBLAS's 46 gfx900 logic files, ``data/deck_vega10.json.gz``,
shipped with oto), ``logic`` (a folder of Tensile logic files) and ``rocblas`` (an installed rocBLAS library
folder, read for the arch profile's stock library: ``stock_library.arch``). ``oto deck-manifest`` derives the
manifest from logic files, byte for byte reproducibly.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from oto.deck.floors import NONE, OWN, BaselineFloor, FloorError, foreign_floor
from oto.deck.model import Deck, DeckError, LibraryDeck, check_sizes
from oto.gemm import FamilyCodeError, Library
from oto.tensile import legality
from oto.tensile.dat_reader import DatFileError, DatLibrary, master_file, read_rocblas_dir
from oto.tensile.logic_reader import (
    LogicFile,
    LogicFileError,
    read_exact_rows,
    read_logic_dir,
    read_logic_file,
    solution_knobs,
)
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


def uniform_weights(sizes: Sequence) -> list[float]:
    """Every size of a shipped library weighs the same: 1 (a workload source would weigh by call count)."""
    return [1.0] * len(sizes)


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
        lib.name, lib.family.code, lib.pattern, lf.problem_type, logic, solutions, sizes, shipped,
        weights=uniform_weights(sizes),
    )  # fmt: skip


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
        lib.name, lib.family.code, lib.pattern, dl.problem_type, logic, solutions, sizes, shipped,
        weights=uniform_weights(sizes),
    )  # fmt: skip


def deck_from_rocblas_dir(path: str | Path, arch: str, *, fallback: bool = False) -> Deck:
    """The deck of ``arch``'s libraries in an installed rocBLAS library folder; ``fallback`` adds the HIP
    fallback (TruePred) rows."""
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
        "libraries": {n: lib.figures() for n, lib in deck.libraries.items()},
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


# ---- deck sources: one protocol, one registry -------------------------------------------------------------


class DeckConfigError(DeckError):
    """A deck source or floor the config names wrongly (unknown, no path, a path that is not there); the
    message names the config field."""


@dataclass(frozen=True)
class SourcePlan:
    """What a source answers at plan time: the file or folder it reads, its libraries and the files reading
    each takes (``shared``: files every library needs, or that the source reads whatever is selected)."""

    path: str
    files: dict[str, tuple[str, ...]]
    shared: tuple[str, ...] = field(default=())

    @property
    def libraries(self) -> list[str]:
        return sorted(self.files)

    def files_for(self, libraries: Iterable[str] | None = None) -> list[str]:
        """The files the deck rule reads for ``libraries`` (None: the whole source)."""
        chosen = self.files if libraries is None else libraries
        return sorted({*self.shared, *(f for lib in chosen for f in self.files[lib])})


class DeckSource(Protocol):
    """A deck source, built from config ``deck.path`` (or ``deck.floor.path``) and the arch whose stock
    library the profile's owners run (``stock_library.arch``: the library a rocBLAS folder is read for)."""

    name: ClassVar[str]  # config deck.source
    doc: ClassVar[str]
    path: Path | None  # what it reads
    needs_path: ClassVar[bool]  # config deck.path is required
    ships_kernels: ClassVar[bool]  # its libraries carry shipped Tensile kernels: it can be a floor

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck") -> None: ...

    def plan(self) -> SourcePlan:
        """Cheaply: the libraries and the files the deck rule reads (no full parse of what is not needed)."""
        ...

    def check(self, libraries: Sequence[str]) -> None:
        """The selected libraries' sizes are sane: a zero or negative size raises, naming file and row."""
        ...

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        """The libraries (None: every one) with their sizes and weights, and their shipped kernels if any."""
        ...


class _Source:
    """What the registered sources share: the path (checked when the source needs one), the arch, the config
    field errors name."""

    name: ClassVar[str]
    needs_path: ClassVar[bool] = True

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck"):
        if self.needs_path and not path:
            raise DeckConfigError(
                f"config field '{field}.path': required when {field}.source is {self.name!r}"
            )
        self.path = Path(path) if path else None
        self.arch, self.field = arch, field

    def _folder(self) -> Path:
        assert self.path is not None
        if not self.path.is_dir():
            raise DeckConfigError(f"config field '{self.field}.path': {self.path} is not a folder")
        return self.path

    def _none_found(self) -> DeckConfigError:
        return DeckConfigError(f"config field '{self.field}.path': no Tensile library found in {self.path}")


def _selected(deck: Deck, libraries: Sequence[str] | None, where: str) -> Deck:
    if libraries is None:
        return deck
    missing = sorted(set(libraries) - set(deck.libraries))
    if missing:
        raise DeckError(f"{where}: no library {', '.join(missing)}")
    return Deck(deck.source, deck.arch_source, {n: deck.libraries[n] for n in libraries})


class ManifestSource(_Source):
    name = "manifest"
    doc = "the figures of rocBLAS's 46 gfx900 logic files, shipped with oto (deck.path: another manifest)"
    needs_path = False
    ships_kernels = True

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck"):
        super().__init__(path or SHIPPED_MANIFEST, arch, field)

    def plan(self) -> SourcePlan:
        if not self.path.is_file():
            raise DeckConfigError(f"config field '{self.field}.path': manifest {self.path} not found")
        names = read_manifest(self.path).libraries  # read in full anyway: every size is checked here
        return SourcePlan(str(self.path), {n: (str(self.path),) for n in names})

    def check(self, libraries: Sequence[str]) -> None:
        """Nothing more: reading the manifest checked every size."""

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        return _selected(read_manifest(self.path), libraries, str(self.path))


def _logic_library(path: Path) -> str | None:
    """The library a logic file holds, from its name (``<prefix>_Cijk_...yaml``); None for other files."""
    cut = path.stem.find("_Cijk_")
    if cut < 0:
        return None
    try:
        return Library.parse(path.stem[cut + 1 :]).name
    except FamilyCodeError as exc:
        raise DeckError(f"{path}: file name does not name a Tensile problem type ({exc})") from None


class LogicSource(_Source):
    name = "logic"
    doc = "a folder of Tensile logic files (rocBLAS's library/src/blas3/Tensile/Logic/asm_full/<arch>)"
    ships_kernels = True

    def plan(self) -> SourcePlan:
        folder = self._folder()
        files: dict[str, list[str]] = {}
        others = []
        for f in sorted(folder.glob("*.yaml")):  # what deck_from_logic_files reads
            name = _logic_library(f)
            (files.setdefault(name, []) if name else others).append(str(f))
        if not files:
            raise self._none_found()
        return SourcePlan(str(folder), {n: tuple(fs) for n, fs in files.items()}, tuple(others))

    def check(self, libraries: Sequence[str]) -> None:
        files = self.plan().files
        for name in libraries:
            for f in files[name]:
                read_exact_rows(f)  # raises naming file and row, without parsing the solutions

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        if libraries is None:
            return deck_from_logic_files(read_logic_dir(self._folder()))
        files = self.plan().files
        missing = sorted(set(libraries) - set(files))
        if missing:
            raise DeckError(f"{self.path}: no logic file of {', '.join(missing)}")
        return deck_from_logic_files([read_logic_file(f) for n in libraries for f in files[n]])


class RocblasSource(_Source):
    name = "rocblas"
    doc = "an installed rocBLAS library folder (/opt/rocm/lib/rocblas/library), for the stock library's arch"
    ships_kernels = True

    def _arch(self) -> str:
        if not self.arch:
            raise DeckConfigError(
                f"config field '{self.field}.source': rocblas needs the arch whose library to read "
                "(the arch profile's stock_library.arch)"
            )
        return self.arch

    def plan(self) -> SourcePlan:
        folder, arch = self._folder(), self._arch()
        try:
            found = read_rocblas_dir(folder, arch)
            master = master_file(folder, arch)
        except DatFileError as exc:
            raise DeckError(str(exc)) from None
        for dl in found:
            library_from_dat(dl)  # parsed in full anyway: every size is checked here
        if not found:
            raise self._none_found()
        files = {dl.library_name: (str(dl.path),) for dl in found}
        return SourcePlan(str(folder), files, (str(master),))

    def check(self, libraries: Sequence[str]) -> None:
        """Nothing more: planning read every size."""

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        try:
            deck = deck_from_rocblas_dir(self._folder(), self._arch())
        except DatFileError as exc:
            raise DeckError(str(exc)) from None
        return _selected(deck, libraries, str(self.path))


# name -> source (config deck.source and deck.floor.source; the schema's enums are tested against it)
DECK_SOURCES: dict[str, type] = {s.name: s for s in (ManifestSource, LogicSource, RocblasSource)}


def make_source(name: str, path: str | Path | None, arch: str | None, field: str = "deck") -> DeckSource:
    """The source registered as ``name``, reading ``path`` (for a rocBLAS folder: ``arch``'s library)."""
    try:
        cls = DECK_SOURCES[name]
    except KeyError:
        raise DeckConfigError(
            f"config field '{field}.source': unknown deck source {name!r} (known: {', '.join(DECK_SOURCES)})"
        ) from None
    return cls(path, arch, field)


def load_deck(kind: str, path: str | Path | None = None, arch: str | None = None) -> Deck:
    """The whole deck of source ``kind`` (config ``deck: {source, path}``; the manifest defaults to the one
    shipped with oto; ``arch``: the library a rocBLAS folder is read for)."""
    return make_source(kind, path, arch).load()


# ---- the run's deck: its source and its floor -----------------------------------------------------------


def deck_settings(deck_config: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """What the deck rule needs from config ``deck`` (validated: defaults filled in) and the profile: the
    source and path, the floor's, and the arch a rocBLAS folder is read for (the profile's stock library)."""
    floor = deck_config["floor"]
    return {
        "source": deck_config["source"],
        "path": deck_config["path"],
        "arch": profile["stock_library"]["arch"],
        "floor": {"source": floor["source"], "path": floor["path"]},
    }


def run_source(settings: Mapping[str, Any]) -> DeckSource:
    """The deck's source, from the plan's deck settings (:func:`deck_settings`)."""
    return make_source(settings["source"], settings["path"], settings["arch"])


def floor_source(settings: Mapping[str, Any]) -> DeckSource | None:
    """The source the floor comes from (None: the deck's own kernels, or none)."""
    floor = settings["floor"]
    if floor["source"] in (OWN, NONE):
        return None
    return make_source(floor["source"], floor["path"], settings["arch"], "deck.floor")


def plan_floor(
    settings: Mapping[str, Any], libraries: Sequence[str]
) -> tuple[str | None, dict[str, list[str]]]:
    """At plan time: the floor source's path (None without one) and, per selected library, the files its
    deck job reads for its floor; raises when the floor cannot serve them, naming the field and libraries."""
    floor = settings["floor"]["source"]
    if floor == OWN:
        if not DECK_SOURCES[settings["source"]].ships_kernels:
            raise DeckConfigError(
                f"config field 'deck.floor.source': deck source {settings['source']!r} ships no Tensile "
                "kernel to be its own floor; name another source (with its path) or none"
            )
        return None, {lib: [] for lib in libraries}
    source = floor_source(settings)
    if source is None:
        return None, {lib: [] for lib in libraries}
    if not source.ships_kernels:
        raise DeckConfigError(f"config field 'deck.floor.source': {floor!r} ships no Tensile kernel")
    plan = source.plan()
    missing = sorted(set(libraries) - set(plan.libraries))
    if missing:
        raise DeckConfigError(
            f"config field 'deck.floor': {plan.path} has no library {', '.join(missing)} (it has "
            f"{len(plan.libraries)}); select families it ships, or take the floor from elsewhere"
        )
    source.check(libraries)
    return plan.path, {lib: plan.files_for([lib]) for lib in libraries}


def attach_floor(deck: Deck, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """Give every library of ``deck`` its floor (config ``deck.floor``); returns what the floor is for the
    deck's provenance (None: the deck's own shipped kernels)."""
    floor = settings["floor"]["source"]
    if floor == OWN:
        bare = [n for n, lib in deck.libraries.items() if not lib.solutions]
        if bare:
            raise DeckError(
                f"{', '.join(bare)}: no shipped Tensile kernel to be the floor; set deck.floor (another "
                "source with its path, or none)"
            )
        return None
    if floor == NONE:
        baseline = BaselineFloor()
        for lib in deck.libraries.values():
            lib.floor = baseline.to_dict()
        return baseline.describe()
    source = floor_source(settings)
    shipped = source.load(list(deck.libraries))
    where = {
        "source": floor,
        "path": str(settings["floor"]["path"] or source.path),
        "arch": shipped.arch_source,
        "sha256": shipped.source.get("sha256"),
    }
    try:
        for name, lib in deck.libraries.items():
            lib.floor = foreign_floor(shipped.libraries[name], {**where, "library": name}).to_dict()
    except FloorError as exc:
        raise DeckError(str(exc)) from None
    return {k: v for k, v in where.items() if k != "sha256"}


def load_run_deck(
    settings: Mapping[str, Any], libraries: Sequence[str] | None = None
) -> tuple[Deck, Deck, dict[str, Any] | None]:
    """The source's whole deck, the selected libraries (None: every one) with their floors attached, and
    what the floor is (None: the deck's own shipped kernels)."""
    full = run_source(settings).load()
    selected = _selected(full, sorted(libraries) if libraries is not None else None, str(settings["path"]))
    selected = Deck(full.source, full.arch_source, dict(selected.libraries))
    return full, selected, attach_floor(selected, settings)


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
