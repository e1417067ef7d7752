"""The logic writer: list-format files that Tensile reads and oto's library builder turns into TCL's .dat."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from oto.tensile.logic_writer import (
    MINIMUM_REQUIRED_VERSION,
    logic_data,
    logic_file_name,
    problem_type,
    solution_entry,
    write_logic_file,
)
from oto.tensile.native_library import build_master_library, read_logic
from oto.tensile.params import PARAMS, canonical

SHIPPED = [
    "vega10_Cijk_Ailk_Bljk_DB.yaml",
    "vega10_Cijk_Alik_Bljk_HB.yaml",
    "vega10_Cijk_Ailk_Bjlk_HHS_BH.yaml",
]
SIZE_MAPPING_KEYS = (
    "workGroup",
    "macroTile",
    "threadTile",
    "depthU",
    "globalSplitU",
    "staggerU",
    "workGroupMapping",
)


def _rows(data: list) -> list[tuple[list[int], int, float]]:
    return [(sizes, idx, gflops) for sizes, (idx, gflops) in data[7]]


def _rewrite(path: Path, data: list, solutions: list[dict], **kw) -> Path:
    return write_logic_file(
        path,
        problem_type=data[4],
        solutions=solutions,
        exact_rows=_rows(data),
        schedule=data[1],
        architecture=data[2],
        device_names=data[3],
        **kw,
    )


def _matching(lib: dict) -> dict:
    node = lib["library"]
    while node["type"] != "Matching":
        node = (
            next(iter(node["map"].values())) if node["type"] == "ProblemMap" else node["rows"][0]["library"]
        )
    return node


@pytest.mark.parametrize("name", SHIPPED)
def test_round_trip_of_shipped_file(vega10_dir, tmp_path, name):
    data = read_logic(vega10_dir / name)
    out = _rewrite(tmp_path / name, data, data[5])
    back = read_logic(out)
    assert isinstance(back, list) and len(back) >= 9
    assert back[0] == {"MinimumRequiredVersion": MINIMUM_REQUIRED_VERSION}
    assert back[1:7] == data[1:7]
    assert back[8] is None and back[10] == "DeviceEfficiency"
    for row, orig in zip(back[7], data[7], strict=True):
        sizes, (index, gflops) = row
        assert len(sizes) in (4, 8) and all(isinstance(v, int) for v in sizes)
        assert isinstance(index, int) and 0 <= index < len(back[5]) and isinstance(gflops, float)
        assert row == orig
    # The flow style of the shipped files: each exact row is two flow lists.
    assert "- - - [" in out.read_text()
    assert build_master_library([out], arch=data[2]) == build_master_library([data], arch=data[2])


def test_writer_reproduces_tensile_librarylogic_bytes(golden_dir, tmp_path):
    golden = (
        golden_dir / "librarylogic" / "winner" / "out" / "3_LibraryLogic" / "gfx90c_Cijk_Ailk_Bjlk_SB.yaml"
    )
    data = read_logic(golden)
    out = _rewrite(tmp_path / golden.name, data, data[5], minimum_required_version="4.44.0")
    assert out.read_text() == golden.read_text()


@pytest.mark.parametrize("name", SHIPPED)
def test_canonical_rewrite_builds_the_same_selection(vega10_dir, tmp_path, name):
    """A shipped file re-expressed in oto's parameters only gives TCL's table and tile geometry."""
    data = read_logic(vega10_dir / name)
    data[1] = data[2] = "gfx90c"
    params = [canonical({k: s[k] for k in PARAMS if k in s}) for s in data[5]]
    solutions = [solution_entry(data[4], p, i) for i, p in enumerate(params)]
    out = _rewrite(tmp_path / name.replace("vega10", "gfx90c"), data, solutions)
    ours = build_master_library([out], arch="gfx90c")
    shipped = build_master_library([data], arch="gfx90c")
    assert _matching(ours) == _matching(shipped)
    pick = [{k: s["sizeMapping"][k] for k in SIZE_MAPPING_KEYS} for s in ours["solutions"]]
    assert pick == [{k: s["sizeMapping"][k] for k in SIZE_MAPPING_KEYS} for s in shipped["solutions"]]
    assert all(s["SolutionNameMin"].startswith("Cijk_") for s in read_logic(out)[5])  # for readers


def test_solution_entry_from_oto_params():
    pt = problem_type("Cijk_Ailk_Bjlk_SB")
    entry = solution_entry(pt, {"ThreadTile": [8, 4], "WorkGroup": [16, 16, 1], "DepthU": 8}, 3)
    assert entry["SolutionIndex"] == 3 and entry["ProblemType"] == pt
    assert (entry["MacroTile0"], entry["MacroTile1"], entry["NumThreads"]) == (128, 64, 256)
    assert (
        entry["EdgeType"] == "ShiftPtr"
        and entry["MatrixInstruction"] == []
        and entry["KernelLanguage"] == "Assembly"
    )
    with pytest.raises(ValueError):
        solution_entry(pt, {"DepthU": 7}, 0)


def test_problem_type_of_library():
    pt = problem_type("Cijk_Ailk_Bjlk_HHS_BH")
    assert (pt["DataType"], pt["DestDataType"], pt["ComputeDataType"], pt["HighPrecisionAccumulate"]) == (
        4,
        4,
        0,
        True,
    )
    assert pt["IndexAssignmentsA"] == [0, 3, 2] and pt["IndexAssignmentsB"] == [1, 3, 2]
    assert (pt["TLUA"], pt["TLUB"]) == (True, True)
    assert problem_type("Cijk_Alik_Bljk_DB_GB")["StridedBatched"] is False


def test_generated_file_builds_for_gfx90c(tmp_path):
    pt = problem_type("Cijk_Ailk_Bjlk_SB")
    sols = [
        solution_entry(
            pt, {"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4}, 0
        ),
        solution_entry(
            pt, {"ThreadTile": [8, 8], "WorkGroup": [16, 16, 1], "DepthU": 8, "VectorWidth": 4}, 1
        ),
    ]
    rows = [([1024, 1024, 1, 1024], 1, 1187.45), ([512, 512, 1, 512], 0, 731.62)]
    path = tmp_path / logic_file_name("gfx90c", "Cijk_Ailk_Bjlk_SB")
    write_logic_file(
        path,
        problem_type=pt,
        solutions=sols,
        exact_rows=rows,
        schedule="gfx90c",
        architecture="gfx90c",
        device_names=["Device 1636"],
    )
    assert "&id" not in path.read_text()  # no anchors or aliases: rocBLAS's files have none
    parent, children = build_master_library([path], arch="gfx90c", lazy=True)
    (child,) = children.values()
    assert [s["index"] for s in child["solutions"]] == [607125504, 607125505]
    table = _matching(child)["table"]
    assert [r["key"] for r in table] == [[512, 512, 512], [1024, 1024, 1024]]
    assert [r["index"] for r in table] == [607125504, 607125505]
    names = [s["name"] for s in child["solutions"]]
    assert names[0].startswith("Cijk_Ailk_Bjlk_SB_MT64x64x16_SN_") and names[0].endswith("_TT4_4")


def test_rows_are_checked_and_distance_extends_the_list():
    pt = problem_type("Cijk_Ailk_Bljk_DB")
    sol = [solution_entry(pt, {}, 0)]
    kw = {
        "problem_type": pt,
        "solutions": sol,
        "schedule": "gfx90c",
        "architecture": "gfx90c",
        "device_names": [],
    }
    with pytest.raises(ValueError):
        logic_data(exact_rows=[([64, 64, 1, 64], 1, 1.0)], **kw)
    with pytest.raises(ValueError):
        logic_data(exact_rows=[([64, 64, 64], 0, 1.0)], **kw)
    data = logic_data(exact_rows=[([64, 64, 1, 64], 0, 2)], distance="Equality", **kw)
    assert len(data) == 13 and data[12] == "Equality" and data[7] == [[[64, 64, 1, 64], [0, 2.0]]]
    assert yaml.safe_load(yaml.safe_dump(data)) == data


def test_a_winner_that_cannot_be_written_hands_its_sizes_to_the_reference(tmp_path):
    """plan_logic judges every winner as Tensile will: an illegal one (here the FractionalLoad shipped kernel
    stripped of FractionalLoad, as canonicalisation used to leave it) is dropped, its sizes go to the size's
    reference at the reference's GFLOPS, and the logic file says so in its header."""
    from oto.gemm import Library
    from oto.tensile.legality import check
    from oto.tensile.logic_reader import LogicFileError, check_logic_files
    from oto.tensile.logic_writer import plan_logic

    lib = Library.parse("Cijk_Ailk_Bjlk_SB")
    fractional = canonical(
        dict(ThreadTile=[4, 6], WorkGroup=[16, 16, 1], DepthU=8, VectorWidth=2, GlobalReadVectorWidth=2)
    )
    assert not check(lib, fractional).valid and check(lib, {**fractional, "FractionalLoad": 1}).valid
    good = canonical(dict(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=16, VectorWidth=4))
    ref = canonical(dict(ThreadTile=[8, 8], WorkGroup=[16, 16, 1], DepthU=8, VectorWidth=4))
    per_size = [
        {"size_index": 0, "winner": "kbad", "gflops": 300.0, "score": 1.5},
        {"size_index": 1, "winner": "kgood", "gflops": 250.0, "score": 1.1},
        {"size_index": 2, "winner": None},
    ]
    sizes = [[64, 96, 1, 64], [128, 128, 1, 128], [256, 256, 1, 256]]
    refs = {0: {"id": "kref", "params": ref}, 1: {"id": "kref", "params": ref}}
    plan = plan_logic(lib, per_size, {"kbad": fractional, "kgood": good}, sizes, refs)
    assert list(plan.solutions) == ["kref", "kgood"]
    assert plan.rows == [([64, 96, 1, 64], 0, pytest.approx(200.0)), ([128, 128, 1, 128], 1, 250.0)]
    (h,) = plan.handed_over
    assert h["kernel"] == "kbad" and h["sizes"] == [[64, 96, 1, 64]] and h["to"] == "kref"
    assert "No valid DepthU found" in h["reason"]
    # without a writable reference the size gets no row (Tensile serves it from the nearest one)
    plan = plan_logic(lib, per_size, {"kbad": fractional, "kgood": good}, sizes, {})
    assert list(plan.solutions) == ["kgood"] and len(plan.rows) == 1 and plan.handed_over[0]["to"] is None

    pt = problem_type(lib)
    out = tmp_path / logic_file_name("gfx90c", lib.name)
    fields = dict(problem_type=pt, schedule="gfx90c", architecture="gfx90c", device_names=["Device 1636"])
    write_logic_file(
        out,
        solutions=[solution_entry(pt, p, i) for i, p in enumerate(plan.solutions.values())],
        exact_rows=plan.rows,
        notes=plan.notes(),
        **fields,
    )
    assert out.read_text().startswith("# oto: dropped kbad")
    assert len(check_logic_files([out])) == 1
    # package's check: a file holding a solution Tensile would not build is refused, naming it
    bad = tmp_path / "bad" / out.name
    bad.parent.mkdir()
    write_logic_file(
        bad, solutions=[solution_entry(pt, fractional, 0)], exact_rows=[([64, 96, 1, 64], 0, 1.0)], **fields
    )
    with pytest.raises(LogicFileError, match=r"entry 0 .*Tensile would not build it: .*No valid DepthU"):
        check_logic_files([bad])


def test_reference_kernels_keep_the_parameters_that_make_them_legal():
    """The shipped SB NT kernel MT64x96x8 needs FractionalLoad: the deck keeps it, so the reference is legal,
    and every shipped vega10 reference is either legal or handed to a legal one (recorded)."""
    from oto.deck.sources import load_deck
    from oto.gemm import Library
    from oto.tensile.legality import check

    deck = load_deck("manifest")
    sb = deck.libraries["Cijk_Ailk_Bjlk_SB"]
    fractional = [s for s in sb.solutions if s["params"].get("FractionalLoad")]
    assert fractional and all(check(Library.parse(sb.name), s["params"]).valid for s in fractional)
    substituted = 0
    for lib in deck.libraries.values():
        refs = lib.references(list(range(len(lib.sizes))))
        for r in refs.values():
            assert r["id"] is not None
            assert check(Library.parse(lib.name), r["params"]).valid
            substituted += "substitute" in r
    assert 0 < substituted < 200


def test_a_logic_file_says_where_its_numbers_came_from_and_tensile_reads_past_it(tmp_path):
    """The logic stage's file starts with comment lines naming its numbers (simulated: not for installing),
    backend and model version; the library built from it is the one built from the same file without them
    (YAML comments: TensileCreateLibrary loads the list with a YAML parser, as oto's builder does)."""
    from oto.deck.model import read_library_yaml, write_library_yaml
    from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
    from oto.hardware.profile import load_profile
    from oto.tensile.logic_reader import check_logic_files
    from oto.tensile.logic_writer import write_library_logic
    from oto.tensile.provenance import read_logic_header

    name = "Cijk_Ailk_Bljk_DB"
    write_library_yaml(read_manifest(SHIPPED_MANIFEST).libraries[name], tmp_path / "deck.yaml", {})
    deck = read_library_yaml(tmp_path / "deck.yaml")
    profile = load_profile(Path(__file__).resolve().parents[1] / "arch_profiles" / "gfx90c.yaml")
    ref = deck.references([0, 1])
    final = {
        "library": name,
        "provenance": {"backend": "sim", "numbers": "simulated", "model_version": "simgpu-5", "seed": 1},
        "per_size": [
            {"size_index": i, "winner": ref[i]["id"], "gflops": 2.0 + i, "score": 1.2} for i in (0, 1)
        ],
        "kernels": {ref[i]["id"]: ref[i]["params"] for i in (0, 1)},
    }
    out = tmp_path / logic_file_name("gfx90c", name)
    write_library_logic(final, deck, profile, "native", out)
    head = out.read_text().splitlines()[:2]
    assert head[0].startswith("# oto provenance: simulated — not for installing"), head
    facts = read_logic_header(out)
    assert facts["numbers"] == "simulated" and facts["backend"] == "sim"
    assert facts["model_version"] == "simgpu-5" and facts["seed"] == "1" and "oto" in facts
    assert len(check_logic_files([out])) == 1
    bare = tmp_path / "bare" / out.name
    bare.parent.mkdir()
    bare.write_text("".join(line for line in out.read_text().splitlines(True) if not line.startswith("#")))
    assert read_logic_header(bare) == {}
    assert read_logic(out) == read_logic(bare)
    assert build_master_library([out], arch="gfx90c") == build_master_library([bare], arch="gfx90c")
    # simulated numbers also say how well the model was checked on the chip, in the file, its record and the
    # package's provenance block (the report's line; for an APU, the check of its deck's chip)
    from oto.hardware.simulated.checks import final_model_check, model_check_line
    from oto.tensile.provenance import deliverable_provenance, logic_record

    check = final_model_check({**final, "shipped_gflops_arch": "gfx900"}, "gfx90c")
    assert check == model_check_line("gfx90c") and "4 of 5 within ±25%" in check
    write_library_logic(final, deck, profile, "native", out, model_check=check)
    assert out.read_text().splitlines()[1] == f"# oto provenance: {check}"
    assert read_logic_header(out)["numbers"] == "simulated" and len(check_logic_files([out])) == 1
    record = logic_record(final, out, "native", check)
    assert record["model_check"] == check and deliverable_provenance([record])["model_check"] == [check]
    apu = final_model_check(
        {"provenance": {"numbers": "simulated", "arch": "gfx1103"}, "shipped_gflops_arch": "gfx1100"},
        "gfx1103",
    )
    assert "gfx1103" in apu and "checked on gfx1100, another chip" in apu
    assert final_model_check({"provenance": {"numbers": "measured"}}, "gfx90c") is None
    assert "model_check" not in deliverable_provenance([logic_record(final, out, "native")])
    # measured numbers say so, with Tensile's version and the device
    final["provenance"] = {"backend": "tensile", "numbers": "measured", "tensile_version": "4.44.0",
                           "device": "gfx90c"}  # fmt: skip
    write_library_logic(final, deck, profile, "native", out)
    assert out.read_text().startswith("# oto provenance: measured on the GPU")
    assert read_logic_header(out)["tensile_version"] == "4.44.0"
