"""The tensile backend against a stand-in Tensile (tests/fake_tensile.py): every outcome class, batching,
bisection of failed batches, asm-cache reuse. Real Tensile runs are in test_tensile_real.py."""

import math
import sys
from pathlib import Path

import pytest
import yaml
from oto.backends import resolve
from oto.backends.base import Kernel, Launch, MeasurePlan, Problem, Size
from oto.backends.tensile import TensileBackend
from oto.gemm import Library
from oto.tensile.benchmark_config import benchmark_config
from oto.tensile.install import TensileUnavailable
from oto.tensile.outputs import name_matches, parse_log, solution_matches
from oto.tensile.params import candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(__file__).with_name("fake_tensile.py")
CLIENT = Path(__file__).with_name("stand_in_client.py")
PT = {
    "OperationType": "GEMM",
    "DataType": 0,
    "TransposeA": False,
    "TransposeB": True,
    "UseBeta": True,
    "Batched": True,
}


@pytest.fixture
def profile():
    return yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())


def kernel(wgm, tt=(4, 4), du=16):
    p = canonical(
        {
            "ThreadTile": list(tt),
            "WorkGroup": [16, 16, 1],
            "DepthU": du,
            "VectorWidth": 4,
            "WorkGroupMapping": wgm,
        }
    )
    return Kernel(candidate_id(p), p)


def backend(profile, tmp_path, **extra):
    client = tmp_path / "tensile_client"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {CLIENT} "$@"\n')
    client.chmod(0o755)
    cfg = {
        "command": [sys.executable, str(FAKE)],
        "asm_cache": str(tmp_path / "cache" / "asm.yaml"),
        "prebuilt_client": str(client),
        "batch_size": 8,
        "timeout_s": 20,
        **extra,
    }
    return TensileBackend(profile, cfg, "test")


def problem(profile):
    return Problem(Library.parse("Cijk_Ailk_Bjlk_SB"), profile, PT)


def test_build_classifies_every_outcome_and_bisects_a_failed_batch(profile, tmp_path):
    ks = [kernel(8), kernel(1), kernel(2), kernel(4, tt=(8, 8)), kernel(8, tt=(8, 8)), kernel(16, tt=(2, 2))]
    be = backend(profile, tmp_path)
    res = {r.kernel_id: r for r in be.build(problem(profile), ks, tmp_path / "work")}
    assert [res[k.id].status for k in ks] == [
        "ok",
        "rejected",
        "register_overflow",
        "compile_error",
        "ok",
        "ok",
    ]
    assert "fake rule says no" in res[ks[1].id].reason
    assert "too many vgprs" in res[ks[2].id].reason
    assert "rc 1" in res[ks[3].id].reason and "tensile-build.log" in res[ks[3].id].reason
    assert res[ks[0].id].resources["lds_bytes"] == 4096 * 4
    # each run's log is kept; the assembler was probed once, every later run used the cache
    logs = list((tmp_path / "work" / "tensile").glob("*/tensile-build.log"))
    assert len(logs) >= 3
    calls = (tmp_path / "cache" / "calls.txt").read_text().split("\n")
    assert calls[0].startswith("probe") and all(c.startswith("cached") for c in calls[1:] if c)


def test_measure_maps_columns_and_records_failures(profile, tmp_path):
    good, good2, invalid = kernel(8), kernel(8, tt=(8, 8)), kernel(16, tt=(2, 2))
    be = backend(profile, tmp_path)
    prob = problem(profile)
    built = be.build(prob, [good, good2, invalid], tmp_path / "work")
    assert all(b.status == "ok" for b in built)
    sizes = [Size(256, 256, 1, 256), Size(512, 512, 1, 512)]
    launches = [
        Launch(k.id, "candidate", s, r) for r in range(2) for s in range(2) for k in (good, good2, invalid)
    ]
    plan = MeasurePlan({k.id: k for k in (good, good2, invalid)}, sizes, launches)
    samples = be.measure(prob, plan, tmp_path / "work")
    assert [s.seq for s in samples] == list(range(len(launches)))
    by = {(s.kernel_id, s.size_index, s.rep): s for s in samples}
    s = by[(good.id, 1, 1)]
    assert s.status == "ok" and s.time_us == pytest.approx(2 * 512**3 / (10 * 16 + 16) / 1e3, rel=1e-5)
    assert by[(good2.id, 0, 0)].time_us == pytest.approx(2 * 256**3 / (10 * 64 + 16) / 1e3, rel=1e-5)
    assert all(by[(invalid.id, i, r)].status == "validation_failed" for i in range(2) for r in range(2))
    # measure reused the build's batch: same candidates, so Tensile's solution cache would match
    cfgs = sorted((tmp_path / "work" / "tensile").glob("*/config-*.yaml"))
    groups = [yaml.safe_load(p.read_text())["BenchmarkProblems"][0][1]["ForkParameters"] for p in cfgs]
    assert groups[0] == groups[1]


def test_crash_and_hang_lose_only_the_bad_kernel(profile, tmp_path):
    ok1, crash, ok2, hang = kernel(8), kernel(32, tt=(8, 8)), kernel(8, tt=(2, 2)), kernel(64, tt=(8, 4))
    be = backend(profile, tmp_path, timeout_s=6)
    prob = problem(profile)
    ks = [ok1, crash, ok2, hang]
    assert all(b.status == "ok" for b in be.build(prob, ks, tmp_path / "work"))
    sizes = [Size(128, 128, 1, 128)]
    plan = MeasurePlan({k.id: k for k in ks}, sizes, [Launch(k.id, "candidate", 0, 0) for k in ks])
    by = {s.kernel_id: s for s in be.measure(prob, plan, tmp_path / "work")}
    assert by[ok1.id].status == "ok" and by[ok2.id].status == "ok"
    assert by[crash.id].status == "crash" and "rc 139" in by[crash.id].reason
    assert by[hang.id].status == "timeout" and math.isnan(by[hang.id].time_us)


def test_measure_needs_a_prebuilt_client(profile, tmp_path):
    be = backend(profile, tmp_path, prebuilt_client=None)
    k = kernel(8)
    plan = MeasurePlan({k.id: k}, [Size(64, 64, 1, 64)], [Launch(k.id, "candidate", 0, 0)])
    with pytest.raises(TensileUnavailable, match="prebuilt_client"):
        be.measure(problem(profile), plan, tmp_path)


def test_unknown_setting_and_missing_tensile_are_clear(profile, monkeypatch):
    with pytest.raises(ValueError, match="unknown key"):
        TensileBackend(profile, {"command": ["x"], "bogus": 1}, "s")
    monkeypatch.delenv("OTO_TENSILE_PYTHON", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TensileUnavailable, match="OTO_TENSILE_PYTHON"):
        TensileBackend(profile, {}, "s")


def test_resolve_auto_picks_sim_without_a_gpu(profile, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert resolve({"backend": "auto", "seed": 1}, profile, "s").name == "sim"
    be = resolve({"backend": "tensile", "tensile": {"command": [sys.executable, str(FAKE)]}}, profile, "s")
    assert be.name == "tensile" and be.numbers == "measured"
    assert be.provenance()["isa_registered_at_run_time"] is True


def test_parse_log_of_real_tensile_joins_wrapped_names(golden_dir):
    text = (golden_dir / "benchmark" / "tensile-stdout-stderr.log").read_text()
    rejections, overflows = parse_log(text)
    assert overflows == []
    assert len(rejections) == 1
    name, reasons = rejections[0]
    assert name.startswith("Cijk_Ailk_Bjlk_SB_MT64x64x8_") and name.endswith("_WG16_16_1_WGM8_WGMTB")
    assert reasons == [
        "GlobalLoadVectorWidthA 2 must be == VectorWidth 4 or == 1",
        "GlobalLoadVectorWidthB 2 must be == VectorWidth 4 or == 1",
    ]
    rejected = {
        "ThreadTile": [4, 4],
        "WorkGroup": [16, 16, 1],
        "DepthU": 8,
        "VectorWidth": 4,
        "GlobalSplitU": 1,
        "PrefetchGlobalRead": 1,
        "PrefetchLocalRead": 1,
        "WorkGroupMapping": 8,
        "KernelLanguage": "Assembly",
    }
    assert name_matches(name, rejected)
    assert not name_matches(name, {**rejected, "ThreadTile": [8, 8]})


def test_solutions_of_real_tensile_match_their_candidates(golden_dir):
    data = golden_dir / "benchmark" / "out" / "1_BenchmarkProblems" / "Cijk_Ailk_Bjlk_SB_00" / "Data"
    sols = yaml.safe_load((data / "00_Final.yaml").read_text())[2:]
    base = {
        "DepthU": 8,
        "VectorWidth": -1,
        "PrefetchGlobalRead": 1,
        "PrefetchLocalRead": 1,
        "GlobalSplitU": 1,
        "KernelLanguage": "Assembly",
    }
    cands = [
        {**base, "ThreadTile": tt, "WorkGroup": wg}
        for tt in ([4, 4], [8, 8])
        for wg in ([16, 16, 1], [8, 8, 1])
    ]
    hits = [[j for j, s in enumerate(sols) if solution_matches(s, c)] for c in cands]
    # golden order: MT32 (TT4 WG8), MT128 (TT8 WG16), MT64 (TT8 WG8); TT4 WG16 was rejected
    assert hits == [[], [0], [1], [2]]


def test_benchmark_config_uses_exact_groups(profile):
    ks = [kernel(8), kernel(8, tt=(8, 8))]
    doc = benchmark_config(PT, [k.params for k in ks], [[64, 64, 1, 64]], "gfx90c", 3)
    group = doc["BenchmarkProblems"][0][1]
    assert group["ForkParameters"] == [{"Groups": [[dict(k.params) for k in ks]]}]
    assert group["BenchmarkFinalParameters"] == [{"ProblemSizes": [{"Exact": [64, 64, 1, 64]}]}]
    g = doc["GlobalParameters"]
    assert g["KernelTime"] is True and g["NumElementsToValidate"] > 0 and g["SleepPercent"] > 0
    assert g["NumBenchmarks"] == 3 and g["Architecture"] == "gfx90c"


def test_tensile_create_library_failure_names_the_log(tmp_path):
    from oto.tensile.create_library import PackagingError, build_library

    logic = tmp_path / "gfx90c_Cijk_Ailk_Bjlk_SB.yaml"
    logic.write_text("- {MinimumRequiredVersion: 4.44.0}\n- gfx90c\n")
    with pytest.raises(PackagingError, match=r"rc 1.*tensile_create_library\.log.*KeyError"):
        build_library([logic], "gfx90c", tmp_path / "library", {"command": [sys.executable, str(FAKE)]})
    with pytest.raises(PackagingError, match="does not start with 'vega10'"):
        build_library([logic], "gfx900", tmp_path / "library", {"command": [sys.executable, str(FAKE)]})
