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
