from __future__ import annotations

import shutil

import msgpack
import pytest
from oto.deck.sources import deck_from_logic_files, deck_from_rocblas_dir
from oto.tensile.dat_reader import DatFileError, name_params, read_dat_file, read_rocblas_dir
from oto.tensile.logic_reader import read_logic_file

CASES = {
    "DB_NN": "vega10_Cijk_Ailk_Bljk_DB.yaml",
    "HB_TN": "vega10_Cijk_Alik_Bljk_HB.yaml",
    "HHS_BH_NT": "vega10_Cijk_Ailk_Bjlk_HHS_BH.yaml",
}


def _only(deck):
    assert len(deck.libraries) == 1
    return next(iter(deck.libraries.values()))


@pytest.mark.parametrize("mode", ["gfx900-lazy-msgpack", "gfx900-merged-yaml"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_dat_deck_matches_logic_deck(golden_dir, vega10_dir, mode, case):
    dat = deck_from_rocblas_dir(golden_dir / "tcl" / mode / case, "gfx900")
    logic = deck_from_logic_files([read_logic_file(vega10_dir / CASES[case])])
    assert list(dat.libraries) == list(logic.libraries)
    d, g = _only(dat), _only(logic)
    assert d.family == g.family and d.pattern == g.pattern
    assert {(s[0], s[1], s[3]) for s in d.sizes} == {(s[0], s[1], s[3]) for s in g.sizes}
    assert all(s[2] == 1 for s in d.sizes)
    assert len(d.solutions) == len(g.solutions)
    # The size mapping always yields these; the solution name adds what varies within the library.
    defaulted = set(d.logic["defaulted_params"])
    assert not defaulted & {
        "ThreadTile",
        "WorkGroup",
        "DepthU",
        "GlobalSplitU",
        "WorkGroupMapping",
        "KernelLanguage",
    }
    recovered = [p for p in d.solutions[0]["params"] if p not in defaulted]
    shipped = {(s[0], s[1], s[3]): sh for s, sh in zip(g.sizes, g.shipped, strict=True)}
    for size, (pos, gflops) in zip(d.sizes, d.shipped, strict=True):
        g_pos, g_gflops = shipped[(size[0], size[1], size[3])]
        assert gflops == g_gflops
        # .get: an Assert*ElementMultiple of 1 is left out of a kernel's parameters (Tensile's default)
        got = {p: d.solutions[pos]["params"].get(p) for p in recovered}
        want = {p: g.solutions[g_pos]["params"].get(p) for p in recovered}
        assert got == want, size


def test_problem_type_recovered(golden_dir, vega10_dir):
    dl = read_rocblas_dir(golden_dir / "tcl" / "gfx900-lazy-msgpack" / "HHS_BH_NT", "gfx900")[0]
    lf = read_logic_file(vega10_dir / CASES["HHS_BH_NT"])
    assert dl.library_name == lf.library_name == "Cijk_Ailk_Bjlk_HHS_BH"
    for key, value in dl.problem_type.items():
        if key in lf.problem_type:
            assert lf.problem_type[key] == value, key
    assert dl.problem_type["ComputeDataType"] == 0  # HPA half accumulates in float


def test_gfx90c_library_is_skipped_unless_asked(golden_dir, tmp_path):
    folder = golden_dir / "tcl" / "gfx90c-lazy-msgpack" / "DB_NN"
    with pytest.raises(DatFileError, match="TensileLibrary_gfx900.dat or TensileLibrary.dat"):
        read_rocblas_dir(folder, "gfx900")
    # Under the merged name the file is found, but its only hardware row is gfx90c.
    shutil.copy(folder / "TensileLibrary_lazy_gfx90c.dat", tmp_path / "TensileLibrary.dat")
    with pytest.raises(DatFileError, match="TensileLibrary.dat: no library for gfx900$"):
        read_rocblas_dir(tmp_path, "gfx900")
    (lib,) = read_rocblas_dir(folder, arch="gfx90c")
    assert lib.architecture == "gfx90c" and lib.library_name == "Cijk_Ailk_Bljk_DB"
    assert lib.solutions[0]["index"] == 607125504  # int('90c', 16) << 18


def test_fallback_rows_read_only_when_asked(golden_dir, tmp_path):
    src = golden_dir / "tcl" / "gfx900-lazy-msgpack" / "DB_NN"
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    parent = read_dat_file(tmp_path / "TensileLibrary_lazy_gfx900.dat")
    parent["library"]["rows"][0]["predicate"] = {"type": "TruePred"}
    (tmp_path / "TensileLibrary_lazy_gfx900.dat").write_bytes(msgpack.packb(parent))
    with pytest.raises(DatFileError, match="no library for gfx900$"):
        read_rocblas_dir(tmp_path, "gfx900")
    (lib,) = read_rocblas_dir(tmp_path, "gfx900", fallback=True)
    assert lib.architecture == "fallback" and len(lib.rows) == 8


def test_name_params():
    name = "Cijk_Alik_Bljk_HB_MT32x8x8_SN_EPS1_GLVWA2_GRVW2_GSU1_LPB0_PGR1_TT2_2_VW2_VWB2_WG16_4_1_WGM1"
    assert name_params(name) == {
        "GlobalReadVectorWidth": 2,
        "LdsPadB": 0,
        "PrefetchGlobalRead": 1,
        "VectorWidth": 2,
    }
    assert name_params("X_MT64x64x8_SN_1LDSB1_GRVWn1_IU2_LPA4_PLR3") == {
        "1LDSBuffer": 1,
        "GlobalReadVectorWidth": -1,
        "InnerUnroll": 2,
        "LdsPadA": 4,
        "PrefetchLocalRead": 3,
    }


def test_not_msgpack(tmp_path):
    bad = tmp_path / "TensileLibrary_lazy_gfx900.dat"
    bad.write_bytes(b"\xc1 this is not msgpack")
    with pytest.raises(DatFileError, match="TensileLibrary_lazy_gfx900.dat: not a msgpack file"):
        read_rocblas_dir(tmp_path, "gfx900")


def test_truncated_dat(golden_dir, tmp_path):
    src = golden_dir / "tcl" / "gfx900-lazy-msgpack" / "HB_TN"
    for f in src.iterdir():
        data = f.read_bytes()
        (tmp_path / f.name).write_bytes(data if "lazy" in f.name else data[: len(data) // 2])
    with pytest.raises(
        DatFileError, match=r"TensileLibrary_Type_HH_Contraction_l_Alik_Bljk_Cijk_Dijk_gfx900\.dat: not a"
    ):
        read_rocblas_dir(tmp_path, "gfx900")


def test_wrong_shape(tmp_path):
    bad = tmp_path / "TensileLibrary.dat"
    bad.write_bytes(msgpack.packb([1, 2, 3]))
    with pytest.raises(DatFileError, match="TensileLibrary.dat: not a Tensile solution library"):
        read_rocblas_dir(tmp_path, "gfx900")
    bad.write_bytes(msgpack.packb({"solutions": [], "library": {"type": "Problem", "rows": []}}))
    with pytest.raises(DatFileError, match="TensileLibrary.dat: top library is 'Problem', expected Hardware"):
        read_rocblas_dir(tmp_path, "gfx900")


def test_missing_child(golden_dir, tmp_path):
    src = golden_dir / "tcl" / "gfx900-lazy-msgpack" / "DB_NN" / "TensileLibrary_lazy_gfx900.dat"
    shutil.copy(src, tmp_path / src.name)
    with pytest.raises(DatFileError, match=r"placeholder names TensileLibrary_Type_DD_.*gfx900, but"):
        read_rocblas_dir(tmp_path, "gfx900")


def test_empty_folder(tmp_path):
    with pytest.raises(DatFileError, match="no TensileLibrary_lazy_gfx900.dat"):
        read_rocblas_dir(tmp_path, "gfx900")
