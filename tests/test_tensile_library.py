"""Conformance of oto's MasterSolutionLibrary builder with real TensileCreateLibrary 4.44 outputs."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
import yaml
from oto.tensile import solution_fields as sf
from oto.tensile.native_library import arch_index_base, build_master_library, read_logic, write_library

FAMILIES = {
    "DB_NN": "vega10_Cijk_Ailk_Bljk_DB.yaml",
    "HB_TN": "vega10_Cijk_Alik_Bljk_HB.yaml",
    "HHS_BH_NT": "vega10_Cijk_Ailk_Bjlk_HHS_BH.yaml",
}
ARCHS = ("gfx900", "gfx90c")


def _logic(vega10_dir: Path, fam: str, arch: str) -> list:
    """The golden run's input: the shipped file, relabelled (elements 1 and 2) for gfx90c."""
    data = read_logic(vega10_dir / FAMILIES[fam])
    if arch == "gfx90c":
        data[1] = data[2] = "gfx90c"
    return data


def _undat(path: Path) -> dict:
    return msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)


def _load_yaml(path: Path) -> dict:
    with open(path) as f:
        return yaml.load(f, Loader=yaml.CSafeLoader)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fam", FAMILIES)
def test_merged_yaml_equals_tcl(vega10_dir, golden_dir, tmp_path, fam, arch):
    golden = golden_dir / "tcl" / f"{arch}-merged-yaml" / fam / "TensileLibrary.yaml"
    lib = build_master_library([_logic(vega10_dir, fam, arch)], arch=arch)
    assert lib == _load_yaml(golden)
    assert [s["index"] for s in lib["solutions"]] == list(range(len(lib["solutions"])))
    out = write_library(lib, tmp_path / "TensileLibrary.yaml")
    assert out.read_text() == golden.read_text()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fam", FAMILIES)
def test_lazy_msgpack_equals_tcl(vega10_dir, golden_dir, tmp_path, fam, arch):
    folder = golden_dir / "tcl" / f"{arch}-lazy-msgpack" / fam
    parent, children = build_master_library([_logic(vega10_dir, fam, arch)], arch=arch, lazy=True)
    files = {f"TensileLibrary_lazy_{arch}": parent, **children}
    assert set(files) == {p.stem for p in folder.glob("*.dat")}
    for stem, lib in files.items():
        golden = folder / f"{stem}.dat"
        assert lib == _undat(golden), stem
        assert write_library(lib, tmp_path / f"{stem}.dat").read_bytes() == golden.read_bytes(), stem
    (child,) = children.values()
    base = arch_index_base(arch)
    assert [s["index"] for s in child["solutions"]] == [base + i for i in range(len(child["solutions"]))]


def test_librarylogic_output_equals_tcl(golden_dir, tmp_path):
    logic = (
        golden_dir / "librarylogic" / "winner" / "out" / "3_LibraryLogic" / "gfx90c_Cijk_Ailk_Bjlk_SB.yaml"
    )
    merged = golden_dir / "librarylogic" / "tcl-gfx90c-merged-yaml" / "TensileLibrary.yaml"
    lib = build_master_library([logic], arch="gfx90c")
    assert write_library(lib, tmp_path / "TensileLibrary.yaml").read_text() == merged.read_text()
    parent, children = build_master_library([logic], arch="gfx90c", lazy=True)
    folder = golden_dir / "librarylogic" / "tcl-gfx90c-lazy-msgpack"
    for stem, obj in {"TensileLibrary_lazy_gfx90c": parent, **children}.items():
        assert msgpack.packb(obj) == (folder / f"{stem}.dat").read_bytes(), stem


def test_arch_index_base():
    assert arch_index_base("gfx900") == 603979776
    assert arch_index_base("gfx90c") == 607125504
    assert arch_index_base("fallback") == 0
    with pytest.raises(ValueError):
        arch_index_base("sm_80")


def test_separate_architectures_without_lazy_offsets_indices(vega10_dir):
    lib = build_master_library(
        [_logic(vega10_dir, "DB_NN", "gfx90c")], arch="gfx90c", separate_architectures=True
    )
    indices = [s["index"] for s in lib["solutions"]]
    assert indices == [607125504 + i for i in range(4)]
    table = lib["library"]["rows"][0]["library"]["map"]["Contraction_l_Ailk_Bljk_Cijk_Dijk"]
    while table["type"] != "Matching":
        table = table["rows"][0]["library"]
    assert {row["index"] for row in table["table"]} <= set(indices)


def test_merging_two_logic_files(vega10_dir):
    nn = read_logic(vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml")
    tn = read_logic(vega10_dir / "vega10_Cijk_Alik_Bljk_DB.yaml")
    lib = build_master_library([nn, tn], arch="gfx900")
    assert [s["index"] for s in lib["solutions"]] == list(range(len(nn[5]) + len(tn[5])))
    ops = lib["library"]["rows"][0]["library"]["map"]
    assert list(ops) == ["Contraction_l_Ailk_Bljk_Cijk_Dijk", "Contraction_l_Alik_Bljk_Cijk_Dijk"]
    # The second file's table points at its renumbered solutions.
    node = ops["Contraction_l_Alik_Bljk_Cijk_Dijk"]
    while node["type"] != "Matching":
        node = node["rows"][0]["library"]
    assert min(row["index"] for row in node["table"]) >= len(nn[5])
    # One minimal naming for every kernel of the run: both problem types share the differing keys.
    names = [s["name"] for s in lib["solutions"]]
    assert len(set(names)) == len(names)
    assert all("_ISA" in n for n in names)


def test_lazy_refuses_other_architecture(vega10_dir):
    with pytest.raises(ValueError, match="gfx900"):
        build_master_library([vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml"], arch="gfx90c", lazy=True)


def test_write_library_format_by_suffix(tmp_path):
    obj = {"solutions": [], "library": {"type": "Hardware", "rows": []}}
    assert _undat(write_library(obj, tmp_path / "x.dat")) == obj
    assert _load_yaml(write_library(obj, tmp_path / "x.yaml")) == obj
    with pytest.raises(ValueError):
        write_library(obj, tmp_path / "x.json")


def test_derived_fields_follow_the_parameters(vega10_dir):
    """A change of an independent parameter reaches the name, predicates and size mapping."""
    data = read_logic(vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml")
    before = build_master_library([data], arch="gfx900")["solutions"][1]
    data[5][1]["DepthU"] = 16
    data[5][1]["BufferLoad"] = False
    after = build_master_library([data], arch="gfx900")["solutions"][1]
    assert after["name"].startswith("Cijk_Ailk_Bljk_DB_MT64x64x16_") and before["name"] != after["name"]
    assert after["sizeMapping"]["depthU"] == 16
    assert after["sizeMapping"]["staggerU"] == 0  # assembly without buffer loads cannot stagger
    preds = [p["type"] for p in after["problemPredicate"]["value"]]
    assert "BufferLoadOffsetLimitCheck" not in preds and "BufferStoreOffsetLimitCheck" in preds


def test_kernel_name_abbreviations():
    pt = sf.ProblemTypeInfo.from_dict({"DataType": 0, "TransposeB": True, "UseBeta": True, "Batched": True})
    assert pt.name == "Cijk_Ailk_Bjlk_SB"
    assert pt.operation_identifier == "Contraction_l_Ailk_Bjlk_Cijk_Dijk"
    state = {
        "MacroTile0": 64,
        "MacroTile1": 32,
        "DepthU": 8,
        "LdcEqualsLdd": True,
        "ISA": [9, 0, 12],
        "UseSgprForGRO": -1,
        "WorkGroup": [16, 8, 1],
        "KernelLanguage": "Assembly",
    }
    name = sf.kernel_name(state, pt, {"ISA", "UseSgprForGRO", "WorkGroup", "KernelLanguage"})
    assert name == "Cijk_Ailk_Bjlk_SB_MT64x32x8_SE_ISA90c_KLA_USFGROn1_WG16_8_1"
    assert sf.isa_tuple("gfx90c") == (9, 0, 12)


def test_lazy_parent_of_two_types_orders_rows_like_tensile(vega10_dir):
    files = [vega10_dir / "vega10_Cijk_Ailk_Bljk_HB.yaml", vega10_dir / "vega10_Cijk_Ailk_Bljk_DB.yaml"]
    parent, children = build_master_library(files, arch="gfx900", lazy=True)
    # merged in file-name order whatever the order given (TCL's, with runtime.py sorting its logic files)
    assert (parent, children) == build_master_library(list(reversed(files)), arch="gfx900", lazy=True)
    assert list(children) == [
        "TensileLibrary_Type_DD_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx900",
        "TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx900",
    ]
    node = parent["library"]["rows"][0]["library"]["map"]["Contraction_l_Ailk_Bljk_Cijk_Dijk"]
    for _ in range(3):  # performance metric, fp16 alt impl, fp16 alt impl round
        (row,) = node["rows"]
        node = row["library"]
    # PredicateLibrary.merge sorts rows; DataType orders by enum, so Double (1) before Half (4).
    types = [r["predicate"]["value"][0]["value"][0] for r in node["rows"]]
    assert types == ["Double", "Half"]
    assert [r["library"]["value"] for r in node["rows"]] == list(children)
    dd, hh = children.values()
    base = arch_index_base("gfx900")
    assert dd["solutions"][0]["index"] == base and hh["solutions"][0]["index"] == base + len(dd["solutions"])


def test_the_packaged_dat_carries_its_provenance_where_tensile_never_looks(vega10_dir, tmp_path):
    """package writes TensileLibrary.dat with oto's provenance under one extra top-level key (Tensile's loader
    reads only version, solutions and library there: oto.tensile.provenance.DAT_KEY cites the lines); the
    rest is byte for byte the library without it, and oto's own .dat reader reads both alike."""
    from oto.hardware.profile import load_profile
    from oto.tensile.dat_reader import dat_provenance, read_rocblas_dir
    from oto.tensile.packaging import PackageSettings, package_library
    from oto.tensile.provenance import DAT_KEY, record_path, write_record

    profile = load_profile(Path(__file__).resolve().parents[1] / "arch_profiles" / "gfx90c.yaml")
    logic = tmp_path / "logic" / "gfx90c_Cijk_Ailk_Bljk_DB.yaml"
    logic.parent.mkdir()
    text = (vega10_dir / FAMILIES["DB_NN"]).read_text()
    logic.write_text(text.replace("- vega10\n", "- gfx90c\n", 1).replace("- gfx900\n", "- gfx90c\n", 1))
    prov = {"backend": "sim", "numbers": "simulated", "model_version": "simgpu-5", "seed": 1}
    record = write_record(
        {"library": "Cijk_Ailk_Bljk_DB", "numbers": "simulated", "backend": "sim", "provenance": prov},
        record_path(logic),
    )
    out = tmp_path / "marked" / "TensileLibrary.dat"
    out.parent.mkdir()
    never = PackageSettings.from_config({"package": {"create_library": "never"}})
    package_library([logic], profile, out, never, manifest=out.parent / "library" / "manifest.yaml",
                    provenance_paths=[record])  # fmt: skip
    doc = _undat(out)
    assert list(doc) == ["solutions", "library", DAT_KEY]
    block = dat_provenance(out)
    assert block["numbers"] == ["simulated"] and block["backends"] == ["sim"]
    assert block["libraries"]["Cijk_Ailk_Bljk_DB"]["model_version"] == "simgpu-5"
    assert "simulated — not for installing" in block["meaning"]
    plain = write_library(build_master_library([logic], arch="gfx90c"), tmp_path / "TensileLibrary.dat")
    del doc[DAT_KEY]
    assert msgpack.packb(doc, use_bin_type=True) == plain.read_bytes()
    assert dat_provenance(plain) is None
    ours, bare = read_rocblas_dir(out.parent, arch="gfx90c"), read_rocblas_dir(tmp_path, arch="gfx90c")
    assert [(x.library_name, x.solutions, x.rows) for x in ours] == [
        (x.library_name, x.solutions, x.rows) for x in bare
    ]
