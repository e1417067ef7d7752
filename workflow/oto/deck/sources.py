"""Where a deck comes from: deck sources as plug-ins, one small protocol (:class:`DeckSource`), one registry
(:data:`DECK_SOURCES`, config ``deck.source``; the schema's enum is tested against it).

A source answers two questions. At plan time, cheaply (a dry-run must stay fast): which libraries it holds and
which files the deck rule reads (:meth:`DeckSource.plan`), and whether the selected libraries' sizes are sane
(:meth:`DeckSource.check`: a zero or negative size fails the dry-run naming file and row). At deck time:
which libraries and sizes, with what weight (:meth:`DeckSource.load`). Separately and optionally, a source
whose libraries ship Tensile kernels (``ships_kernels``) can be a library's floor: the reference kernel of a
size (:mod:`oto.deck.floors`; config ``deck.floor``).

Registered: ``manifest`` (the figures of the stock library's logic files shipped with oto: rocBLAS's 46
gfx900 files, ``data/deck_vega10.json.gz``, and navi21's and navi31's for the RDNA APUs), ``logic`` (a
folder of Tensile logic files) and ``rocblas`` (an installed rocBLAS library folder, read for the arch
profile's stock library: ``stock_library.arch``), which ship kernels, and the workload sources ``tunableop``
and ``rocblas-log`` (:class:`WorkloadSource`: an application's GEMMs weighted by call count, no kernel),
which a run also layers on another source's libraries (config ``deck.workload``, :func:`add_workload`).
``oto deck-manifest`` derives a manifest from logic files, byte for byte reproducibly.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from oto.deck.floors import NONE, OWN, BaselineFloor, FloorError, foreign_floor
from oto.deck.model import Deck, DeckError, LibraryDeck, check_sizes
from oto.deck.size_cap import SizeCap, cap_library, cap_summary
from oto.deck.workload import Uncovered, Workload, WorkloadError, read_workload
from oto.gemm import FamilyCodeError, Library
from oto.tensile import legality
from oto.tensile.dat_reader import DatFileError, DatLibrary, master_file, read_rocblas_dir
from oto.tensile.isa import caps_donor
from oto.tensile.logic_reader import (
    LogicFile,
    LogicFileError,
    architecture_name,
    read_architecture,
    read_exact_rows,
    read_logic_dir,
    read_logic_file,
    solution_knobs,
)
from oto.tensile.logic_writer import problem_type
from oto.tensile.params import EXTRA_PARAMS, CandidateError, canonical
from oto.tensile.solution_fields import isa_tuple as sf_isa

SHIPPED_MANIFEST = Path(__file__).resolve().parent / "data" / "deck_vega10.json.gz"
# The manifests oto ships, by the arch of the stock library they were derived from (the arch profile's
# stock_library.arch): rocBLAS's logic files for vega10 (gfx900), navi21 (gfx1030) and navi31 (gfx1100),
# the libraries gfx90c/gfx902, gfx1035 and gfx1103/gfx1150 run spoofed. `oto deck-manifest` derives them.
SHIPPED_MANIFESTS = {
    "gfx900": SHIPPED_MANIFEST,
    "gfx1030": SHIPPED_MANIFEST.with_name("deck_navi21.json.gz"),
    "gfx1100": SHIPPED_MANIFEST.with_name("deck_navi31.json.gz"),
}


def shipped_manifest(stock_arch: str | None) -> Path:
    """The manifest oto ships of ``stock_arch``'s library; vega10's for an arch it ships none of (gfx906 runs
    vega20's library: its deck is vega10's until a vega20 manifest or a logic folder is configured)."""
    return SHIPPED_MANIFESTS.get(str(stock_arch), SHIPPED_MANIFEST)


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


def shipped_limits(architecture: str | Mapping) -> legality.Limits | None:
    """The legality limits a logic file's kernels were shipped for: its own ISA for an RDNA file (gfx1030's
    wave32 and dot rules, gfx1100's WMMA), whose kernels no gfx9 rule admits; None (gfx90c's, the default)
    for a gfx9 file, so that the vega10 manifest stays as it was derived."""
    name = architecture_name(architecture)
    try:
        isa = sf_isa(name)
        if isa[0] < 10:
            return None
        return legality.Limits(isa=isa, caps_from=caps_donor(isa))
    except (ValueError, IndexError):
        return None


def reference_params(
    library: Library, solution: Mapping, knobs: Mapping, limits: legality.Limits | None = None
) -> dict:
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
        if legality.check(library, params, limits).valid:
            return params
    return canonical({**knobs, **extra})


def library_from_logic(lf: LogicFile) -> LibraryDeck:
    """The deck of one parsed logic file."""
    lib = _names(lf.library_name, lf.path.name)
    limits = shipped_limits(lf.architecture)
    solutions, defaulted = [], set()
    for pos, (sol, index) in enumerate(zip(lf.solutions, lf.solution_indices, strict=True)):
        knobs, filled = solution_knobs(sol)
        defaulted.update(filled)
        try:
            params = reference_params(lib, sol, knobs, limits)
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


def deck_from_logic_files(files: list[LogicFile]) -> Deck:
    if not files:
        raise DeckError("no logic files given")
    archs = sorted({architecture_name(f.architecture) for f in files})
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


def read_manifest(path: str | Path, checked: Collection[str] | None = None) -> Deck:
    """The manifest's deck; ``checked``: the libraries to check and put in canonical form (None: all), the
    others are read for their names and counts only (:meth:`LibraryDeck.from_dict`)."""
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
    libs = {
        n: LibraryDeck.from_dict(d, path.name, checked is None or n in checked)
        for n, d in (doc.get("libraries") or {}).items()
    }
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
    # plan() reads every kernel anyway, so the dry-run checks them against the profile (check_capabilities)
    kernels_at_plan: ClassVar[bool]

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

    def whole(self, libraries: Sequence[str] | None = None) -> Deck:
        """Every library, ``libraries`` (None: all) as :meth:`load` gives them (the deck rule's view of its
        source: what it tunes, and the source's names and counts for provenance)."""
        ...


class _Source:
    """What the registered sources share: the path (checked when the source needs one), the arch, the config
    field errors name."""

    name: ClassVar[str]
    needs_path: ClassVar[bool] = True
    kernels_at_plan: ClassVar[bool] = False

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck"):
        if self.needs_path and not path:
            raise DeckConfigError(
                f"config field '{field}.path': required when {field}.source is {self.name!r}"
            )
        self.path = Path(path) if path else None
        self.arch, self.field = arch, field

    def whole(self, libraries: Sequence[str] | None = None) -> Deck:
        """Every library of the source, ``libraries`` (None: all) as :meth:`load` gives them; the others may
        be read for their names and counts only (a manifest's: the plan read it whole and checked it)."""
        return self.load()

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
    doc = (
        "the figures of the stock library's logic files, shipped with oto (vega10, navi21, navi31: "
        "stock_library.arch gfx900, gfx1030, gfx1100); deck.path: another manifest"
    )
    needs_path = False
    ships_kernels = True
    kernels_at_plan = True

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck"):
        super().__init__(path or shipped_manifest(arch), arch, field)

    def plan(self) -> SourcePlan:
        if not self.path.is_file():
            raise DeckConfigError(f"config field '{self.field}.path': manifest {self.path} not found")
        names = read_manifest(self.path).libraries  # read in full anyway: every size is checked here
        return SourcePlan(str(self.path), {n: (str(self.path),) for n in names})

    def check(self, libraries: Sequence[str]) -> None:
        """Nothing more: reading the manifest checked every size."""

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        return _selected(read_manifest(self.path, libraries), libraries, str(self.path))

    def whole(self, libraries: Sequence[str] | None = None) -> Deck:
        return read_manifest(self.path, libraries)


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


# ---- workload sources: the GEMMs an application runs, weighted by call count ---------------------------

PROBLEMS_SHOWN = 5  # lines a bad workload's error quotes (then how many more)


def weights_from_calls(calls: Sequence[int], share: float = 1.0) -> list[float]:
    """Weights of a library's sizes from their workload call counts, mean 1: ``share`` of the weight goes to
    the workload in proportion to its calls, the rest evenly to every size (the footprint: sizes it does not
    call still count, a little). A library the workload does not call keeps uniform weights."""
    n, total = len(calls), sum(calls)
    if not total:
        return uniform_weights(calls)
    return [round(share * n * c / total + (1.0 - share), 6) for c in calls]


def workload_library(name: str, sizes: Mapping[tuple[int, ...], int], arch: str | None) -> LibraryDeck:
    """A library of a workload deck: its sizes weighted by call count and no shipped kernel (its floor comes
    from another source or is the baseline kernel: oto.deck.floors)."""
    lib = _names(name, "workload")
    keys = sorted(sizes)
    calls = [int(sizes[k]) for k in keys]
    logic = {
        "minimum_required_version": None,
        "key_length": 4,
        "schedule": None,
        "architecture": None,
        "device_names": [],
        "index_order": [0, 1, 2, 3],
        "distance": "Euclidean",
        "perf_metric": None,
        "exact_rows": len(keys),
        "defaulted_params": [],
    }
    return LibraryDeck(
        lib.name, lib.family.code, lib.pattern, problem_type(lib), logic, [], [list(k) for k in keys],
        [None] * len(keys), weights=weights_from_calls(calls), calls=calls,
    )  # fmt: skip


class WorkloadSource(_Source):
    """A workload file (oto.deck.workload) as a deck: the libraries its GEMMs run on, each size weighted by
    its call count. It ships no kernel: its floor is another source's (deck.floor) or the baseline kernel.
    Every line it cannot read fails the check naming file and line; GEMMs without a library are ``uncovered``
    (:meth:`uncovered`), other BLAS calls ``skipped``, both kept in the deck's record, never dropped."""

    format: ClassVar[str]  # oto.deck.workload.read_workload's format
    ships_kernels = False

    def __init__(self, path: str | Path | None, arch: str | None, field: str = "deck"):
        super().__init__(path, arch, field)
        self._read: Workload | None = None

    def workload(self) -> Workload:
        if self._read is None:
            assert self.path is not None
            if not self.path.is_file():
                raise DeckConfigError(f"config field '{self.field}.path': {self.path} is not a file")
            try:
                self._read = read_workload(self.path, self.format)
            except WorkloadError as exc:
                raise DeckError(f"{exc} (config field '{self.field}')") from None
        return self._read

    def plan(self) -> SourcePlan:
        w = self.workload()
        if not w.gemms:
            self.check([])  # lines it cannot read are what a user must see first (a file of another form)
            others = ", ".join(f"{f} {n}" for f, n in w.skipped.items())
            why = "; ".join(f"{u.where}: {u.reason}" for u in w.uncovered[:PROBLEMS_SHOWN]) or (
                f"only other BLAS calls: {others}" if others else "no GEMM in it"
            )
            raise DeckError(f"{self.path}: no GEMM oto has a Tensile library for ({why})")
        return SourcePlan(str(self.path), {n: (str(self.path),) for n in w.library_weights()})

    def check(self, libraries: Sequence[str]) -> None:
        """Every line was read: a truncated file, a negative size, a line of another format or of a
        PyTorch version oto does not read fails here, naming file and line (what can be read is never
        guessed)."""
        problems = self.workload().problems
        if problems:
            more = len(problems) - PROBLEMS_SHOWN
            shown = "; ".join(problems[:PROBLEMS_SHOWN]) + (f"; and {more} more" if more > 0 else "")
            raise DeckError(
                f"{self.path}: {len(problems)} line(s) oto cannot read as a {self.name} workload: {shown} "
                "(fix or remove them; nothing is tuned on a guess)"
            )

    def load(self, libraries: Sequence[str] | None = None) -> Deck:
        w = self.workload()
        weights = w.library_weights()
        libs = {n: workload_library(n, sizes, self.arch) for n, sizes in weights.items()}
        source = {
            "kind": self.name,
            "path": str(self.path.resolve()),
            "sha256": _sha256(self.path),
            **workload_record(w),
        }
        return _selected(Deck(source, self.arch or "none", libs), libraries, str(self.path))

    def uncovered(self, libraries: Iterable[str]) -> list[Uncovered]:
        """The workload's GEMMs no library of ``libraries`` serves, with the reason (their own, or that the
        run's deck has no such library)."""
        return self.workload().covered_by(libraries)[1]


def workload_record(w: Workload) -> dict[str, Any]:
    """What deck.yaml keeps of a workload file besides its sizes: its format, the PyTorch version its
    validators name, the other BLAS calls skipped and any notes."""
    out: dict[str, Any] = {"format": w.format, "gemms": len(w.gemms), "calls": w.weight}
    if w.validators.get("PT_VERSION"):
        out["pytorch"] = w.validators["PT_VERSION"]
    if w.skipped:
        out["skipped"] = dict(w.skipped)
    if w.notes:
        out["notes"] = list(w.notes)
    return out


class TunableOpSource(WorkloadSource):
    name = "tunableop"
    doc = (
        "a PyTorch TunableOp untuned file (PYTORCH_TUNABLEOP_RECORD_UNTUNED=1: tunableop_untuned0.csv) or "
        "results file, any PyTorch version: each GEMM weighted by how often it was recorded"
    )
    format = "tunableop"


class RocblasLogSource(WorkloadSource):
    name = "rocblas-log"
    doc = (
        "a rocBLAS log: ROCBLAS_LAYER=4 profile YAML (weighted by call_count) or ROCBLAS_LAYER=2 "
        "rocblas-bench lines (one call each); other BLAS calls are skipped and counted"
    )
    format = "rocblas-log"


# name -> source (config deck.source and deck.floor.source; the schema's enums are tested against it)
DECK_SOURCES: dict[str, type] = {
    s.name: s for s in (ManifestSource, LogicSource, RocblasSource, TunableOpSource, RocblasLogSource)
}
# the sources that ship kernels: what deck.floor.source may name
FLOOR_SOURCES = [n for n, s in DECK_SOURCES.items() if s.ships_kernels]
# the sources of an application's GEMMs: what deck.workload entries may name
WORKLOAD_SOURCES = [n for n, s in DECK_SOURCES.items() if issubclass(s, WorkloadSource)]


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


# ---- what the profile's GPU can run ----------------------------------------------------------------------


def check_capabilities(
    source: DeckSource, libraries: Sequence[str], profile: Mapping[str, Any], profile_file: str | Path
) -> None:
    """A deck whose problem types the profile's GPU cannot run fails the dry-run, naming file and field: a
    library whose data type has no rate in the profile (``rates.<class>``), or, where the source's plan
    reads its kernels anyway (:attr:`DeckSource.kernels_at_plan`), a library none of whose shipped kernels
    is legal on the profile's ISA (navi31's WMMA kernels on an RDNA2 APU, navi21's wave32 ones on gfx9):
    its spoof floor would have no kernel to race."""
    rates = profile.get("rates") or {}
    for name in libraries:
        rate = Library.parse(name).family.rate_class
        if rate not in rates:
            raise DeckError(
                f"{profile_file}: field 'rates.{rate}': missing, and the deck's {name} computes in {rate} "
                f"({source.path})"
            )
    if not source.kernels_at_plan:
        return
    limits = legality.Limits.from_profile(profile)
    deck = source.load(list(libraries))
    for name, lib in deck.libraries.items():
        library = Library.parse(name)
        verdicts = (legality.check(library, sol["params"], limits) for sol in lib.solutions)
        first = None
        for verdict in verdicts:
            if verdict.valid:
                break
            first = first or verdict
        else:
            if first is None:  # no shipped kernel: the floor comes from elsewhere (plan_floor says so)
                continue
            raise DeckError(
                f"{source.path}: library {name}, field 'solutions': none of its {len(lib.solutions)} shipped "
                f"kernels can run on {profile.get('arch')} ({profile_file} field 'isa' "
                f"{list(limits.isa)}): {first.reasons[0]}; take the deck of this GPU's stock library "
                "(stock_library) or another one"
            )


# ---- the run's deck: its source and its floor -----------------------------------------------------------


def deck_settings(deck_config: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """What the deck rule needs from config ``deck`` (validated: defaults filled in) and the profile: the
    source and path, the floor's, the arch a rocBLAS folder is read for (the profile's stock library),
    when config ``deck.workload`` names files, those and the workload's share of the weight, and the size cap
    when config ``deck.max_sizes`` sets one (each absent otherwise, so a run without them keeps the deck
    rule's parameters of before)."""
    floor = deck_config["floor"]
    out = {
        "source": deck_config["source"],
        "path": deck_config["path"],
        "arch": profile["stock_library"]["arch"],
        "floor": {"source": floor["source"], "path": floor["path"]},
    }
    native = deck_config.get("native_floor") or {}
    if native.get("path"):  # read for the GPU's own arch: upstream's native library of it
        out["native_floor"] = {"source": native["source"], "path": native["path"], "arch": profile["arch"]}
    if deck_config.get("workload"):
        out["workload"] = [{"source": w["source"], "path": w["path"]} for w in deck_config["workload"]]
        out["workload_share"] = float(deck_config["workload_share"])
    cap = SizeCap.from_config(deck_config)
    if cap.max_sizes is not None:
        out["max_sizes"] = cap.max_sizes
    return out


def workload_sources(settings: Mapping[str, Any]) -> list[WorkloadSource]:
    """The workload files layered on the deck (config ``deck.workload``), as sources."""
    out, seen = [], {}
    for i, entry in enumerate(settings.get("workload") or []):
        field = f"deck.workload[{i}]"
        same = seen.setdefault(Path(str(entry["path"])).resolve(), i)
        if same != i:  # its calls would count twice
            raise DeckConfigError(
                f"config field '{field}.path': {entry['path']} is deck.workload[{same}]'s file again"
            )
        source = make_source(entry["source"], entry["path"], settings["arch"], field)
        if not isinstance(source, WorkloadSource):
            raise DeckConfigError(
                f"config field '{field}.source': {entry['source']!r} is not a workload source "
                f"({', '.join(WORKLOAD_SOURCES)})"
            )
        out.append(source)
    return out


def workload_identity(deck_config: Mapping[str, Any]) -> list[list[str]]:
    """Which workload a run's figures are of: [source, path] of each file layered on the deck (config
    ``deck.workload``), else of the deck source when it is a workload; sorted. Finalize records it with a
    library's workload figures and the report counts only the libraries of the run's own workload (a folder
    keeps earlier nights' libraries, tuned for another workload). The run deck's ``workload.files`` name the
    same files."""
    layered = [[str(e["source"]), str(e["path"])] for e in deck_config.get("workload") or []]
    if layered:
        return sorted(layered)
    if deck_config.get("source") in WORKLOAD_SOURCES:
        return [[str(deck_config["source"]), str(deck_config.get("path"))]]
    return []


def plan_workload(settings: Mapping[str, Any]) -> list[str]:
    """At plan time: the workload files layered on the deck are read and every line checked (a bad line
    fails the dry-run naming file and line); returns the files the deck rule reads."""
    files = []
    for source in workload_sources(settings):
        source.check(source.plan().libraries)
        files.append(str(source.path))
    return files


def _tensile_key(size: Sequence[int], like: LibraryDeck) -> list[int]:
    """A workload size as the library's sizes are keyed: 8 long (with LDD, LDC, LDA, LDB: the smallest
    leading dimensions of the problem) where the library's are."""
    m, n, b, k = (int(v) for v in size[:4])
    if not like.sizes or len(like.sizes[0]) == 4:
        return [m, n, b, k]
    lib = Library.parse(like.name)
    return [m, n, b, k, m, m, k if lib.transpose_a else m, n if lib.transpose_b else k]


NOT_SELECTED = "library {} is not selected in this run (config families, patterns, shard)"
NOT_IN_SOURCE = "the deck source has no library {}"


def _file_record(source: WorkloadSource) -> dict[str, Any]:
    return {
        "source": source.name,
        "path": str(source.path),
        "sha256": _sha256(source.path),
        **workload_record(source.workload()),
    }


def _uncovered_record(u: Uncovered) -> dict[str, Any]:
    out = {"gemm": u.what, "calls": u.weight, "where": u.where, "reason": u.reason}
    if u.library:
        out["library"] = u.library
    return out


def add_workload(
    deck: Deck, workloads: Sequence[WorkloadSource], share: float, source_libraries: Iterable[str]
) -> dict[str, Any]:
    """Layer workload files on the deck's libraries (config ``deck.workload``): a workload size the library
    has gains its calls, one it lacks is added (its reference kernel is what the library's Matching table
    picks there, the nearest shipped size), every other size stays (coverage stays whole). Weights: ``share``
    of each library's weight in proportion to the calls, the rest evenly (:func:`weights_from_calls`).
    Returns the workload's record for deck.yaml: its files and every GEMM the deck does not cover, with why
    (a GEMM of a library the source has but this run does not select, or of one it does not have)."""
    in_source = set(source_libraries)
    calls: dict[str, dict[tuple[int, ...], int]] = {}
    files, uncovered = [], []
    for src in workloads:
        w = src.workload()
        covered, missing = w.covered_by(deck.libraries)
        for lib, sizes in covered.items():
            for size, count in sizes.items():
                calls.setdefault(lib, {})[size] = calls.get(lib, {}).get(size, 0) + count
        for u in missing:
            if u.library:
                u.reason = (
                    NOT_SELECTED.format(u.library)
                    if u.library in in_source
                    else NOT_IN_SOURCE.format(u.library)
                )
            uncovered.append(u)
        files.append(_file_record(src))
    for name, lib in deck.libraries.items():
        index: dict[tuple[int, ...], int] = {}
        for i, s in enumerate(lib.sizes):
            index.setdefault(tuple(s[:4]), i)
        counts = [0] * len(lib.sizes)
        for size, count in sorted(calls.get(name, {}).items()):
            if size in index:
                counts[index[size]] += count
                continue
            lib.sizes.append(_tensile_key(size, lib))
            lib.shipped.append(None)
            counts.append(count)
        lib.calls = counts
        lib.weights = weights_from_calls(counts, share)
    return workload_summary(deck, files, uncovered, share)


def workload_summary(
    deck: Deck, files: list[dict[str, Any]], uncovered: Sequence[Uncovered], share: float | None
) -> dict[str, Any]:
    """deck.yaml's ``workload`` block: the files, the calls the deck covers per library, the uncovered."""
    covered = {n: sum(lib.calls or []) for n, lib in deck.libraries.items()}
    out: dict[str, Any] = {"files": files}
    if share is not None:
        out["share"] = share
    out["calls_covered"] = sum(covered.values())
    out["calls_uncovered"] = sum(u.weight for u in uncovered)
    out["calls_by_library"] = covered
    out["uncovered"] = [_uncovered_record(u) for u in uncovered]
    return out


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


def native_source(settings: Mapping[str, Any]) -> DeckSource | None:
    """The source of the native floor (config ``deck.native_floor``; None: no native floor)."""
    native = settings.get("native_floor")
    if not native:
        return None
    source = make_source(native["source"], native["path"], native["arch"], "deck.native_floor")
    if not source.ships_kernels:
        raise DeckConfigError(
            f"config field 'deck.native_floor.source': {native['source']!r} ships no kernel"
        )
    return source


def plan_native_floor(settings: Mapping[str, Any], libraries: Sequence[str]) -> tuple[str | None, list[str]]:
    """At plan time: the native floor's path (None without one) and the files the deck rule reads for the
    selected libraries it ships; a library it lacks has no native floor (upstream ships it nothing)."""
    source = native_source(settings)
    if source is None:
        return None, []
    plan = source.plan()
    served = sorted(set(libraries) & set(plan.libraries))
    source.check(served)
    arch = settings["native_floor"]["arch"]
    logic = [f for lib in served for f in plan.files[lib]] if source.name == LogicSource.name else []
    for f in logic:  # upstream's library for this GPU, by definition: not another GPU's
        if (theirs := read_architecture(f)) != arch:
            raise DeckConfigError(
                f"config field 'deck.native_floor.path': {f} is upstream's library for {theirs}, not for "
                f"{arch}, the GPU this run tunes; point it at upstream's own {arch} folder (rocm-libraries' "
                f"asm_full/{arch})"
            )
    return plan.path, plan.files_for(served)


def attach_native_floor(deck: Deck, settings: Mapping[str, Any]) -> None:
    """Give every library of ``deck`` that the native source ships its native floor (the Matching table of
    upstream's own library for the GPU), carried in deck.yaml as ``native_floor``."""
    source = native_source(settings)
    if source is None:
        return
    served = sorted(set(deck.libraries) & set(source.plan().libraries))
    if not served:
        return
    shipped = source.load(served)
    where = {
        "source": settings["native_floor"]["source"],
        "path": str(settings["native_floor"]["path"]),
        "arch": shipped.arch_source,
        "label": "native",
    }
    try:
        for name in served:
            lib = shipped.libraries[name]
            deck.libraries[name].native_floor = foreign_floor(lib, {**where, "library": name}).to_dict()
    except FloorError as exc:
        raise DeckError(str(exc)) from None


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
    """The source's whole deck, the selected libraries (None: every one) with their floors attached, the
    workload layered on (``selected.workload``: its record, None without one) and config ``deck.max_sizes``
    applied (``selected.size_cap``: what it kept, None without a cap), and what the floor is (None: the
    deck's own shipped kernels)."""
    source = run_source(settings)
    full = source.whole(libraries)
    selected = _selected(full, sorted(libraries) if libraries is not None else None, str(settings["path"]))
    layered = workload_sources(settings)
    cap = SizeCap.from_settings(settings)
    changed = layered or cap.max_sizes is not None  # the source's own libraries (its stats) stay as read
    libs = {n: copy.deepcopy(lib) for n, lib in selected.libraries.items()} if changed else selected.libraries
    selected = Deck(full.source, full.arch_source, dict(libs))
    if layered:
        selected.workload = add_workload(selected, layered, settings["workload_share"], full.libraries)
    elif isinstance(source, WorkloadSource):
        missing = source.uncovered(selected.libraries)
        for u in missing:
            if u.library and u.library in full.libraries:
                u.reason = NOT_SELECTED.format(u.library)
        selected.workload = workload_summary(selected, [_file_record(source)], missing, None)
    cap_deck(selected, cap, settings["workload_share"] if layered else 1.0)
    selected.size_cap = cap_summary(selected.libraries, cap.max_sizes)
    floor = attach_floor(selected, settings)
    attach_native_floor(selected, settings)
    return full, selected, floor


def cap_deck(deck: Deck, cap: SizeCap, share: float = 1.0) -> dict[str, dict[str, Any]]:
    """Apply config ``deck.max_sizes`` to every library of ``deck`` (:mod:`oto.deck.size_cap`: the sizes a
    workload calls first, then a spread over the rest), in place, after the workload is layered on (so its
    sizes are known) and before the floors. A workload's library gets its weights again from the calls it
    kept (``share``: config ``deck.workload_share``; 1 for a workload source), mean 1 over its kept sizes.
    Returns each capped library's record."""
    out = {}
    for name, lib in deck.libraries.items():
        record = cap_library(lib, cap)
        if record is None:
            continue
        if lib.calls is not None:
            lib.weights = weights_from_calls(lib.calls, share)
        out[name] = record
    return out


def workload_coverage(settings: Mapping[str, Any], deck: Deck) -> dict[str, Any] | None:
    """deck.yaml's ``workload`` block over the libraries ``deck`` delivers (each slice carries its own calls,
    from its own deck job): the files, the calls covered and every GEMM none of them serves, with why; None
    without a workload."""
    source = run_source(settings)
    layered = workload_sources(settings)
    if not layered and not isinstance(source, WorkloadSource):
        return None
    in_source = set(source.plan().libraries)
    files, uncovered = [], []
    for src in layered or [source]:
        _, missing = src.workload().covered_by(deck.libraries)
        for u in missing:
            if u.library:
                u.reason = (NOT_SELECTED if u.library in in_source else NOT_IN_SOURCE).format(u.library)
            uncovered.append(u)
        files.append(_file_record(src))
    return workload_summary(deck, files, uncovered, settings.get("workload_share") if layered else None)


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
