from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from oto.hardware.profile import (
    SCHEMA_PATH,
    ProfileError,
    isa_name,
    load_profile,
    parse_arch,
    profile_path,
    validate_profile,
)

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "arch_profiles"
SHIPPED = sorted(PROFILES.glob("*.yaml"))

# What the simulator and the ceilings stage read: renaming any of these breaks them.
READ_BY_SIMULATOR = [
    "compute_units", "simds_per_cu", "lanes_per_simd", "wavefront_size", "clock_mhz", "rates",
    "lds_bytes_per_cu", "max_lds_per_workgroup", "vgprs_per_lane_max", "vgpr_budget_per_simd", "sgprs_max",
    "max_waves_per_simd", "l2_bytes", "memory",
]  # fmt: skip
MEMORY_FIELDS = [
    "kind", "peak_bandwidth_gbs", "sustained_bandwidth_gbs", "shared_with_cpu", "usable_device_memory_bytes",
]  # fmt: skip


def gfx90c_data() -> dict:
    return yaml.safe_load((PROFILES / "gfx90c.yaml").read_text())


def write(tmp_path: Path, data, name: str = "gfx90c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert "\n" not in message, "the Snakemake config check prints the message as one line"
    assert message.startswith(f"{path}: "), message
    return message


def test_schema_is_valid_draft_2020_12_and_documents_every_field():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("/2020-12/schema")
    assert schema["additionalProperties"] is False

    def walk(props: dict, where: str) -> None:
        for name, sub in props.items():
            assert sub.get("description"), f"{where}{name} has no description"
            walk(sub.get("properties", {}), f"{where}{name}.")

    walk(schema["properties"], "")
    for name in READ_BY_SIMULATOR:
        assert name in schema["required"], name
    assert schema["properties"]["memory"]["required"] == MEMORY_FIELDS


def test_the_profiles_ship():
    assert {p.stem for p in SHIPPED} >= {"gfx90c", "gfx902", "gfx900", "gfx1035", "gfx1103", "gfx1150"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_profile_validates(path):
    profile = load_profile(path)
    assert profile["arch"] == path.stem
    assert isa_name(profile["isa"]) == path.stem
    for name in READ_BY_SIMULATOR:
        assert name in profile
    for name in MEMORY_FIELDS:
        assert name in profile["memory"]
    assert profile["memory"]["sustained_bandwidth_gbs"] <= profile["memory"]["peak_bandwidth_gbs"]
    assert profile["has_mfma"] is False  # no profiled part has MFMA (RDNA3's matrix path is wmma)
    if profile["isa"][0] == 9:  # GCN: wave64 only, no WGP, no bf16 hardware
        assert profile["wavefront_sizes"] == [64] and not profile["workgroup_processor"]
        assert profile["rates"]["bf16"] == profile["rates"]["fp32"]


def test_gfx90c_facts():
    p = load_profile(PROFILES / "gfx90c.yaml")
    assert p["isa"] == [9, 0, 12]
    assert p["compute_units"] * p["simds_per_cu"] * p["lanes_per_simd"] == 448
    assert p["wavefront_size"] == 64 and p["max_waves_per_simd"] == 10
    assert p["lds_bytes_per_cu"] == p["max_lds_per_workgroup"] == 64 * 1024
    assert p["apu"] and p["memory"]["shared_with_cpu"]
    assert p["memory"]["peak_bandwidth_gbs"] == pytest.approx(3200e6 * 16 / 1e9)
    # A 2 GB allocation failed in the field: the usable limit must stay below it.
    assert 1.25 * 2**30 <= p["memory"]["usable_device_memory_bytes"] < 2e9
    assert p["tensile"]["logic_prefix"] == "gfx90c" and p["tensile"]["caps_from"] == "gfx900"
    assert {"Device 1636", "Device 1638"} <= set(p["tensile"]["device_names"])


def test_gfx900_uses_vega10_names_of_the_shipped_deck():
    p = load_profile(PROFILES / "gfx900.yaml")
    assert p["tensile"]["logic_prefix"] == "vega10"
    assert "Vega 10 [Radeon Instinct MI25 MxGPU]" in p["tensile"]["device_names"]
    assert p["apu"] is False and p["memory"]["kind"] == "hbm2"


def test_the_stock_library_says_what_owners_run_and_labels_follow_it():
    """gfx90c and gfx902 owners run gfx900's library (vega10, 9.0.0); gfx900 and gfx906 their own. The labels
    of the tuned library come from one function (oto.tensile.labels)."""
    from oto.tensile.labels import logic_label

    stock = {
        a: load_profile(PROFILES / f"{a}.yaml")["stock_library"]
        for a in ("gfx90c", "gfx902", "gfx900", "gfx906")
    }
    assert (
        stock["gfx90c"]
        == stock["gfx902"]
        == stock["gfx900"]
        == {
            "arch": "gfx900",
            "logic_prefix": "vega10",
            "hsa_override_gfx_version": "9.0.0",
        }
    )
    assert stock["gfx906"] == {
        "arch": "gfx906",
        "logic_prefix": "vega20",
        "hsa_override_gfx_version": "9.0.6",
    }
    apu, mi50 = load_profile(PROFILES / "gfx90c.yaml"), load_profile(PROFILES / "gfx906.yaml")
    devices = list(apu["tensile"]["device_names"])
    assert list(logic_label(apu, "native")) == ["gfx90c", "gfx90c", devices]
    assert (
        list(logic_label(apu, "spoof")) == list(logic_label(apu, "gfx900")) == ["vega10", "gfx900", devices]
    )
    assert tuple(logic_label(mi50, "spoof"))[:2] == ("vega20", "gfx906")
    with pytest.raises(ValueError, match=r"field 'package.label': gfx900 .* gfx906's .* use label spoof"):
        logic_label(mi50, "gfx900")
    with pytest.raises(ValueError, match="unknown label 'gfx1030'"):
        logic_label(apu, "gfx1030")


def test_the_rdna_apus_spoof_the_rdna_dgpu_library_of_their_generation():
    """Stock rocBLAS ships no library for the RDNA APUs: gfx1035 owners run gfx1030's (navi21, 10.3.0),
    gfx1103 and gfx1150 owners gfx1100's (navi31, 11.0.0); spoof labels follow, gfx900 is refused."""
    from oto.tensile.labels import logic_label

    expected = {
        "gfx1035": ("gfx1030", "navi21", "10.3.0"),
        "gfx1103": ("gfx1100", "navi31", "11.0.0"),
        "gfx1150": ("gfx1100", "navi31", "11.0.0"),
    }
    for arch, (stock_arch, prefix, version) in expected.items():
        p = load_profile(PROFILES / f"{arch}.yaml")
        assert p["stock_library"] == {
            "arch": stock_arch,
            "logic_prefix": prefix,
            "hsa_override_gfx_version": version,
        }
        assert tuple(logic_label(p, "spoof"))[:2] == (prefix, stock_arch)
        assert tuple(logic_label(p, "native"))[:2] == (p["tensile"]["logic_prefix"], arch)
        with pytest.raises(ValueError, match=rf"field 'package.label': gfx900 .* {stock_arch}'s"):
            logic_label(p, "gfx900")
    data = rdna_data("gfx1035")
    data["stock_library"] = {**data["stock_library"], "hsa_override_gfx_version": "10.3.5"}
    with pytest.raises(
        ProfileError, match=r"field 'stock_library.hsa_override_gfx_version': '10.3.5' is not gfx1030"
    ):
        validate_profile(data, "inline")


def test_a_stock_library_that_contradicts_itself_names_the_field():
    data = gfx90c_data()
    data["stock_library"] = {**data["stock_library"], "hsa_override_gfx_version": "9.0.12"}
    with pytest.raises(
        ProfileError, match=r"field 'stock_library.hsa_override_gfx_version': '9.0.12' is not gfx900"
    ):
        validate_profile(data, "inline")
    data = gfx90c_data()
    data["stock_library"] = {"arch": "gfx90c", "logic_prefix": "vega10", "hsa_override_gfx_version": "9.0.12"}
    with pytest.raises(ProfileError, match=r"field 'stock_library.logic_prefix': 'vega10'.* 'gfx90c'"):
        validate_profile(data, "inline")
    del data["stock_library"]
    with pytest.raises(ProfileError, match="field 'stock_library': missing required field"):
        validate_profile(data, "inline")


def test_defaults_fill_optional_fields(tmp_path):
    data = gfx90c_data()
    for name in ("lds_alloc_granule_bytes", "vgpr_alloc_granule", "sgprs_per_simd", "max_workgroup_size"):
        del data[name]
    del data["tensile"]["caps_from"]
    profile = validate_profile(data, "inline")
    assert profile["lds_alloc_granule_bytes"] == 512
    assert profile["vgpr_alloc_granule"] == 4
    assert profile["sgprs_per_simd"] == 800
    assert profile["max_workgroup_size"] == 1024
    assert profile["tensile"]["caps_from"] == "gfx900"
    assert "sgprs_per_simd" not in data, "the caller's data is not modified"


def test_missing_field(tmp_path):
    data = gfx90c_data()
    del data["clock_mhz"]
    assert "field 'clock_mhz': missing required field" in error_of(write(tmp_path, data))


def test_several_missing_fields_are_each_counted(tmp_path):
    data = gfx90c_data()
    for name in ("clock_mhz", "name", "apu"):
        del data[name]
    message = error_of(write(tmp_path, data))
    assert message.endswith("field 'apu': missing required field (and 2 more)")


def test_missing_nested_field(tmp_path):
    data = gfx90c_data()
    del data["memory"]["sustained_bandwidth_gbs"]
    assert "field 'memory.sustained_bandwidth_gbs': missing" in error_of(write(tmp_path, data))


def test_wrong_type(tmp_path):
    data = gfx90c_data()
    data["compute_units"] = "seven"
    message = error_of(write(tmp_path, data))
    assert "field 'compute_units': 'seven' is not of type 'integer'" in message


def test_bool_is_not_an_integer(tmp_path):
    data = gfx90c_data()
    data["l2_bytes"] = True
    assert "field 'l2_bytes'" in error_of(write(tmp_path, data))


def test_wrong_type_in_array(tmp_path):
    data = gfx90c_data()
    data["isa"] = [9, 0, "c"]
    assert "field 'isa[2]': 'c' is not of type 'integer'" in error_of(write(tmp_path, data))


def test_negative_bandwidth(tmp_path):
    data = gfx90c_data()
    data["memory"]["sustained_bandwidth_gbs"] = -3
    path = write(tmp_path, data)
    assert (
        error_of(path)
        == f"{path}: field 'memory.sustained_bandwidth_gbs': -3 is less than or equal to the minimum of 0"
    )


def test_sustained_above_peak(tmp_path):
    data = gfx90c_data()
    data["memory"]["sustained_bandwidth_gbs"] = 60.0
    message = error_of(write(tmp_path, data))
    assert "field 'memory.sustained_bandwidth_gbs': 60.0 exceeds peak_bandwidth_gbs 51.2" in message


def test_unknown_field(tmp_path):
    data = gfx90c_data()
    data["memory"]["channels"] = 2
    assert "field 'memory.channels': unknown field" in error_of(write(tmp_path, data))


def test_several_errors_report_the_first_and_count_the_rest(tmp_path):
    data = gfx90c_data()
    data["compute_units"] = 0
    data["clock_mhz"] = -1
    message = error_of(write(tmp_path, data))
    assert "field 'clock_mhz'" in message and message.endswith("(and 1 more)")


def test_file_stem_must_equal_arch(tmp_path):
    path = write(tmp_path, gfx90c_data(), name="gfx902.yaml")
    message = error_of(path)
    assert "field 'arch'" in message and "'gfx90c'" in message and "'gfx902'" in message


def test_isa_must_match_arch(tmp_path):
    data = gfx90c_data()
    data["isa"] = [9, 0, 2]
    assert "field 'isa': [9, 0, 2] names gfx902, not arch 'gfx90c'" in error_of(write(tmp_path, data))


def test_lds_per_workgroup_within_cu(tmp_path):
    data = gfx90c_data()
    data["max_lds_per_workgroup"] = 131072
    assert "field 'max_lds_per_workgroup': 131072 exceeds" in error_of(write(tmp_path, data))


def test_apu_memory_is_shared(tmp_path):
    data = gfx90c_data()
    data["memory"]["shared_with_cpu"] = False
    assert "field 'memory.shared_with_cpu'" in error_of(write(tmp_path, data))


def test_yaml_syntax_error(tmp_path):
    text = (PROFILES / "gfx90c.yaml").read_text().replace("compute_units: 7", "compute_units: [7")
    message = error_of(write(tmp_path, text))
    assert "YAML syntax error at line" in message


def test_duplicate_key_is_an_error(tmp_path):
    text = (PROFILES / "gfx90c.yaml").read_text() + "clock_mhz: 2000\n"
    message = error_of(write(tmp_path, text))
    assert "duplicate key 'clock_mhz'" in message


@pytest.mark.parametrize("text, kind", [("- 1\n- 2\n", "a list"), ("", "empty"), ("gfx90c\n", "a str")])
def test_document_must_be_a_mapping(tmp_path, text, kind):
    assert f"the document is {kind}, expected a mapping" in error_of(write(tmp_path, text))


def test_missing_file(tmp_path):
    assert "cannot read" in error_of(tmp_path / "gfx90c.yaml")


def test_profile_path_and_arch_names():
    assert profile_path("gfx90c") == Path("arch_profiles/gfx90c.yaml")
    assert profile_path("gfx900", root=PROFILES) == PROFILES / "gfx900.yaml"
    assert parse_arch("gfx90c") == (9, 0, 12)
    assert parse_arch("gfx1030") == (10, 3, 0)
    assert isa_name((10, 3, 0)) == "gfx1030"
    for bad in ("../etc/passwd", "gfx90C", "vega10", "gfx9"):
        with pytest.raises(ProfileError):
            profile_path(bad)


# ---- physical bounds, and what each stage may read -------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("clock_mhz: .nan", "field 'clock_mhz': nan is not a finite number"),
        ("clock_mhz: .inf", "field 'clock_mhz': inf"),
        (
            "compute_units: 1000000000",
            "field 'compute_units': 1000000000 is greater than the maximum of 1024",
        ),
        ("lds_bytes_per_cu: 0", "field 'lds_bytes_per_cu': 0 is less than the minimum of 4096"),
        ("max_lds_per_workgroup: 0", "field 'max_lds_per_workgroup': 0 is less than the minimum of 1024"),
        ("clock_mhz: 1", "field 'clock_mhz': 1 is less than the minimum of 100"),
        ("l2_bytes: -1", "field 'l2_bytes': -1 is less than the minimum of 0"),
    ],
)
def test_nan_infinite_and_unphysical_values_are_refused_with_the_bound(tmp_path, text, message):
    field, value = text.split(": ")
    lines = (PROFILES / "gfx90c.yaml").read_text().splitlines()
    edited = [f"{field}: {value}  # edited" if ln.startswith(f"{field}:") else ln for ln in lines]
    path = write(tmp_path, "\n".join(edited) + "\n")
    assert f"{path}: {message}" in error_of(path)


def test_nested_nan_is_named_by_its_path(tmp_path):
    data = gfx90c_data()
    data["memory"]["peak_bandwidth_gbs"] = float("nan")
    data["rates"]["fp64"] = float("nan")
    msg = error_of(write(tmp_path, data))
    assert "field 'memory.peak_bandwidth_gbs': nan is not a finite number" in msg and "(and 1 more)" in msg


def test_a_profile_view_ignores_comments_and_key_order():
    from oto.hardware.profile import profile_view

    text = (PROFILES / "gfx90c.yaml").read_text()
    a = validate_profile(yaml.safe_load(text), "a")
    reordered = dict(reversed(list(yaml.safe_load(text).items())))
    reordered["memory"] = dict(reversed(list(reordered["memory"].items())))
    b = validate_profile(reordered, "b")
    fields = ["clock_mhz", "memory.sustained_bandwidth_gbs", "rates"]
    assert repr(profile_view(a, fields)) == repr(profile_view(b, fields))
    assert profile_view({**a, "clock_mhz": 1800.0}, ["clock_mhz"]) == {"clock_mhz": 1800}
    assert profile_view(a, ["rates.fp64", "memory.kind"]) == {
        "memory": {"kind": "ddr4-3200"},
        "rates": {"fp64": 0.0625},
    }


def test_a_stage_cannot_read_a_field_its_view_does_not_declare():
    from oto.hardware.profile import ProfileView, UndeclaredProfileField, profile_view

    p = load_profile(PROFILES / "gfx90c.yaml")
    view = ProfileView(p, profile_view(p, ["arch", "rates.fp32", "memory.usable_device_memory_bytes"]))
    assert view["rates"]["fp32"] == 1 and view["memory"]["usable_device_memory_bytes"] == 1610612736
    for read in (
        lambda: view["clock_mhz"],
        lambda: view.get("has_mfma", False),  # a default must not hide the dependency
        lambda: "name" in view,
        lambda: view["rates"]["fp64"],
        lambda: view["memory"].get("sustained_bandwidth_gbs"),
    ):
        with pytest.raises(UndeclaredProfileField, match="does not declare it"):
            read()
    assert view.get("no_such_field", 3) == 3 and "no_such_field" not in view


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_stage_runs_on_its_view(path, tmp_path):
    """The declared views are enough: each stage's domain calls work on a guarded view, for every shipped
    profile (the RDNA cards' Infinity Cache once went unread by the views of mutate and emit, whose demos then
    failed), the backend's provenance included."""
    from oto.backends import resolve
    from oto.backends.base import Problem
    from oto.config import validate_config
    from oto.deck.model import read_library_yaml, write_library_yaml
    from oto.deck.sources import read_manifest, shipped_manifest
    from oto.hardware.ceilings import ceilings_document
    from oto.hardware.profile import ProfileView
    from oto.measurement.selection import per_size_rows
    from oto.run.profile_views import stage_view
    from oto.tensile.benchmark_config import render_benchmark_yaml
    from oto.tensile.labels import logic_label
    from oto.tensile.legality import Limits

    p = load_profile(path)
    lib = "Cijk_Ailk_Bljk_SB"  # in every shipped deck
    deck_path = tmp_path / "deck.yaml"
    write_library_yaml(
        read_manifest(shipped_manifest(p["stock_library"]["arch"])).libraries[lib], deck_path, {}
    )
    deck = read_library_yaml(deck_path)
    config = validate_config({"arch": p["arch"], "families": ["SB"], "backend": "sim"})

    def view(stage):
        return ProfileView(p, stage_view(p, stage, config, lib))

    ceilings_document(view("ceilings"))
    Limits.from_profile(view("mutate"))
    render_benchmark_yaml(deck, view("emit"), 0, [], [[64, 64, 1, 64]], 3)
    for stage in ("mutate", "emit"):  # their registry knowledge is of the backend's provenance
        resolve(config, view(stage), "x").provenance()
    for stage in ("compile", "benchmark", "finalize", "verify", "compare"):
        backend = resolve(config, view(stage), "x")
        backend.provenance()
        backend.build(Problem.of(deck, view(stage)), [], tmp_path)
    per_size_rows([], [[64, 64, 1, 64]], deck_library(lib), view("select"), 0.02, 0)
    logic_label(view("logic"), "native")
    logic_label(view("package"), "spoof")


def deck_library(name):
    from oto.gemm import Library

    return Library.parse(name)


# ---- RDNA: gfx1035 (RDNA2), gfx1103 (RDNA3), gfx1150 (RDNA3.5) ----

RDNA = ("gfx1035", "gfx1103", "gfx1150")


def rdna_data(arch: str = "gfx1103") -> dict:
    return yaml.safe_load((PROFILES / f"{arch}.yaml").read_text())


@pytest.mark.parametrize("arch", RDNA)
def test_rdna_profiles(arch):
    p = load_profile(PROFILES / f"{arch}.yaml")
    assert p["apu"] and p["memory"]["shared_with_cpu"]
    assert p["wavefront_size"] == 32 and p["wavefront_sizes"] == [32, 64]
    assert p["simds_per_cu"] * p["lanes_per_simd"] == 64  # 2 x SIMD32 per CU
    assert p["workgroup_processor"] == {"compute_units": 2, "lds_bytes": 131072}
    assert p["max_lds_per_workgroup"] == p["lds_bytes_per_cu"] == 65536
    assert p["max_waves_per_simd"] == 16 and p["vgpr_budget_per_simd"] == 1024
    assert p["sgprs_per_simd"] // p["sgpr_alloc_granule"] == p["max_waves_per_simd"]  # SGPRs never limit
    for name, bounds in p["device_range"].items():
        own = p["memory"]["peak_bandwidth_gbs"] if name == "peak_bandwidth_gbs" else p[name]
        assert bounds["min"] <= own <= bounds["max"], name
    assert p["tensile"]["caps_from"] in {"gfx1030", "gfx1102", "gfx1151"}


def test_gfx1103_facts():
    p = load_profile(PROFILES / "gfx1103.yaml")
    assert p["isa"] == [11, 0, 3] and p["compute_units"] == 12 and p["clock_mhz"] == 2700
    assert p["rates"]["fp32"] == 2 and p["dual_issue"] == {"fp32": 2}  # RDNA3 dual issue
    assert p["wmma"]["rates"] == {"fp16_packed": 4, "fp16_hpa": 4, "bf16": 4, "int8": 4}
    assert "v_wmma_f32_16x16x16_f16" in p["wmma"]["instructions"]
    assert p["tensile"]["logic_prefix"] == "gfx1103" and "Device 15bf" in p["tensile"]["device_names"]
    assert p["device_range"]["compute_units"] == {"min": 4, "max": 12}  # Radeon 740M .. 780M


def test_gfx1035_facts():
    p = load_profile(PROFILES / "gfx1035.yaml")
    assert p["isa"] == [10, 3, 5] and p["compute_units"] == 12 and p["clock_mhz"] == 2200
    assert not p["wmma"] and not p["dual_issue"]
    assert {"v_dot2_f32_f16", "v_dot4_i32_i8"} <= set(p["dot_instructions"])
    assert (p["rates"]["fp16_hpa"], p["rates"]["int8"]) == (2, 4)
    # Tensile 4.44's architectureMap names gfx1035's logic files 'rembrandt'
    assert p["tensile"]["logic_prefix"] == "rembrandt"


def test_gfx1150_facts():
    p = load_profile(PROFILES / "gfx1150.yaml")
    assert p["isa"] == [11, 5, 0] and p["compute_units"] == 16 and p["clock_mhz"] == 2900
    assert p["tensile"]["caps_from"] == "gfx1151" and p["device_range"]["compute_units"] == {
        "min": 12,
        "max": 16,
    }


def test_gfx902_has_its_device_range():
    p = load_profile(PROFILES / "gfx902.yaml")
    assert p["device_range"]["compute_units"] == {"min": 3, "max": 11} and p["l2_bytes"] == 1048576


@pytest.mark.parametrize(
    "edit, message",
    [
        # a field the ISA needs
        (lambda d: d.pop("wmma"), "field 'wmma': missing: gfx1103 (gfx11 (RDNA3, RDNA3.5)) has WMMA"),
        (
            lambda d: d["wmma"]["rates"].pop("bf16"),
            "field 'wmma.rates.bf16': missing: gfx1103 runs bf16 on WMMA (v_wmma_*); its rate sets the bf16",
        ),
        (lambda d: d.pop("dual_issue"), "field 'dual_issue.fp32': missing: gfx1103"),
        (lambda d: d.pop("workgroup_processor"), "field 'workgroup_processor': missing: gfx1103 (RDNA)"),
        (lambda d: d.update(wavefront_sizes=[32]), "field 'wavefront_sizes': [32]: gfx1103 runs [32, 64]"),
        (lambda d: d.update(has_mfma=True), "field 'has_mfma': True: Tensile's capabilities for gfx1103"),
        # an ISA the legality rules do not know, or caps from the wrong ISA
        (
            lambda d: d.update(arch="gfx1200", isa=[12, 0, 0]),
            "field 'isa': [12, 0, 0] (gfx1200): oto.tensile.legality has no rules for this ISA",
        ),
        (
            lambda d: d["tensile"].update(caps_from="gfx1030"),
            "field 'tensile.caps_from': gfx1030: Tensile's assembler capabilities for gfx1103 must come "
            "from an ISA of the same family",
        ),
        (lambda d: d["tensile"].pop("caps_from"), "field 'tensile.caps_from': gfx900"),  # the default donor
        # figures that contradict each other
        (
            lambda d: d.update(compute_units=11),
            "field 'compute_units': 11 is not a whole number of work-group",
        ),
        (lambda d: d["rates"].update(bf16=2), "field 'rates.bf16': 2 is below wmma.rates.bf16 4"),
        (
            lambda d: d["device_range"].update(compute_units={"min": 2, "max": 8}),
            "field 'device_range.compute_units': [2, 8] does not hold the profile's own 12",
        ),
        (lambda d: d.update(wavefront_size=16), "field 'wavefront_size': 16 is not one of [32, 64]"),
    ],
)
def test_a_profile_its_isa_contradicts_is_refused_naming_the_field(tmp_path, edit, message):
    data = rdna_data()
    edit(data)
    path = write(tmp_path, data, name=f"{data['arch']}.yaml")
    assert message in error_of(path)


def test_an_isa_without_wmma_may_not_claim_it(tmp_path):
    data = rdna_data("gfx1035")
    data["wmma"] = {"instructions": ["v_wmma_f32_16x16x16_f16"], "rates": {"fp16_hpa": 2}}
    assert "field 'wmma': gfx1035 has no WMMA" in error_of(write(tmp_path, data, name="gfx1035.yaml"))
    data = rdna_data("gfx1035")
    data["dual_issue"] = {"fp32": 2}
    assert "field 'dual_issue': gfx1035 has no dual issue" in error_of(
        write(tmp_path, data, name="gfx1035.yaml")
    )
    data = gfx90c_data()
    data["wavefront_sizes"] = [32, 64]
    assert "field 'wavefront_sizes': [32, 64]: gfx90c runs [64]" in error_of(write(tmp_path, data))


def test_mfma_isas_are_not_modelled(tmp_path):
    data = yaml.safe_load((PROFILES / "gfx906.yaml").read_text())
    data.update(arch="gfx908", isa=[9, 0, 8])
    data["tensile"]["caps_from"] = "gfx908"
    message = error_of(write(tmp_path, data, name="gfx908.yaml"))
    assert "field 'isa': [9, 0, 8] (gfx908): oto.tensile.legality has no rules for this ISA" in message


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_job_reads_the_view_its_plan_made(path):
    """A job compares the file's figures with the view the plan gave it (oto.run.context.stage_profile); empty
    blocks (no WMMA, no dual issue, no WGP on GCN) must round-trip too."""
    from oto.config import validate_config
    from oto.run.context import stage_profile
    from oto.run.profile_views import stage_fields, stage_view

    profile = load_profile(path)
    config = validate_config({"arch": profile["arch"], "families": ["DB"], "backend": "sim"})
    for stage in stage_fields(config):
        view = stage_view(profile, stage, config, "Cijk_Ailk_Bljk_HHS_BH")
        assert dict(stage_profile(path, view)) == view, stage


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_the_simulated_backends_provenance_reads_only_what_its_stages_declare(path):
    """mutate and emit resolve the backend for its provenance (the registry's knowledge of the same numbers
    and chip) through their profile views. The simulated chip's identity hashes every chip constant, the
    Infinity Cache of gfx1030 and gfx1100 (memory.last_level_cache) included: a view without it failed
    their demos' first mutate job. The identity from a view is the one from the whole profile."""
    from oto.backends import resolve
    from oto.config import validate_config
    from oto.hardware.profile import ProfileView
    from oto.run.profile_views import stage_view
    from oto.stages import PROVENANCE_FIELDS, stages

    profile = load_profile(path)
    config = validate_config({"arch": profile["arch"], "families": ["SB"], "backend": "sim"})
    whole = resolve(config, profile, "x").provenance()
    readers = [s.name for s in stages() if s.profile and PROVENANCE_FIELDS in s.profile]
    assert {"mutate", "emit"} <= set(readers)
    for stage in readers:
        view = ProfileView(profile, stage_view(profile, stage, config, "Cijk_Ailk_Bljk_SB"))
        assert resolve(config, view, "x").provenance() == whole, stage


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_validated_profile_validates_again(path):
    """Device profiles (oto.fleet.device) are written from the validated profile, empty blocks included."""
    profile = load_profile(path)
    assert validate_profile(copy.deepcopy(profile), "again") == profile


def test_a_block_needs_both_its_fields(tmp_path):
    data = rdna_data()
    del data["wmma"]["rates"]
    assert "field 'wmma.rates': missing required field" in error_of(
        write(tmp_path, data, name="gfx1103.yaml")
    )
    data = rdna_data("gfx1035")
    del data["workgroup_processor"]["lds_bytes"]
    message = error_of(write(tmp_path, data, name="gfx1035.yaml"))
    assert "field 'workgroup_processor.lds_bytes': missing required field" in message
