"""RDNA's own physics (physics-rdna.json) and its last-level cache (the Infinity Cache), and the joint fit of
one physics over several devices (``oto calibrate --joint``). gfx9 keeps physics.json and its times; that is
checked bit for bit over every vega10 solution in bench/RESULTS.md ("RDNA physics"), and here for the model
terms."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from oto.hardware.profile import load_profile
from oto.hardware.simulated import calibration as cal
from oto.hardware.simulated.performance import (
    PHYSICS_FILE,
    PHYSICS_RDNA_FILE,
    Physics,
    SimGPU,
    chip_constants,
    physics_file,
    with_chip,
)
from test_calibration import SB, _synthetic
from test_simgpu import REPO, gfx90c_like

SGEMM = {"ThreadTile": (8, 8), "WorkGroup": (16, 16, 1), "DepthU": 16, "VectorWidth": 4}


def _profile(arch: str) -> dict:
    return load_profile(REPO / "arch_profiles" / f"{arch}.yaml")


def test_rdna_profiles_simulate_with_rdna_physics_and_gfx9_with_its_own():
    for arch in ("gfx1030", "gfx1100", "gfx1035", "gfx1103", "gfx1150"):
        prof = _profile(arch)
        assert physics_file(prof) == PHYSICS_RDNA_FILE
        assert SimGPU(prof).physics == Physics.load(PHYSICS_RDNA_FILE)
    for arch in ("gfx900", "gfx906", "gfx90c", "gfx902"):
        prof = _profile(arch)
        assert physics_file(prof) == PHYSICS_FILE
        assert SimGPU(prof).physics == Physics.load(PHYSICS_FILE)


def test_the_apus_have_no_last_level_cache():
    # Rembrandt (gfx1035), Phoenix (gfx1103) and Strix Point (gfx1150) have no Infinity Cache
    for arch in ("gfx1035", "gfx1103", "gfx1150"):
        prof = _profile(arch)
        assert "last_level_cache" not in prof["memory"]
        assert SimGPU(prof).arch.llc_bytes == 0


def test_last_level_cache_serves_the_working_set_it_holds():
    with_llc = _profile("gfx1030")
    without = copy.deepcopy(with_llc)
    del without["memory"]["last_level_cache"]
    fast, plain = SimGPU(with_llc), SimGPU(without)
    # a thin-K update of 2048 x 2048 (35 MB, inside 128 MB): memory-bound, served by the cache
    held = fast.breakdown("SB", SGEMM, 2048, 2048, 1, 64)
    missed = plain.breakdown("SB", SGEMM, 2048, 2048, 1, 64)
    assert held["time_us"][()] < 0.8 * missed["time_us"][()]
    assert held["mem_cycles"][()] < missed["mem_cycles"][()]
    # far beyond the cache (2 GB) it serves little: within 10% of no cache at all
    big = [g.true_time_us("SB", SGEMM, 16384, 16384, 1, 64)[()] for g in (fast, plain)]
    assert big[0] < big[1] and big[0] > 0.9 * big[1]
    # a cache as fast as DRAM, at DRAM's latency, changes nothing
    same = copy.deepcopy(with_llc)
    same["memory"]["last_level_cache"]["sustained_bandwidth_gbs"] = same["memory"]["sustained_bandwidth_gbs"]
    same["timing"]["llc_latency_ns"] = same["timing"]["memory_latency_ns"]
    sizes = (np.array([64.0, 2048, 5000]), np.array([64.0, 2048, 333]), 1, np.array([64.0, 64, 1000]))
    np.testing.assert_allclose(
        SimGPU(same).true_time_us("SB", SGEMM, *sizes), plain.true_time_us("SB", SGEMM, *sizes), rtol=1e-12
    )


def test_cache_figures_are_chip_constants_only_where_the_profile_has_a_cache():
    rdna, gcn = _profile("gfx1030"), _profile("gfx900")
    knobs = {k.name: (k.lo, k.hi) for k in cal.chip_knobs([], rdna)}
    peak, llc_peak = (
        rdna["memory"]["peak_bandwidth_gbs"],
        rdna["memory"]["last_level_cache"]["peak_bandwidth_gbs"],
    )
    assert knobs["chip:llc_bandwidth_gbs"] == (peak, llc_peak)
    assert knobs["chip:llc_latency_ns"] == (100.0, 2000.0)
    assert not any("llc" in k.name for k in cal.chip_knobs([], gcn))
    assert "llc_latency_ns" not in chip_constants(gcn)
    # set through the fit's and the device profile's paths alike, read back by the simulator
    _, fitted = cal.with_values(["chip:llc_bandwidth_gbs", "chip:llc_latency_ns"], [1500.0, 150.0],
                                Physics.load(PHYSICS_RDNA_FILE), rdna)  # fmt: skip
    other = with_chip(rdna, {"llc_bandwidth_gbs": 1500.0, "llc_latency_ns": 150.0})
    for prof in (fitted, other):
        gpu = SimGPU(prof)
        assert gpu.arch.llc_gbs == 1500.0 and gpu.chip.llc_latency_ns == 150.0
        assert chip_constants(prof)["llc_bandwidth_gbs"] == 1500.0
    assert rdna["memory"]["last_level_cache"]["sustained_bandwidth_gbs"] != 1500.0  # copies, not the input


def test_joint_fit_shares_the_physics_and_keeps_each_devices_chip_constants():
    truth = Physics.from_dict({**Physics.load().to_dict(), "tail_cost": 0.6})
    a, b = gfx90c_like(), gfx90c_like()
    a["timing"] = {"launch_us": 4.0}
    b["arch"], b["timing"] = "gfx90c_b", {"launch_us": 9.0}
    files_a = [_synthetic(SimGPU(a, physics=truth), "Cijk_Ailk_Bljk_SB", SB, 150, 1)]
    files_b = [_synthetic(SimGPU(b, physics=truth), "Cijk_Ailk_Bljk_SB", SB, 150, 2)]
    start = Physics.from_dict({**truth.to_dict(), "tail_cost": 0.2})
    sa, sb = copy.deepcopy(a), copy.deepcopy(b)
    sa["timing"], sb["timing"] = {"launch_us": 6.0}, {"launch_us": 6.0}
    free = {"tail_cost", "gfx90c/chip:launch_us", "gfx90c_b/chip:launch_us"}
    every = [k.name for k in cal.knobs_for(files_a, a) if not k.name.startswith("chip:")]
    every += [
        f"{t}/{k.name}" for t, p in (("gfx90c", a), ("gfx90c_b", b)) for k in cal.chip_knobs(files_a, p)
    ]
    physics, results, knobs = cal.fit_joint(
        [("gfx90c", files_a, sa), ("gfx90c_b", files_b, sb)], start, iterations=30, per_file=1000,
        hold=[n for n in every if n not in free],
    )  # fmt: skip
    assert {k.name for k in knobs} == free
    assert physics.tail_cost == pytest.approx(0.6, abs=0.05)
    assert results["gfx90c"].physics == results["gfx90c_b"].physics == physics
    assert results["gfx90c"].values["chip:launch_us"] == pytest.approx(4.0, rel=0.05)
    assert results["gfx90c_b"].values["chip:launch_us"] == pytest.approx(9.0, rel=0.05)
    assert results["gfx90c_b"].profile["timing"]["launch_us"] == pytest.approx(9.0, rel=0.05)


def test_joint_command_wants_a_logic_folder_and_a_profile_per_device(tmp_path, capsys):
    rdna, gcn = REPO / "arch_profiles" / "gfx1030.yaml", REPO / "arch_profiles" / "gfx900.yaml"
    with pytest.raises(SystemExit):
        cal.main(["--joint", "--device", str(rdna)])
    assert "LOGIC_DIR=PROFILE" in capsys.readouterr().err
    # profiles of two ISA families cannot share one physics
    with pytest.raises(SystemExit):
        cal.main(["--joint", "--device", f"{tmp_path}={rdna}", "--device", f"{tmp_path}={gcn}"])
    assert "different physics" in capsys.readouterr().err
