from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from oto.deck.sources import library_from_logic
from oto.tensile.logic_reader import (
    LogicFileError,
    fix_solution_indices,
    problem_type_name,
    read_architecture,
    read_exact_rows,
    read_logic_file,
)

DB_NN = "vega10_Cijk_Ailk_Bljk_DB.yaml"


def _load(path: Path) -> list:
    return yaml.load(path.read_text(), Loader=yaml.CSafeLoader)


def _write(path: Path, data) -> Path:
    path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper))
    return path


def test_db_nn_fields(vega10_dir):
    lf = read_logic_file(vega10_dir / DB_NN)
    assert lf.library_name == "Cijk_Ailk_Bljk_DB"
    assert (lf.minimum_required_version, lf.schedule, lf.architecture) == ("4.6.0", "vega10", "gfx900")
    assert lf.index_order == [2, 3, 0, 1]
    assert (lf.distance, lf.perf_metric, lf.key_length) == ("Euclidean", "DeviceEfficiency", 4)
    assert len(lf.solutions) == 4 and len(lf.exact_rows) == 8
    assert lf.exact_rows[2] == ((64, 64, 1, 256), 1, 10.7238)
    assert "Vega 10 [Radeon Instinct MI25 MxGPU]" in lf.device_names


def test_hb_restarted_indices_are_repaired_and_rows_use_positions(vega10_dir):
    lf = read_logic_file(vega10_dir / "vega10_Cijk_Ailk_Bljk_HB.yaml")
    raw = [s["SolutionIndex"] for s in lf.solutions]
    assert raw[78] == 0  # the file restarts its numbering part-way
    assert lf.solution_indices == list(range(85))
    # Tensile's MatchingLibrary indexes the solutions list by position, so rows reach past the restart.
    assert max(r[1] for r in lf.exact_rows) == 84


def test_fix_solution_indices_follows_tensile():
    assert fix_solution_indices([0, 1, None, 1, 5]) == [0, 1, 6, 7, 5]
    assert fix_solution_indices([None, None]) == [0, 1]


@pytest.mark.parametrize(
    "pt, name",
    [
        ({"DataType": 0, "TransposeA": False, "TransposeB": False}, "Cijk_Ailk_Bljk_SB"),
        (
            {
                "DataType": 4,
                "DestDataType": 4,
                "ComputeDataType": 0,
                "HighPrecisionAccumulate": True,
                "TransposeA": False,
                "TransposeB": True,
            },
            "Cijk_Ailk_Bjlk_HHS_BH",
        ),
        (
            {"DataType": 4, "HighPrecisionAccumulate": True, "TransposeA": True, "TransposeB": False},
            "Cijk_Alik_Bljk_HHS_BH",
        ),  # HHH + HPA is Tensile's HHS
        (
            {
                "DataType": "h",
                "DestDataType": "s",
                "ComputeDataType": "s",
                "HighPrecisionAccumulate": True,
                "TransposeA": True,
                "TransposeB": True,
            },
            "Cijk_Alik_Bjlk_HSS_BH",
        ),
        (
            {"DataType": 3, "StridedBatched": False, "TransposeA": True, "ComplexConjugateA": True},
            "Cijk_AlikC_Bjlk_ZB_GB",
        ),
        (
            {
                "OperationType": "TensorContraction",
                "DataType": 0,
                "IndexAssignmentsA": [0, 3, 2],
                "IndexAssignmentsB": [3, 1, 2],
                "UseInitialStridesAB": True,
                "UseInitialStridesCD": True,
            },
            "Cijk_Ailk_Bljk_SBIIc",
        ),
    ],
)
def test_problem_type_name(pt, name):
    assert problem_type_name(pt) == name


def test_truncated_file(vega10_dir, tmp_path):
    text = (vega10_dir / DB_NN).read_bytes()
    for cut in (len(text) // 2, 300):
        bad = tmp_path / f"cut{cut}_{DB_NN}"
        bad.write_bytes(text[:cut])
        with pytest.raises(LogicFileError, match=bad.name):
            read_logic_file(bad)


def test_non_list_and_dict_format(tmp_path):
    with pytest.raises(LogicFileError, match=r"x\.yaml: top level is str"):
        read_logic_file(_write(tmp_path / "x.yaml", "just text"))
    with pytest.raises(LogicFileError, match=r"d\.yaml: dict-format library logic \(DictLibraryLogic\)"):
        read_logic_file(_write(tmp_path / "d.yaml", {"Solutions": [], "LibraryType": "Matching"}))
    with pytest.raises(LogicFileError, match=r"s\.yaml: list has 3 elements"):
        read_logic_file(_write(tmp_path / "s.yaml", [1, 2, 3]))


def test_malformed_exact_row(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    data[7][3] = [[64, 64], [0]]
    with pytest.raises(LogicFileError, match=rf"{DB_NN}: element 7 \(exact logic\) row 3: expected"):
        read_logic_file(_write(tmp_path / DB_NN, data))


def test_solution_index_out_of_range(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    data[7][5][1][0] = 4
    with pytest.raises(
        LogicFileError, match=r"element 7 \(exact logic\) row 5: solution index 4 out of range"
    ):
        read_logic_file(_write(tmp_path / DB_NN, data))


def test_unknown_datatype_enum(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    data[4]["DataType"] = 42
    with pytest.raises(LogicFileError, match=rf"{DB_NN}: element 4 \(problem type\) field DataType: unknown"):
        read_logic_file(_write(tmp_path / DB_NN, data))


def test_problem_type_must_match_file_name(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    with pytest.raises(
        LogicFileError, match="describes Cijk_Ailk_Bljk_DB, the file name says Cijk_Ailk_Bljk_SB"
    ):
        read_logic_file(_write(tmp_path / "vega10_Cijk_Ailk_Bljk_SB.yaml", data))


def test_illegal_solution_params_name_the_solution(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    data[5][2]["ThreadTile"] = [32, 4]
    lf = read_logic_file(_write(tmp_path / DB_NN, data))
    with pytest.raises(LogicFileError, match=r"element 5 \(solutions\) entry 2: ThreadTile"):
        library_from_logic(lf)


@pytest.mark.parametrize(
    ("size", "why"),
    [
        ([-64, 64, 1, 64], "M = -64 is outside"),
        ([64, 64, 0, 64], "B = 0 is outside"),
        ([64, 2**31, 1, 64], "N = 2147483648"),
    ],
)
def test_zero_negative_or_huge_sizes_are_refused_naming_file_and_row(vega10_dir, tmp_path, size, why):
    data = _load(vega10_dir / DB_NN)
    data[7][4][0] = size
    path = _write(tmp_path / DB_NN, data)
    pattern = rf"{DB_NN}: element 7 \(exact logic\) row 4 \[.*\]: {why}"
    with pytest.raises(LogicFileError, match=pattern):
        read_logic_file(path)
    with pytest.raises(LogicFileError, match=pattern):  # the dry-run's fast reader says the same
        read_exact_rows(path)


def test_the_fast_exact_row_reader_matches_the_full_parse(vega10_dir):
    for name in (DB_NN, "vega10_Cijk_Ailk_Bljk_HB.yaml"):
        assert read_exact_rows(vega10_dir / name) == read_logic_file(vega10_dir / name).exact_rows


def test_a_nan_gflops_in_an_exact_row_is_refused(vega10_dir, tmp_path):
    data = _load(vega10_dir / DB_NN)
    data[7][2][1][1] = float("nan")
    with pytest.raises(LogicFileError, match=r"row 2 \[.*\]: GFLOPS nan is not a finite"):
        read_exact_rows(_write(tmp_path / DB_NN, data))


def test_the_architecture_is_read_from_the_head_of_a_file_in_any_layout(vega10_dir, tmp_path):
    """Whose library a file is, for the dry-run, from its first elements: a name or an ``{Architecture:
    ...}`` mapping; a file not in block layout is parsed whole; a mapping without the name is named."""
    assert read_architecture(vega10_dir / DB_NN) == read_logic_file(vega10_dir / DB_NN).architecture
    data = _load(vega10_dir / DB_NN)
    data[2] = {"Architecture": "gfx1103", "CUCount": 12}
    assert read_architecture(_write(tmp_path / DB_NN, data)) == "gfx1103"
    flow = tmp_path / "flow.yaml"
    flow.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper, default_flow_style=True))
    assert not flow.read_text().startswith("-") and read_architecture(flow) == "gfx1103"
    data[2] = {"CUCount": 12}
    with pytest.raises(LogicFileError, match=r"element 2 \(architecture\) dict has no 'Architecture' field"):
        read_architecture(_write(tmp_path / DB_NN, data))
