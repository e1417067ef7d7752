from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml
from oto.deck.sources import read_manifest, shipped_manifest
from oto.gemm import Family, Library, gemm_flops
from oto.hardware.ceilings import (
    VEGA10_FAMILIES,
    ceilings_document,
    family_peak_gflops,
    gemm_bytes,
    realistic_gflops,
    ridge_point,
    roofline_gflops,
    theoretical_gflops,
)
from oto.hardware.profile import load_profile

PROFILES = Path(__file__).resolve().parents[1] / "arch_profiles"


@pytest.fixture(scope="module")
def gfx90c() -> dict:
    return load_profile(PROFILES / "gfx90c.yaml")


@pytest.fixture(scope="module")
def gfx900() -> dict:
    return load_profile(PROFILES / "gfx900.yaml")


GFX90C_PEAKS = {
    "fp32": 1613, "bf16": 1613, "complex_fp32": 1613, "fp16_hpa": 1613, "fp16_packed": 3226, "fp64": 101,
    "complex_fp64": 101, "int8": 1613,
}  # fmt: skip


@pytest.mark.parametrize("workload, expected", GFX90C_PEAKS.items())
def test_gfx90c_theoretical_peaks(gfx90c, workload, expected):
    entry = ceilings_document(gfx90c)["theoretical"][workload]
    assert entry["gflops"] == pytest.approx(expected, rel=0.01)
    assert f"= {entry['gflops']:.1f}" in entry["formula"]
    assert entry["unit"] == ("GOPS" if workload == "int8" else "GFLOPS")


def test_gfx90c_family_peaks(gfx90c):
    assert family_peak_gflops(gfx90c, "SB") == pytest.approx(1613, rel=0.01)
    assert family_peak_gflops(gfx90c, "HB") == pytest.approx(3226, rel=0.01)
    assert family_peak_gflops(gfx90c, Family.parse("HHS_BH")) == pytest.approx(1613, rel=0.01)
    assert family_peak_gflops(gfx90c, "DB_GB") == pytest.approx(101, rel=0.01)
    # Complex families count 8 flops per complex MAC, so they peak at their base rate.
    assert family_peak_gflops(gfx90c, "CB_GB") == family_peak_gflops(gfx90c, "SB")
    assert family_peak_gflops(gfx90c, "ZB_GB") == family_peak_gflops(gfx90c, "DB")


def test_gfx900_mi25_datasheet_peaks(gfx900):
    assert theoretical_gflops(gfx900, "fp32") == pytest.approx(12290, rel=0.01)
    assert theoretical_gflops(gfx900, "fp16_packed") == pytest.approx(24600, rel=0.01)
    assert theoretical_gflops(gfx900, "fp64") == pytest.approx(768, rel=0.01)


def test_gfx902_peak():
    p = load_profile(PROFILES / "gfx902.yaml")
    assert theoretical_gflops(p, "fp32") == pytest.approx(11 * 64 * 2 * 1.25, rel=1e-9)


def test_unknown_rate_class(gfx90c):
    with pytest.raises(ValueError, match="unknown rate class 'fp8'"):
        theoretical_gflops(gfx90c, "fp8")


def test_roofline_square_sgemm_matches_hand_derivation(gfx90c):
    # Square SGEMM: 2n^3 flops over 4 B * (2n^2 for A, B + 2n^2 for C, D) = n/8 flops per byte.
    bw = gfx90c["memory"]["sustained_bandwidth_gbs"]
    peak = theoretical_gflops(gfx90c, "fp32")
    for n in (64, 128, 256, 1024):
        assert roofline_gflops(gfx90c, "SB", n, n, 1, n) == pytest.approx(min(peak, n / 8 * bw))


def test_traffic_model_uses_input_and_dest_bytes():
    m, n, b, k = 100, 200, 3, 50
    assert gemm_bytes("SB", m, n, b, k) == b * ((m * k + k * n) * 4 + m * n * 4 * 2)
    assert gemm_bytes("HSS_BH", m, n, b, k) == b * ((m * k + k * n) * 2 + m * n * 4 * 2)
    assert gemm_bytes("ZB", m, n, b, k) == b * ((m * k + k * n) * 16 + m * n * 16 * 2)


def test_small_sizes_are_memory_bound_and_large_reach_peak(gfx90c):
    for code in ("SB", "HB", "HHS_BH", "CB", "I8II_BH"):
        peak = family_peak_gflops(gfx90c, code)
        assert roofline_gflops(gfx90c, code, 64, 64, 1, 64) < 0.5 * peak, code
        assert roofline_gflops(gfx90c, code, 4096, 4096, 1, 4096) == pytest.approx(peak), code
    # Skinny problems stay memory-bound however large they are.
    assert roofline_gflops(gfx90c, "SB", 8192, 8192, 1, 4) < 0.2 * family_peak_gflops(gfx90c, "SB")


def test_wider_dest_lowers_the_memory_bound(gfx90c):
    # HSS writes FP32 D where HHS writes FP16: more bytes, same flops.
    assert roofline_gflops(gfx90c, "HSS_BH", 64, 64, 1, 64) < roofline_gflops(gfx90c, "HHS_BH", 64, 64, 1, 64)


@pytest.mark.parametrize("code", ["SB", "DB", "HB", "HHS_BH", "ZB_GB"])
def test_roofline_is_monotone_in_size(gfx90c, code):
    sizes = np.arange(1, 4097, 7)
    ceiling = roofline_gflops(gfx90c, code, sizes, sizes, 1, sizes)
    assert np.all(np.diff(ceiling) >= 0)
    assert ceiling.max() <= family_peak_gflops(gfx90c, code) * (1 + 1e-12)
    k_sweep = roofline_gflops(gfx90c, code, 512, 512, 1, sizes)
    assert np.all(np.diff(k_sweep) >= 0)


def test_roofline_is_vectorised_and_agrees_with_scalars(gfx90c):
    rng = np.random.default_rng(0)
    m, n, b, k = (rng.integers(1, 5000, size=50) for _ in range(4))
    vector = roofline_gflops(gfx90c, "DB", m, n, b, k)
    assert isinstance(vector, np.ndarray) and vector.shape == (50,)
    scalars = [roofline_gflops(gfx90c, "DB", *map(int, size)) for size in zip(m, n, b, k, strict=True)]
    assert isinstance(scalars[0], float)
    np.testing.assert_allclose(vector, scalars)


def test_roofline_flops_agree_with_datatypes(gfx90c):
    f = Family.parse("CB")
    m, n, b, k = 32, 48, 2, 16
    bound = (
        gemm_flops(f, m, n, b, k) / gemm_bytes(f, m, n, b, k) * gfx90c["memory"]["sustained_bandwidth_gbs"]
    )
    assert roofline_gflops(gfx90c, f, m, n, b, k) == pytest.approx(min(bound, family_peak_gflops(gfx90c, f)))


def test_batch_does_not_change_intensity(gfx90c):
    assert roofline_gflops(gfx90c, "SB", 128, 128, 16, 128) == pytest.approx(
        roofline_gflops(gfx90c, "SB", 128, 128, 1, 128)
    )


def test_roofline_rejects_empty_sizes(gfx90c):
    with pytest.raises(ValueError):
        roofline_gflops(gfx90c, "SB", 0, 64, 1, 64)


def test_ceilings_document(gfx90c):
    path = PROFILES / "gfx90c.yaml"
    doc = ceilings_document(gfx90c, path)
    assert doc["arch"] == "gfx90c"
    assert doc["profile"] == {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert set(doc["theoretical"]) == set(GFX90C_PEAKS)
    assert len(VEGA10_FAMILIES) == 13
    assert set(doc["families"]) == set(VEGA10_FAMILIES) | {"CB", "ZB", "BBS_BH", "I8II_BH"} | {
        "HSS_BH_GB",
        "BBS_BH_GB",
        "I8II_BH_GB",
    }
    # a ceiling for every family of every deck oto ships (the RDNA APUs' demo families BBS_BH_GB, I8II_BH_GB)
    for stock in ("gfx900", "gfx1030", "gfx1100"):
        shipped = read_manifest(shipped_manifest(stock), checked=()).libraries
        assert {Library.parse(name).family.code for name in shipped} <= set(doc["families"]), stock
    assert doc["families"]["I8II_BH_GB"] == doc["families"]["I8II_BH"]
    assert doc["families"]["HHS_BH"]["rate_class"] == "fp16_hpa"
    assert doc["families"]["BBS_BH"]["theoretical_gflops"] == pytest.approx(1613, rel=0.01)

    roof = doc["roofline"]
    assert roof["sustained_bandwidth_gbs"] == gfx90c["memory"]["sustained_bandwidth_gbs"]
    assert roof["ridge_point_flops_per_byte"]["fp32"] == pytest.approx(ridge_point(gfx90c, "fp32"), abs=1e-3)
    assert set(roof["ridge_point_flops_per_byte"]) == set(gfx90c["rates"])

    assert set(doc["examples"]) == {"SB", "DB", "HB", "HHS_BH"}
    sb = doc["examples"]["SB"]
    assert [row["size"][0] for row in sb] == [2**e for e in range(6, 14)]
    assert sb[0]["bound"] == "memory" and sb[-1]["bound"] == "compute"
    assert sb[-1]["pct_peak"] == pytest.approx(100)
    # Plain YAML types only: the stage writes it with safe_dump and others read it back.
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_ceilings_document_without_a_path(gfx90c):
    assert ceilings_document(gfx90c)["profile"] is None


# ---- theoretical and realistic figures (RDNA: dual issue, WMMA, dot products) ----


def test_rdna_theoretical_peaks_are_amds():
    # AMD's published peaks count RDNA3's dual issue: Radeon 780M 8.29 TFLOPS FP32 at 12 CU x 2.7 GHz.
    gfx1103 = load_profile(PROFILES / "gfx1103.yaml")
    assert theoretical_gflops(gfx1103, "fp32") == pytest.approx(12 * 256 * 2.7)
    assert theoretical_gflops(gfx1103, "fp16_hpa") == pytest.approx(
        12 * 512 * 2.7
    )  # WMMA: 512 flops/CU/clock
    gfx1035 = load_profile(PROFILES / "gfx1035.yaml")
    assert theoretical_gflops(gfx1035, "fp32") == pytest.approx(12 * 128 * 2.2)  # RDNA2: no dual issue
    assert theoretical_gflops(gfx1035, "int8") == 4 * theoretical_gflops(gfx1035, "fp32")  # v_dot4_i32_i8


def test_realistic_figures_explain_the_gap():
    gfx1103 = load_profile(PROFILES / "gfx1103.yaml")
    doc = ceilings_document(gfx1103)
    # Tensile's kernels issue no VOPD pairs: half of the FP32 peak; WMMA half/int8 kernels reach theirs
    assert doc["realistic"]["fp32"]["gflops"] == pytest.approx(doc["theoretical"]["fp32"]["gflops"] / 2)
    assert "dual issue" in doc["realistic"]["fp32"]["why"] and "VOPD" in doc["realistic"]["fp32"]["why"]
    assert doc["theoretical"]["fp16_hpa"]["path"].startswith("WMMA")
    assert doc["realistic"]["fp16_hpa"]["gflops"] == doc["theoretical"]["fp16_hpa"]["gflops"]
    assert doc["families"]["SB"]["realistic_gflops"] == pytest.approx(12 * 128 * 2.7, rel=1e-6)
    assert (
        doc["bandwidth"]
        == {
            "theoretical_gbs": 120.0,
            "realistic_gbs": 84.0,
            "why": doc["bandwidth"]["why"],
        }
        and "shares with the CPU" in doc["bandwidth"]["why"]
    )
    assert ceilings_document(load_profile(PROFILES / "gfx1035.yaml"))["theoretical"]["int8"]["path"] == (
        "v_dot4_i32_i8"
    )
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_realistic_clock_is_the_sustained_one(gfx90c):
    # gfx90c holds its peak clock except for HPA half (timing.sustained_clock_mhz), and has no dual issue
    for rate_class in gfx90c["rates"]:
        held = gfx90c["timing"]["sustained_clock_mhz"].get(rate_class, gfx90c["clock_mhz"])
        expected = theoretical_gflops(gfx90c, rate_class) * held / gfx90c["clock_mhz"]
        assert realistic_gflops(gfx90c, rate_class) == pytest.approx(expected)
    why = ceilings_document(gfx90c)["realistic"]["fp16_hpa"]["why"]
    assert "1767.4 MHz (timing.sustained_clock_mhz)" in why
    with pytest.raises(ValueError, match="unknown rate class"):
        realistic_gflops(gfx90c, "fp8")


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_realistic_never_exceeds_theoretical(path):
    profile = load_profile(path)
    for rate_class in profile["rates"]:
        assert 0 < realistic_gflops(profile, rate_class) <= theoretical_gflops(profile, rate_class)
