"""The device, not just the arch: device facts parsed from captured rocminfo, KFD, sysfs and dmidecode output,
and the arch profile refined for the device (its CUs, clock and memory set the ceilings), within the arch's
device range."""

from __future__ import annotations

import copy

import pytest
import yaml
from fleet_helpers import DATA, make_root, runner
from oto.fleet.device import (
    DeviceFacts,
    device_profile,
    gfx_from_target_version,
    parse_dmidecode_memory,
    parse_dpm_levels,
    parse_key_values,
    parse_memory_arg,
    parse_rocminfo,
    read_facts,
)
from oto.hardware.ceilings import ceilings_document, roofline_gflops, theoretical_gflops
from oto.hardware.device_profile import DeviceProfileError, check_device_profile
from oto.hardware.profile import load_profile, profile_path
from oto.run.plan import PlanError, plan_run
from workflow_helpers import REPO

ARCH_FILE = REPO / "arch_profiles" / "gfx90c.yaml"


@pytest.fixture(scope="module")
def arch_profile():
    return load_profile(ARCH_FILE)


def test_rocminfo_gives_the_gpu_agent_its_cus_clock_and_chip():
    agents = parse_rocminfo((DATA / "rocminfo_gfx90c_8cu.txt").read_text())
    assert [a["Device Type"] for a in agents] == ["CPU", "GPU"]
    gpu = agents[1]
    assert gpu["Name"] == "gfx90c" and gpu["Compute Unit"] == "8"
    assert gpu["Max Clock Freq. (MHz)"] == "1900" and gpu["Chip ID"] == "5688(0x1638)"
    assert gpu["Marketing Name"] == "AMD Radeon Graphics"  # not the ISA block's Name further down


def test_kfd_topology_names_the_physical_isa_and_counts_cus():
    kv = parse_key_values((DATA / "kfd_node_gfx90c_8cu.txt").read_text())
    assert gfx_from_target_version(int(kv["gfx_target_version"])) == "gfx90c"
    assert gfx_from_target_version(90000) == "gfx900" and gfx_from_target_version(100305) == "gfx1035"
    assert gfx_from_target_version(90099) is None and gfx_from_target_version(0) is None
    assert int(kv["simd_count"]) // int(kv["simd_per_cu"]) == 8
    assert parse_dpm_levels((DATA / "pp_dpm_sclk_1900.txt").read_text()) == [400, 1200, 1900]


@pytest.mark.parametrize(
    "name, kind, mts, bits, gbs",
    [
        ("dmidecode_ddr4_4gb_32gb.txt", "ddr4", 3200, 128, 51.2),  # the volunteer's 36 GB: two channels
        ("dmidecode_ddr4_single.txt", "ddr4", 2666, 64, 21.33),  # one module, configured slower: one channel
        ("dmidecode_lpddr4.txt", "lpddr4", 4266, 128, 68.26),  # soldered LPDDR4x, 4 x 32 bit
    ],
)
def test_dmidecode_memory_gives_type_speed_and_width(name, kind, mts, bits, gbs):
    mem = parse_dmidecode_memory((DATA / name).read_text())
    assert (mem["type"], mem["mts"], mem["bus_bits"]) == (kind, mts, bits)
    facts = DeviceFacts(memory_type=mem["type"], memory_mts=mem["mts"], memory_bus_bits=mem["bus_bits"])
    assert facts.peak_bandwidth_gbs == pytest.approx(gbs, abs=0.01)


def test_a_stated_memory_is_parsed_and_a_bad_one_is_refused():
    assert parse_memory_arg("LPDDR4x-4266") == {"type": "lpddr4x", "mts": 4266, "bus_bits": 128}
    assert parse_memory_arg("ddr4-3200/64")["bus_bits"] == 64
    with pytest.raises(ValueError, match="TYPE-SPEED"):
        parse_memory_arg("fast")


def test_facts_of_the_volunteers_laptop_name_their_sources(tmp_path):
    root = make_root(tmp_path)
    facts = read_facts(root, runner(root))
    assert (facts.arch, facts.compute_units, facts.clock_mhz) == ("gfx90c", 8, 1900)
    assert facts.memory_kind == "ddr4-3200" and facts.peak_bandwidth_gbs == 51.2
    assert facts.carve_out_bytes == 2 << 30 and facts.pci_device == "1638"
    assert facts.cpu == "AMD Ryzen 7 5700U with Radeon Graphics"
    assert facts.sources["compute_units"] == "kfd" and facts.sources["memory_mts"] == "dmidecode"
    assert facts.sources["gpu_name"] == "rocminfo" and facts.sources["carve_out_bytes"] == "sysfs"
    assert facts.driver == "amdgpu of kernel 6.9.3-76060903-generic"
    (root / "sys/module/amdgpu").mkdir(parents=True)
    (root / "sys/module/amdgpu/version").write_text("6.7.0\n")
    assert read_facts(root, runner(root)).driver == "amdgpu 6.7.0 (DKMS)"


def test_without_kfd_rocminfo_and_sysfs_answer_and_without_dmidecode_memory_is_unknown(tmp_path):
    root = make_root(tmp_path, kfd=False, dmidecode=None)
    facts = read_facts(root, runner(root))
    assert (facts.arch, facts.compute_units, facts.clock_mhz) == ("gfx90c", 8, 1900)
    assert facts.sources["compute_units"] == "rocminfo"
    assert facts.memory_kind is None and facts.peak_bandwidth_gbs is None
    stated = read_facts(root, runner(root), memory="lpddr4x-4266")
    assert stated.memory_kind == "lpddr4x-4266" and stated.sources["memory_mts"] == "tester"
    saved = tmp_path / "dmidecode-memory.txt"
    saved.write_text((DATA / "dmidecode_ddr4_single.txt").read_text())
    from_file = read_facts(root, runner(root), memory_info=saved)
    assert from_file.memory_bus_bits == 64 and "dmidecode-memory.txt" in from_file.sources["memory_mts"]


def test_no_gpu_no_facts(tmp_path):
    facts = read_facts(tmp_path, lambda cmd: None)
    assert facts.arch is None and facts.compute_units is None and facts.sources == {}


def test_the_device_profile_refines_ceilings_for_this_device(tmp_path, arch_profile):
    root = make_root(tmp_path)
    prof = device_profile(arch_profile, read_facts(root, runner(root)), "arch_profiles/gfx90c.yaml")
    assert prof["compute_units"] == 8 and prof["clock_mhz"] == 1900
    # 8 CU x 4 SIMD x 16 lanes x 2 x 1.9 GHz, against the arch profile's 5600U (7 CU at 1.8 GHz)
    assert theoretical_gflops(prof, "fp32") == pytest.approx(1945.6)
    assert theoretical_gflops(arch_profile, "fp32") == pytest.approx(1612.8)
    assert ceilings_document(prof)["theoretical"]["fp32"]["gflops"] == pytest.approx(1945.6)
    # memory-bound sizes follow the device's bandwidth: LPDDR4x raises the roofline of a skinny GEMM
    lp = make_root(tmp_path, name="lp", dmidecode="dmidecode_lpddr4.txt")
    prof_lp = device_profile(arch_profile, read_facts(lp, runner(lp)), "gfx90c.yaml")
    assert prof_lp["memory"]["peak_bandwidth_gbs"] == 68.26
    ratio = arch_profile["memory"]["sustained_bandwidth_gbs"] / arch_profile["memory"]["peak_bandwidth_gbs"]
    assert prof_lp["memory"]["sustained_bandwidth_gbs"] == pytest.approx(68.26 * ratio, abs=0.01)
    assert roofline_gflops(prof_lp, "DB", 4096, 1, 1, 4096) > roofline_gflops(prof, "DB", 4096, 1, 1, 4096)
    assert prof["device"]["sources"]["compute_units"] == "kfd" and prof["device"]["refines"]
    assert "machine_id" not in yaml.safe_dump(prof) and "0123456789abcdef" not in yaml.safe_dump(prof)


def test_a_small_carve_out_lowers_the_usable_memory(tmp_path, arch_profile):
    root = make_root(tmp_path, vram_bytes=512 << 20)
    prof = device_profile(arch_profile, read_facts(root, runner(root)), "gfx90c.yaml")
    assert prof["memory"]["usable_device_memory_bytes"] == int(0.9 * (512 << 20))


def test_facts_outside_the_arch_range_are_refused(tmp_path, arch_profile):
    root = make_root(tmp_path, cus=12)
    with pytest.raises(DeviceProfileError, match="compute_units.*outside the range of gfx90c devices"):
        device_profile(arch_profile, read_facts(root, runner(root)), "gfx90c.yaml")


def test_a_device_profile_may_refine_only_cus_clock_and_memory(tmp_path, arch_profile):
    root = make_root(tmp_path)
    prof = device_profile(arch_profile, read_facts(root, runner(root)), "gfx90c.yaml")
    check_device_profile(arch_profile, prof, "dev.yaml")
    bad = copy.deepcopy(prof)
    bad["rates"]["fp64"] = 1.0
    with pytest.raises(DeviceProfileError, match=r"dev.yaml: field 'rates': differs from the arch profile"):
        check_device_profile(arch_profile, bad, "dev.yaml")
    bad = copy.deepcopy(prof)
    bad["memory"]["shared_with_cpu"] = False
    with pytest.raises(DeviceProfileError, match="memory.shared_with_cpu"):
        check_device_profile(arch_profile, bad, "dev.yaml")
    bad = copy.deepcopy(prof)
    bad["clock_mhz"] = 2500
    with pytest.raises(DeviceProfileError, match="clock_mhz"):
        check_device_profile(arch_profile, bad, "dev.yaml")


def test_the_device_id_is_stable_per_machine_and_hides_the_machine_id(tmp_path):
    a = read_facts(r := make_root(tmp_path, name="a"), runner(r))
    a2 = read_facts(r2 := make_root(tmp_path, name="a2"), runner(r2))
    b = read_facts(r3 := make_root(tmp_path, name="b", machine_id="f" * 32), runner(r3))
    assert a.device_id() == a2.device_id() != b.device_id()
    assert a.device_id().startswith("d") and len(a.device_id()) == 13
    assert "machine_id" not in a.public()


def test_the_plan_uses_a_device_profile_named_in_the_config(tmp_path, monkeypatch, arch_profile):
    monkeypatch.chdir(REPO)
    root = make_root(tmp_path)
    prof = device_profile(arch_profile, read_facts(root, runner(root)), str(ARCH_FILE))
    path = tmp_path / "device" / "gfx90c.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(prof))
    plan = plan_run({"arch": "gfx90c", "families": ["DB"], "device_profile": str(path)})
    assert plan.profile_file == str(path)
    assert plan_run({"arch": "gfx90c", "families": ["DB"]}).profile_file == str(profile_path("gfx90c"))
    prof["compute_units"] = 64
    path.write_text(yaml.safe_dump(prof))
    with pytest.raises(PlanError, match=r"gfx90c.yaml: field 'compute_units': 64 is outside the range"):
        plan_run({"arch": "gfx90c", "families": ["DB"], "device_profile": str(path)})
    with pytest.raises(PlanError, match="field 'device_profile'.*not found"):
        plan_run({"arch": "gfx90c", "families": ["DB"], "device_profile": str(tmp_path / "none.yaml")})
