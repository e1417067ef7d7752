"""Deck sources as plug-ins and floors apart from the sizes to tune: one contract over every registered source
(plan cheaply, check sizes, load libraries with weights, serve as a floor), the config schema's enums tied to
the registry, a floor from another folder's shipped logic (the solution its Matching table picks), no floor
(the baseline kernel), and a deck without any Tensile kernel.

Every source reads small files this test writes itself from the manifest shipped with oto (a logic file with
oto's writer, a rocBLAS library folder with oto's native .dat writer), so nothing here needs ../shared."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from oto.config import config_schema, validate_config
from oto.deck.floors import NONE, OWN
from oto.deck.model import DeckError, LibraryDeck, current_final, read_library_yaml, write_library_yaml
from oto.deck.sources import (
    DECK_SOURCES,
    SHIPPED_MANIFEST,
    DeckConfigError,
    attach_floor,
    deck_settings,
    load_run_deck,
    make_source,
    plan_floor,
    read_manifest,
)
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.tensile import legality
from oto.tensile.baseline import LABEL, baseline_kernel
from oto.tensile.logic_writer import logic_file_name, solution_entry, write_logic_file
from oto.tensile.native_library import build_master_library, write_library
from oto.tensile.params import candidate_id

ROOT = Path(__file__).resolve().parents[1]
PROFILE = load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")
LIMITS = legality.Limits.from_profile(PROFILE)
NN, NT = "Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB"
MANIFEST = read_manifest(SHIPPED_MANIFEST)


def write_logic(
    folder: Path, lib: LibraryDeck, prefix: str = "vega10", arch: str = "gfx900", **change
) -> Path:
    """``lib`` as a Tensile logic file; ``change``: sizes / shipped to write instead of the library's."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes, shipped = change.get("sizes", lib.sizes), change.get("shipped", lib.shipped)
    return write_logic_file(
        folder / logic_file_name(prefix, lib.name),
        problem_type=lib.problem_type,
        solutions=[solution_entry(lib.problem_type, s["params"], s["index"]) for s in lib.solutions],
        exact_rows=[(s, p, g) for s, (p, g) in zip(sizes, shipped, strict=True)],
        schedule=prefix,
        architecture=arch,
        device_names=["Device 6863"],
    )


@dataclass
class SourceRig:
    path: Path | None
    arch: str | None
    libraries: list[str]  # what the source holds


def manifest_rig(tmp: Path) -> SourceRig:
    return SourceRig(None, None, sorted(MANIFEST.libraries))


def logic_rig(tmp: Path) -> SourceRig:
    for name in (NN, NT):
        write_logic(tmp / "logic", MANIFEST.libraries[name])
    return SourceRig(tmp / "logic", "gfx900", [NT, NN])


def rocblas_rig(tmp: Path) -> SourceRig:
    files = [write_logic(tmp / "src", MANIFEST.libraries[n]) for n in (NN, NT)]
    (tmp / "rocblas").mkdir()
    write_library(build_master_library(files, arch="gfx900"), tmp / "rocblas" / "TensileLibrary_gfx900.dat")
    return SourceRig(tmp / "rocblas", "gfx900", [NT, NN])


# Every registered source needs a rig: a new source is not registered until it passes the contract.
RIGS: dict[str, Callable[[Path], SourceRig]] = {
    "manifest": manifest_rig,
    "logic": logic_rig,
    "rocblas": rocblas_rig,
}


def test_every_registered_source_has_a_rig_and_the_schema_enums_are_the_registry():
    assert set(RIGS) == set(DECK_SOURCES)
    deck = config_schema()["properties"]["deck"]["properties"]
    assert deck["source"]["enum"] == list(DECK_SOURCES)
    assert deck["floor"]["properties"]["source"]["enum"] == [OWN, NONE, *DECK_SOURCES]
    assert deck["floor"]["properties"]["source"]["default"] == OWN
    with pytest.raises(DeckConfigError, match=r"config field 'deck.source': unknown deck source 'tunableop'"):
        make_source("tunableop", None, "gfx900")


@pytest.mark.parametrize("name", sorted(RIGS))
def test_deck_source_contract(name, tmp_path):
    rig = RIGS[name](tmp_path)
    cls = DECK_SOURCES[name]
    assert cls.name == name and cls.doc
    if cls.needs_path:
        with pytest.raises(
            DeckConfigError, match=rf"config field 'deck.path': required when deck.source is '{name}'"
        ):
            make_source(name, None, rig.arch)
    source = make_source(name, rig.path, rig.arch)
    plan = source.plan()
    assert plan.libraries == sorted(rig.libraries)
    every = plan.files_for()
    assert every and all(Path(f).is_file() for f in every)
    assert set(plan.files_for([NN])) <= set(every)
    source.check(plan.libraries)  # sane sizes pass

    deck = source.load()
    assert sorted(deck.libraries) == plan.libraries
    assert deck.arch_source == "gfx900" and deck.source["kind"] == name
    for lib in deck.libraries.values():
        assert len(lib.weights) == len(lib.sizes) == len(lib.shipped) and set(lib.weights) == {1.0}
        if cls.ships_kernels:
            assert lib.solutions and all(s is not None for s in lib.shipped)
    one = source.load([NN])
    assert list(one.libraries) == [NN]

    def rows(lib):  # a .dat's Matching table keeps its own order
        return sorted((tuple(s[:4]), round(g, 4)) for s, (_, g) in zip(lib.sizes, lib.shipped, strict=True))

    assert rows(one.libraries[NN]) == rows(MANIFEST.libraries[NN])
    with pytest.raises(DeckError, match="Cijk_Alik_Bljk_XB|no library|no logic file"):
        source.load([NN, "Cijk_Alik_Bljk_XB"])
    path = tmp_path / "slice" / "deck.yaml"
    write_library_yaml(one.libraries[NN], path, {})
    assert read_library_yaml(path) == one.libraries[NN]

    if cls.ships_kernels:  # it can be another deck's floor: every size gets a kernel
        settings = {
            "source": "manifest",
            "path": None,
            "arch": "gfx900",
            "floor": {"source": name, "path": rig.path},
        }
        chosen = MANIFEST.select(["DB"], ["NN"])
        chosen = type(chosen)(chosen.source, chosen.arch_source, {NN: copy.deepcopy(chosen.libraries[NN])})
        attach_floor(chosen, settings)
        refs = chosen.libraries[NN].references(range(len(chosen.libraries[NN].sizes)), LIMITS)
        # every size gets a kernel, or says why none of the floor's can be built (a .dat keeps only some
        # knobs: oto's reader defaults the others, see oto.tensile.dat_reader)
        assert all(r["id"] or r["substitute"]["reason"] for r in refs.values())


def _euclid(a, b) -> int:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2 + (a[3] - b[3]) ** 2


def test_a_floor_from_another_folder_is_what_its_matching_table_picks(tmp_path):
    """The floor of each deck size is the solution the floor library's nearest shipped size runs (Euclidean in
    M, N, K), not the deck's own shipped solution; the floor travels in the library's deck.yaml."""
    own = MANIFEST.libraries[NN]
    write_logic(tmp_path / "deck", own)
    # another arch's library of the same problem type: other sizes, other picks
    sizes = [[2 * s[0] + 3, 2 * s[1], 1, s[3] + 32] for s in own.sizes]
    shipped = [[(p + 1) % len(own.solutions), 2 * g] for p, g in own.shipped]
    write_logic(tmp_path / "navi21", own, prefix="navi21", arch="gfx1030", sizes=sizes, shipped=shipped)
    config = validate_config(
        {"arch": "gfx90c", "families": ["DB"], "deck": {"source": "logic", "path": str(tmp_path / "deck"),
         "floor": {"source": "logic", "path": str(tmp_path / "navi21")}}}
    )  # fmt: skip
    settings = deck_settings(config["deck"], PROFILE)
    assert settings["arch"] == "gfx900"  # the profile's stock library: what a rocBLAS folder is read for
    path, files = plan_floor(settings, [NN])
    assert path == str(tmp_path / "navi21") and [Path(f).name for f in files[NN]] == [f"navi21_{NN}.yaml"]
    _, selected, floor = load_run_deck(settings, [NN])
    assert floor == {"source": "logic", "path": str(tmp_path / "navi21"), "arch": "gfx1030"}
    lib = selected.libraries[NN]
    refs = lib.references(list(range(len(lib.sizes))), LIMITS)
    library = Library.parse(NN)
    for i, size in enumerate(lib.sizes):
        nearest = min(range(len(sizes)), key=lambda j: (_euclid(sizes[j], size), j))
        want = legality.resolve(library, own.solutions[shipped[nearest][0]]["params"], LIMITS)
        assert refs[i]["id"] == candidate_id(want) and "substitute" not in refs[i]
    own_refs = own.references(list(range(len(own.sizes))), LIMITS)
    assert [r["id"] for r in refs.values()] != [r["id"] for r in own_refs.values()]
    assert lib.reference_floor().note(lib).startswith("floor: the shipped gfx1030 solution")
    path = tmp_path / NN / "deck.yaml"
    write_library_yaml(lib, path, {})
    back = read_library_yaml(path)
    assert back.references(list(range(len(back.sizes))), LIMITS) == refs
    assert back.shipped == own.shipped  # the deck's own shipped figures stay the deck's


def test_a_floor_source_without_the_library_fails_the_plan_naming_it(tmp_path):
    write_logic(tmp_path / "navi21", MANIFEST.libraries[NT], prefix="navi21", arch="gfx1030")
    settings = {"source": "manifest", "path": None, "arch": "gfx900",
                "floor": {"source": "logic", "path": str(tmp_path / "navi21")}}  # fmt: skip
    with pytest.raises(DeckConfigError, match=rf"config field 'deck.floor': .*navi21 has no library {NN}"):
        plan_floor(settings, [NN, NT])
    settings["floor"] = {"source": "logic", "path": None}
    with pytest.raises(DeckConfigError, match="config field 'deck.floor.path': required"):
        plan_floor(settings, [NT])


def test_floor_none_races_every_size_against_the_baseline_kernel():
    settings = {"source": "manifest", "path": None, "arch": "gfx900", "floor": {"source": NONE, "path": None}}
    _, selected, floor = load_run_deck(settings, [NN])
    assert floor == {"source": NONE, "kernel": "baseline", "label": LABEL} and "no shipped kernel" in LABEL
    lib = selected.libraries[NN]
    refs = lib.references([0, 3, 5], LIMITS)
    base = baseline_kernel(Library.parse(NN), LIMITS)
    assert {r["id"] for r in refs.values()} == {candidate_id(base)} and all(
        r["baseline"] for r in refs.values()
    )
    assert legality.check(Library.parse(NN), base, LIMITS).valid
    assert candidate_id(base) not in {candidate_id(s["params"]) for s in lib.solutions}
    assert baseline_kernel(Library.parse(NN), LIMITS) == base  # deterministic


def test_a_deck_without_tensile_kernels_needs_a_floor_from_elsewhere(tmp_path):
    """A library with sizes and weights but no shipped kernel (a workload deck) is a valid deck; its floor is
    another source's or the baseline, never its own."""
    figures = MANIFEST.libraries[NN].figures()
    bare = LibraryDeck(**{**figures, "solutions": [], "shipped": [None] * len(figures["sizes"])},
                       weights=[3.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # fmt: skip
    path = tmp_path / "bare.yaml"
    write_library_yaml(bare, path, {})
    back = read_library_yaml(path)
    assert back == bare and back.shipped_gflops(0) is None and back.shipped_arch() is None
    deck = type(MANIFEST)({"kind": "test"}, "none", {NN: back})
    with pytest.raises(DeckError, match=f"{NN}: no shipped Tensile kernel to be the floor; set deck.floor"):
        attach_floor(deck, {"floor": {"source": OWN, "path": None}})
    attach_floor(deck, {"floor": {"source": NONE, "path": None}})
    assert all(r["baseline"] for r in back.references([0, 1], LIMITS).values())
    write_logic(tmp_path / "floor", MANIFEST.libraries[NN], prefix="navi21", arch="gfx1030")
    attach_floor(deck, {"arch": "gfx900", "floor": {"source": "logic", "path": str(tmp_path / "floor")}})
    assert all(r["id"] for r in back.references(list(range(8)), LIMITS).values())


def test_weights_are_carried_and_checked():
    lib = MANIFEST.libraries[NN]
    assert lib.weights == [1.0] * len(lib.sizes)
    # the manifest holds figures only, so its bytes stay (test_deck.py derives it from the logic files)
    assert "weights" not in lib.figures() and "weights" in lib.to_dict()
    doc = lib.to_dict()
    for bad, says in (
        ([1.0] * 3, "8 sizes but 3 weights entries"),
        ([0.0] * 8, r"weights\[0\] = 0.0 is not"),
    ):
        with pytest.raises(DeckError, match=says):
            LibraryDeck.from_dict({**doc, "weights": bad}, "deck.yaml")
    older = {k: v for k, v in doc.items() if k != "weights"}  # a deck.yaml written before weights
    assert LibraryDeck.from_dict(older, "deck.yaml").weights == [1.0] * 8


def test_an_older_final_reads_with_the_arch_neutral_names():
    old = {
        "library": NN,
        "per_size": [{"size_index": 0, "shipped": "k1", "shipped_gflops_gfx900": 1.5, "race": "tie"}],
    }
    new = current_final(old)
    assert new["per_size"] == [{"size_index": 0, "shipped": "k1", "shipped_gflops": 1.5, "race": "tie"}]
    assert new["shipped_gflops_arch"] == "gfx900" and "shipped_gflops_arch" not in old
    assert current_final(new) == new
