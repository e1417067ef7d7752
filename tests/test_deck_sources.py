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
    FLOOR_SOURCES,
    SHIPPED_MANIFEST,
    WORKLOAD_SOURCES,
    DeckConfigError,
    attach_floor,
    deck_settings,
    load_run_deck,
    make_source,
    plan_floor,
    plan_workload,
    read_manifest,
    write_manifest,
)
from oto.deck.tuning_sizes import deck_tuning_indices, tuning_indices
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.search.candidates import candidates_document
from oto.tensile import legality
from oto.tensile.baseline import LABEL, baseline_kernel
from oto.tensile.logic_reader import LogicFileError
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


# A workload's GEMMs (double: the DB libraries), with their call counts, as each recorder writes them.
WORKLOAD_CALLS = {NN: {(512, 512, 1, 2048): 3, (96, 4096, 1, 64): 1}, NT: {(4096, 4096, 1, 64): 2}}


def tunableop_rig(tmp: Path) -> SourceRig:
    lines = []
    for name, sizes in WORKLOAD_CALLS.items():
        tb = "t" if name == NT else "n"
        for (m, n, _, k), calls in sizes.items():
            ldb = n if tb == "t" else k
            lines += [f"GemmTunableOp_double_N{tb.upper()},n{tb}_{m}_{n}_{k}_ld_{m}_{ldb}_{m}"] * calls
    lines.append("GemmTunableOp_float_NN,nn_64_64_64_ld_64_64_64")  # another library: not in the deck's rig
    path = tmp / "tunableop_untuned0.csv"
    path.write_text("\n".join(lines) + "\n")
    return SourceRig(path, "gfx900", [NT, NN, "Cijk_Ailk_Bljk_SB"])


def rocblas_log_rig(tmp: Path) -> SourceRig:
    lines = ['- { rocblas_function: "rocblas_daxpy", atomics_mode: 1, N: 1024, call_count: 30 }']
    for name, sizes in WORKLOAD_CALLS.items():
        tb = "T" if name == NT else "N"
        for (m, n, _, k), calls in sizes.items():
            ldb = n if tb == "T" else k
            lines.append(
                f"- {{ rocblas_function: \"rocblas_dgemm\", atomics_mode: 1, transA: 'N', transB: '{tb}', "
                f"M: {m}, N: {n}, K: {k}, alpha: 1.0, lda: {m}, ldb: {ldb}, beta: 0.0, ldc: {m}, "
                f"call_count: {calls} }}"
            )
    path = tmp / "rocblas_profile.yaml"
    path.write_text("\n".join(lines) + "\n")
    return SourceRig(path, "gfx900", [NT, NN])


# Every registered source needs a rig: a new source is not registered until it passes the contract.
RIGS: dict[str, Callable[[Path], SourceRig]] = {
    "manifest": manifest_rig,
    "logic": logic_rig,
    "rocblas": rocblas_rig,
    "tunableop": tunableop_rig,
    "rocblas-log": rocblas_log_rig,
}


def _bad_size(name: str, rig: SourceRig, tmp: Path) -> tuple[Path, str]:
    """The rig's source with one size zero (M = 0; a workload's: negative): the file it is in, and what the
    message must name."""
    if name == "manifest":
        lib = copy.deepcopy(MANIFEST.libraries[NN])
        lib.sizes[2] = [0, *lib.sizes[2][1:]]
        path = tmp / "bad.json.gz"
        write_manifest(type(MANIFEST)(MANIFEST.source, "gfx900", {NN: lib}), path)
        return path, rf"bad.json.gz: {NN}: sizes\[2\] \[0, "
    if name == "logic":
        lib = MANIFEST.libraries[NN]
        write_logic(tmp / "bad", lib, sizes=[[0, *lib.sizes[0][1:]], *lib.sizes[1:]])
        return tmp / "bad", rf"vega10_{NN}.yaml: element 7 \(exact logic\) row 0 \[0, .*M = 0"
    if name == "rocblas":  # oto's .dat writer takes only readable logic files; the reader's tests cover it
        return None, ""
    # a workload: a negative size (rocBLAS logs a zero one it returns from at once: uncovered, not bad)
    text = rig.path.read_text().splitlines()
    text[1] = text[1].replace("512_512_2048", "-512_512_2048").replace("M: 512,", "M: -512,")
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / rig.path.name
    path.write_text("\n".join(text) + "\n")
    return path, rf"{rig.path.name}:2: "


def test_every_registered_source_has_a_rig_and_the_schema_enums_are_the_registry():
    assert set(RIGS) == set(DECK_SOURCES)
    deck = config_schema()["properties"]["deck"]["properties"]
    assert deck["source"]["enum"] == list(DECK_SOURCES)
    assert deck["floor"]["properties"]["source"]["enum"] == [OWN, NONE, *FLOOR_SOURCES]
    assert [n for n, s in DECK_SOURCES.items() if s.ships_kernels] == FLOOR_SOURCES
    assert deck["native_floor"]["properties"]["source"]["enum"] == list(FLOOR_SOURCES)
    assert deck["floor"]["properties"]["source"]["default"] == OWN
    assert deck["workload"]["items"]["properties"]["source"]["enum"] == WORKLOAD_SOURCES
    assert set(WORKLOAD_SOURCES) == {n for n, s in DECK_SOURCES.items() if not s.ships_kernels}
    for name in DECK_SOURCES:  # every source is described in the schema
        assert f"{name}:" in deck["source"]["description"], name
    with pytest.raises(DeckConfigError, match=r"config field 'deck.source': unknown deck source 'pytorch'"):
        make_source("pytorch", None, "gfx900")


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
        assert len(lib.weights) == len(lib.sizes) == len(lib.shipped)
        if cls.ships_kernels:  # every shipped size weighs alike
            assert lib.solutions and all(s is not None for s in lib.shipped) and set(lib.weights) == {1.0}
        else:  # a workload's: weighted by call count (mean 1), nothing shipped
            assert not lib.solutions and set(map(str, lib.shipped)) == {"None"}
            assert lib.weights == pytest.approx([len(lib.calls) * c / sum(lib.calls) for c in lib.calls])
    one = source.load([NN])
    assert list(one.libraries) == [NN]
    whole = source.whole([NN])  # the deck rule's view: every name and count, the tuned library as load's
    assert sorted(whole.libraries) == plan.libraries and whole.stats() == deck.stats()
    assert whole.libraries[NN] == one.libraries[NN] == deck.libraries[NN]

    def rows(lib):  # a .dat's Matching table keeps its own order
        return sorted((tuple(s[:4]), round(g, 4)) for s, (_, g) in zip(lib.sizes, lib.shipped, strict=True))

    if cls.ships_kernels:
        assert rows(one.libraries[NN]) == rows(MANIFEST.libraries[NN])
    else:
        lib = one.libraries[NN]
        assert dict(zip(map(tuple, lib.sizes), lib.calls, strict=True)) == WORKLOAD_CALLS[NN]
    with pytest.raises(DeckError, match="Cijk_Alik_Bljk_XB|no library|no logic file"):
        source.load([NN, "Cijk_Alik_Bljk_XB"])
    path = tmp_path / "slice" / "deck.yaml"
    write_library_yaml(one.libraries[NN], path, {})
    assert read_library_yaml(path) == one.libraries[NN]

    bad, says = _bad_size(name, rig, tmp_path / "bad")
    if bad is not None:  # a bad size fails the plan or the check, naming the file and the row or line
        with pytest.raises((DeckError, LogicFileError), match=says):
            broken = make_source(name, bad, rig.arch)
            broken.check(broken.plan().libraries)

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


def test_a_workload_layered_on_the_shipped_deck_keeps_every_size_and_weighs_by_calls(tmp_path):
    """config deck.workload: the shipped footprint stays whole, the workload's sizes gain their calls (a size
    the deck lacks is added, raced against what the library's Matching table picks there), and every GEMM
    the run does not tune is reported as uncovered with why."""
    rig = tunableop_rig(tmp_path)
    config = validate_config(
        {"arch": "gfx90c", "families": ["DB"], "patterns": ["NN", "NT"],
         "deck": {"workload": [{"source": "tunableop", "path": str(rig.path)}], "workload_share": 0.8}}
    )  # fmt: skip
    settings = deck_settings(config["deck"], PROFILE)
    assert plan_workload(settings) == [str(rig.path)]
    full, selected, _ = load_run_deck(settings, [NN])
    lib, shipped = selected.libraries[NN], MANIFEST.libraries[NN]
    assert lib.sizes[: len(shipped.sizes)] == shipped.sizes and full.libraries[NN].sizes == shipped.sizes
    calls = {tuple(s[:4]): c for s, c in zip(lib.sizes, lib.calls, strict=True) if c}
    assert calls == WORKLOAD_CALLS[NN]
    added = [i for i, s in enumerate(lib.sizes) if lib.shipped[i] is None]
    assert {tuple(lib.sizes[i][:4]) for i in added} == {k for k in WORKLOAD_CALLS[NN] if list(k) not in
                                                        [s[:4] for s in shipped.sizes]}  # fmt: skip
    assert sum(lib.weights) == pytest.approx(len(lib.sizes))  # mean 1
    heavy = lib.sizes.index([512, 512, 1, 2048])  # 3 of the library's 4 calls
    assert lib.weights[heavy] == pytest.approx(0.8 * len(lib.sizes) * 3 / 4 + 0.2)
    assert lib.weights[0] == pytest.approx(0.2)  # a footprint size the workload does not call
    refs = lib.references(added, LIMITS)
    assert all(r["id"] for r in refs.values())  # the Matching table's pick at the nearest shipped size
    w = selected.workload
    assert w["calls_covered"] == 4 and w["calls_uncovered"] == 3 and w["share"] == 0.8
    reasons = {u["library"]: u["reason"] for u in w["uncovered"]}
    assert "not selected in this run" in reasons[NT] and "deck source has no" not in reasons[NT]
    assert (
        reasons["Cijk_Ailk_Bljk_SB"] == "library Cijk_Ailk_Bljk_SB is not selected in this run (config "
        "families, patterns, shard)"
    )
    # the weights steer the tuning sizes: the workload's sizes are among them
    idx = deck_tuning_indices(lib, 8)
    assert {i for i, c in enumerate(lib.calls) if c} <= set(idx) and len(idx) == 8
    assert deck_tuning_indices(shipped, 8) == tuning_indices(shipped.sizes, 8)  # uniform: as before
    path = tmp_path / "slice.yaml"
    write_library_yaml(lib, path, {})
    assert read_library_yaml(path) == lib


def test_a_bad_workload_fails_the_plan_naming_file_and_line(tmp_path):
    truncated = tmp_path / "tunableop_untuned0.csv"
    truncated.write_text("GemmTunableOp_double_NN,nn_64_64_64_ld_64_64_64\nGemmTunableOp_double_NN,nn_12")
    other = tmp_path / "old.csv"  # a line of a form no PyTorch version writes
    other.write_text("Validator,PT_VERSION,1.13.0\nGemmTunableOp_double_NN,nn_64_64\n")
    for path, says in (
        (truncated, r"tunableop_untuned0.csv:2: truncated"),
        (other, r"old.csv:2: params signature .* \(the file's validators say PyTorch 1.13.0\)"),
    ):
        settings = {"source": "manifest", "path": None, "arch": "gfx900",
                    "floor": {"source": OWN, "path": None},
                    "workload": [{"source": "tunableop", "path": str(path)}],
                    "workload_share": 0.9}  # fmt: skip
        with pytest.raises(DeckError, match=says):
            plan_workload(settings)
    settings["workload"] = [{"source": "logic", "path": str(tmp_path)}]
    with pytest.raises(DeckConfigError, match=r"'deck.workload\[0\].source': 'logic' is not a workload"):
        plan_workload(settings)
    with pytest.raises(DeckConfigError, match=r"'deck.path': .*missing.csv is not a file"):
        make_source("rocblas-log", tmp_path / "missing.csv", "gfx900").plan()


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("tunableop", "a,b,c\n1,2,3\n", r"2 line\(s\) oto cannot read as a tunableop workload: other\.csv:1"),
        ("rocblas-log", "./rocblas-bench -f axpy -r f32_r -n 1024 --alpha 2\n",
         r"no GEMM oto has a Tensile library for \(only other BLAS calls: axpy 1\)"),
    ],
)  # fmt: skip
def test_a_workload_without_a_gemm_says_what_it_holds(tmp_path, name, text, says):
    """A file of another form is a file oto cannot read (its lines named), not one without a GEMM; a log of
    other BLAS calls says which."""
    path = tmp_path / ("other.csv" if name == "tunableop" else "other.log")
    path.write_text(text)
    with pytest.raises(DeckError, match=says):
        make_source(name, path, PROFILE).plan()


def test_a_floor_kernel_quarantined_on_this_gpu_hands_its_sizes_to_the_nearest_other():
    """A spoof kernel that took this GPU down (the GPU-reset quarantine) is no yardstick for a generation: its
    sizes race the nearest shipped size's other kernel, and candidates.yaml says which and why."""
    own = MANIFEST.libraries[NN]
    indices = list(range(len(own.sizes)))
    refs = own.references(indices, LIMITS)
    hung = refs[0]["id"]
    served = [i for i in indices if refs[i]["id"] == hung]
    avoided = own.references(indices, LIMITS, {hung: "it took the GPU down (gpu_reset)"})
    for i in indices:
        if i in served:
            note = avoided[i]["substitute"]
            assert avoided[i]["id"] not in (None, hung)
            assert note["reason"] == "quarantined on this GPU: it took the GPU down (gpu_reset)"
        else:
            assert avoided[i] == refs[i]
    doc = candidates_document(own, 0, False, [], indices, LIMITS, set(), avoid={hung: "gpu_reset"})
    assert hung not in {k["id"] for k in doc["kernels"]} and set(doc["reference_substitutes"]) == set(served)
