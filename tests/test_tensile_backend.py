"""The tensile backend against a stand-in Tensile (tests/fake_tensile.py): every outcome class, batching,
bisection of failed batches, asm-cache reuse. Real Tensile runs are in test_tensile_real.py."""

import json
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
from oto.tensile.outputs import name_matches, parse_log, solution_matches, writer_failures
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
        "journal": str(tmp_path / "gpu-journal"),
        "quarantine": str(tmp_path / "registry" / "quarantine.jsonl"),
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


def test_kernel_writer_failure_is_its_own_class(profile, tmp_path):
    """Tensile 4.44 logs a VALU kernel the writer cannot generate only as 'Generating kernel source resulted
    in error 3' (no name): it is a resource failure, not a rejection, alone in its batch or among others."""
    ok = kernel(8)
    bad = Kernel(*_with(kernel(8, tt=(8, 8)), StaggerU=2))
    be = backend(profile, tmp_path)
    res = {r.kernel_id: r for r in be.build(problem(profile), [ok, bad], tmp_path / "work")}
    assert res[ok.id].status == "ok"
    assert res[bad.id].status == "register_overflow"
    assert "errorCode=3: half store requires at least two elements per batch" in res[bad.id].reason
    (alone,) = be.build(problem(profile), [bad], tmp_path / "work2")
    assert alone.status == "register_overflow", alone


def test_a_kernel_over_the_vgpr_budget_is_a_register_overflow_in_tensiles_words(profile, tmp_path):
    """Tensile's assembly writer refuses a kernel over the VGPR budget with 'Generating asm kernel error:
    total vgpr: 259 not in [0, 256]. kernel=<name>', the name as its min naming gives it (no _TT when the
    batch shares a ThreadTile, or any other key): register_overflow with that message, not a duplicate."""
    ok = kernel(8)
    bad = Kernel(*_with(kernel(8, tt=(8, 8)), StaggerU=4))
    be = backend(profile, tmp_path)
    res = {r.kernel_id: r for r in be.build(problem(profile), [ok, bad], tmp_path / "work")}
    assert res[ok.id].status == "ok"
    assert res[bad.id].status == "register_overflow", res[bad.id]
    assert "total vgpr: 259 not in [0, 256]" in res[bad.id].reason
    (alone,) = be.build(problem(profile), [bad], tmp_path / "work2")  # Tensile: "No valid solutions found"
    assert alone.status == "register_overflow", alone


def test_min_names_match_by_the_parameters_they_spell_out():
    """Tensile names a batch's kernels by the keys that differ in it; the macro tile is always there."""
    p = {"ThreadTile": [8, 8], "WorkGroup": [8, 8, 1], "DepthU": 16, "VectorWidth": 1, "StaggerU": 32}
    assert name_matches("Cijk_Ailk_Bljk_DB_MT64x64x16_SN_K1_WG8_8_1", p)
    assert not name_matches("Cijk_Ailk_Bljk_DB_MT64x64x16_SN_K1_WG8_8_1", {**p, "WorkGroup": [16, 8, 1]})
    assert not name_matches("Cijk_Ailk_Bljk_DB_MT128x64x16_SN_K1", p)  # MT = TT x WG
    assert not name_matches("Cijk_Ailk_Bljk_DB_MT64x64x8_SN", p)  # depth
    # what Tensile resolves (VectorWidth -1; StaggerU 0 without buffer loads) is not compared
    assert name_matches("Cijk_Ailk_Bljk_DB_MT64x64x16_SN_SU0_VW2", {**p, "VectorWidth": -1})
    assert not name_matches("Cijk_Ailk_Bljk_DB_MT64x64x16_SN_VW2", p)
    failures = writer_failures(
        "# Writing Kernels...\n"
        "Generating asm kernel error: total vgpr: 263 not in [0, 256]. "
        "kernel=Cijk_Ailk_Bljk_DB_MT64x64x16_SN_K1_WG8_8_1\n\n"
        "Could not find valid memory instruction for operation=GlobalRead, width=0.500000, "
        "kernel=Cijk_Ailk_Bljk_HB_MT32x32x8_SN_GRVW1\n"
    )
    vgpr = "Generating asm kernel error: total vgpr: 263 not in [0, 256]"
    memory = "Could not find valid memory instruction for operation=GlobalRead, width=0.500000"
    assert failures == [
        ("Cijk_Ailk_Bljk_DB_MT64x64x16_SN_K1_WG8_8_1", "register_overflow", vgpr),
        ("Cijk_Ailk_Bljk_HB_MT32x32x8_SN_GRVW1", "compile_error", memory),
    ]


def _with(k: Kernel, **changes) -> tuple[str, dict]:
    p = canonical({**k.params, **changes})
    return candidate_id(p), p


def test_kernels_tensile_builds_as_one_never_share_a_column(profile, tmp_path):
    """LdsPad -1 is 0 on a Source kernel: Tensile forks the two once. oto's ids already agree (resolve); and
    even when handed both, the backend gives the one solution to one kernel only."""
    from oto.tensile import legality

    src = kernel(8)
    a = Kernel(*_with(src, KernelLanguage="Source", LdsPadA=-1, LdsPadB=-1))
    b = Kernel(*_with(src, KernelLanguage="Source", LdsPadA=0, LdsPadB=0))
    lib = Library.parse("Cijk_Ailk_Bjlk_SB")
    assert a.id != b.id  # the raw forms differ ...
    assert candidate_id(legality.resolve(lib, a.params)) == candidate_id(legality.resolve(lib, b.params))
    be = backend(profile, tmp_path)
    prob = problem(profile)
    res = {r.kernel_id: r for r in be.build(prob, [a, b], tmp_path / "work")}
    assert res[a.id].status == "ok"
    assert res[b.id].status == "rejected" and f"same kernel as {a.id}" in res[b.id].reason
    plan = MeasurePlan(
        {a.id: a, b.id: b}, [Size(64, 64, 1, 64)], [Launch(k.id, "candidate", 0, 0) for k in (a, b)]
    )
    by = {s.kernel_id: s for s in be.measure(prob, plan, tmp_path / "work")}
    assert by[a.id].status == "ok" and by[b.id].status != "ok"


def test_initial_stride_families_send_their_index_keys(profile, tmp_path):
    """SBIc is a TensorContraction: the config carries NumIndicesC and the index assignments, and
    GlobalSplitU > 1 (Tensile's BetaOnly writer asserts on UseInitialStridesCD) never reaches Tensile."""
    from oto.tensile import legality
    from oto.tensile.logic_writer import problem_type

    lib = Library.parse("Cijk_Ailk_Bljk_SBIc")
    pt = problem_type(lib)
    assert pt["OperationType"] == "TensorContraction"
    be = backend(profile, tmp_path)
    (res,) = be.build(Problem(lib, profile, pt), [kernel(8)], tmp_path / "work")
    assert res.status == "ok", res
    cfg = yaml.safe_load(next((tmp_path / "work" / "tensile").glob("*/config-build.yaml")).read_text())
    sent = cfg["BenchmarkProblems"][0][0]
    assert sent["IndexAssignmentsA"] == [0, 3, 2] and sent["NumIndicesC"] == 3
    gsu = canonical({**kernel(8).params, "GlobalSplitU": 2})
    verdict = legality.check(lib, gsu)
    assert not verdict.valid and "UseInitialStridesCD" in verdict.reasons[-1]


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


def test_resolve_auto_picks_sim_without_a_gpu(profile, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert resolve({"backend": "auto", "seed": 1}, profile, "s").name == "sim"
    # the probe's cache (and its lock) go beside the assembler cache: in tmp_path, not the checkout's results/
    tensile = {"command": [sys.executable, str(FAKE)], "asm_cache": str(tmp_path / "cache" / "asm.yaml")}
    be = resolve({"backend": "tensile", "tensile": tensile}, profile, "s")
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
        build_library(
            [logic], "gfx90c", tmp_path / "library", {"command": [sys.executable, str(FAKE)]}, "gfx90c"
        )
    with pytest.raises(PackagingError, match="does not start with 'vega10'"):
        build_library(
            [logic], "gfx900", tmp_path / "library", {"command": [sys.executable, str(FAKE)]}, "vega10"
        )


# ---- the measure path: Tensile's real order, sweeps, telemetry, bad input ----


def plan_of(kernels, reference, sizes, reps):
    """A benchmark plan as the benchmark stage makes it (reference bracketing the candidates)."""
    from oto.measurement.benchmarking import interleave_sizes

    cands = [k.id for k in kernels if k.id != reference.id]
    per = {i: cands for i in range(len(sizes))}
    launches = interleave_sizes(per, dict.fromkeys(range(len(sizes)), reference.id), reps, "t")
    return MeasurePlan({k.id: k for k in kernels}, sizes, launches)


def calls_of(tmp_path):
    return sorted((tmp_path / "work" / "tensile" / "client").glob("call-*"))


def test_each_repetition_is_one_client_sweep_in_the_clients_real_order(profile, tmp_path, monkeypatch):
    """Every problem's sweep has the reference; sweeps are freshly permuted; samples follow the order the
    client ran (its own trace); a repetition is a new call, never a re-used cell."""
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("STAND_IN_CLIENT_LOG", str(trace))
    ref, *cands = [kernel(8, tt=t) for t in ((4, 4), (8, 8), (2, 2), (4, 8), (8, 4), (2, 4))]
    ks = [ref, *cands]
    be = backend(profile, tmp_path, telemetry={"source": "none"})
    prob = problem(profile)
    assert all(b.status == "ok" for b in be.build(prob, ks, tmp_path / "work"))
    sizes = [Size(256, 256, 1, 256), Size(512, 256, 2, 128), Size(128, 384, 1, 64)]
    plan = plan_of(ks, ref, sizes, reps=3)
    samples = be.measure(prob, plan, tmp_path / "work")
    assert be.capabilities.launch_order == "reported" and be.capabilities.repetitions_per_call == 1
    assert [s.seq for s in samples] == list(range(len(samples)))
    # every (kernel, size, rep) exactly once: 3 reps x 3 sizes x 6 kernels, the reference once per sweep
    assert len(samples) == 3 * 3 * 6
    assert len({(s.kernel_id, s.size_index, s.rep) for s in samples}) == len(samples)
    assert all(s.status == "ok" for s in samples)
    calls = calls_of(tmp_path)
    assert len(calls) == 3 and {s.sweep for s in samples} == {0, 1, 2}
    lines = [ln.split(" ", 2) for ln in trace.read_text().splitlines()]
    assert len(lines) == len(samples)
    orders = []
    for call in calls:
        ini = call / "ClientParameters.ini"
        assert "num-benchmarks=1" in ini.read_text().splitlines()
        problems = [tuple(int(x) for x in ln.split("=")[1].split(",")) for ln in ini.read_text().splitlines()
                    if ln.startswith("problem-size=")]  # fmt: skip
        orders.append(problems)
    for s, (_run, p, name) in zip(samples, lines, strict=True):
        assert name_matches(name, plan.kernels[s.kernel_id].params)  # the solution the client ran then
        assert tuple(sizes[s.size_index].as_list()) == orders[s.sweep][int(p)]
    for sweep in range(3):
        got = [s for s in samples if s.sweep == sweep]
        for i in range(3):  # the reference is timed in every problem's sweep
            at = [s for s in got if s.size_index == i]
            assert [s.kernel_id for s in at if s.role == "reference"] == [ref.id]
    firsts = {tuple(s.kernel_id for s in samples if s.sweep == w)[:6] for w in range(3)}
    assert len(firsts) > 1  # solution order permuted between sweeps


def test_repetitions_beyond_one_call_take_more_calls(profile, tmp_path):
    ref, c1 = kernel(8), kernel(8, tt=(8, 8))
    be = backend(profile, tmp_path, max_benchmarks=2, telemetry={"source": "none"})
    prob = problem(profile)
    be.build(prob, [ref, c1], tmp_path / "work")
    sizes = [Size(256, 256, 1, 256)]
    samples = be.measure(prob, plan_of([ref, c1], ref, sizes, reps=5), tmp_path / "work")
    calls = calls_of(tmp_path)
    # 5 repetitions at 2 sweeps per call: 3 calls (2 + 2 + 1), each writing as many rows as it ran
    assert len(calls) == 3 and be.capabilities.repetitions_per_call == 2
    runs = [int(next(ln for ln in (c / "ClientParameters.ini").read_text().splitlines()
                     if ln.startswith("num-benchmarks=")).split("=")[1]) for c in calls]  # fmt: skip
    assert runs == [2, 2, 1]
    rows = [len((c / "results.csv").read_text().splitlines()) - 1 for c in calls]
    assert rows == runs
    assert sorted((s.kernel_id, s.rep) for s in samples) == sorted(
        (k.id, r) for k in (ref, c1) for r in range(5)
    )


def _editing_client(tmp_path, edit: str) -> str:
    """The stand-in client, then a Python edit of the results file it wrote (``edit`` gets ``lines``)."""
    script = tmp_path / "edit.py"
    script.write_text(
        "import sys\nfrom pathlib import Path\n"
        "ini = Path(sys.argv[1]).read_text().splitlines()\n"
        "res = Path(next(ln.split('=', 1)[1] for ln in ini if ln.startswith('results-file=')))\n"
        "lines = res.read_text().splitlines()\n" + edit + "\nres.write_text('\\n'.join(lines) + '\\n')\n"
    )
    client = tmp_path / "editing_client"
    client.write_text(
        f'#!/bin/sh\n{sys.executable} {CLIENT} "$@" || exit $?\nexec {sys.executable} {script} "$2"\n'
    )
    client.chmod(0o755)
    return str(client)


@pytest.mark.parametrize(
    "edit, lost",
    [
        ("lines = lines[:-1]", "rows"),  # one problem's row missing
        ("lines = [', '.join(ln.split(', ')[:-1]) for ln in lines]", "column"),  # last solution column gone
    ],
)
def test_a_results_file_with_fewer_rows_or_columns_keeps_what_it_has(profile, tmp_path, edit, lost):
    ref, c1, c2 = kernel(8), kernel(8, tt=(8, 8)), kernel(8, tt=(2, 2))
    be = backend(
        profile, tmp_path, prebuilt_client=_editing_client(tmp_path, edit), telemetry={"source": "none"}
    )
    prob = problem(profile)
    be.build(prob, [ref, c1, c2], tmp_path / "work")
    sizes = [Size(256, 256, 1, 256), Size(128, 128, 1, 128)]
    samples = be.measure(prob, plan_of([ref, c1, c2], ref, sizes, reps=1), tmp_path / "work")
    assert len(calls_of(tmp_path)) == 1  # the client finished: what its file lacks is recorded, not re-run
    assert len(samples) == 6 and len({(s.kernel_id, s.size_index) for s in samples}) == 6
    bad = [s for s in samples if s.status != "ok"]
    good = [s for s in samples if s.status == "ok"]
    if lost == "rows":
        assert len(bad) == 3 and len({s.size_index for s in bad}) == 1
        assert all("1 of 2 planned row(s)" in s.reason and "results.csv" in s.reason for s in bad)
    else:
        assert len(bad) == 2 and len({s.kernel_id for s in bad}) == 1
        assert all("2 solution column(s), the call planned 3: no column for" in s.reason for s in bad)
    assert all(s.status == "crash" and math.isnan(s.time_us) for s in bad)
    assert all(s.time_us > 0 for s in good)


def metrics_root(tmp_path, blob_bytes):
    dev = tmp_path / "sys" / "class" / "drm" / "card0" / "device"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "gpu_metrics").write_bytes(blob_bytes)
    return tmp_path / "sys", dev / "gpu_metrics"


def test_telemetry_is_read_during_each_call_and_goes_with_its_sweep(profile, tmp_path, monkeypatch):
    from gpu_metrics_blobs import renoir
    from oto.measurement.benchmarking import measure_frame
    from oto.measurement.scoring import SWEEP_CLOCK, choose_drift

    root, metrics = metrics_root(tmp_path, renoir(1800))
    monkeypatch.setenv("STAND_IN_CLIENT_GPU_METRICS", str(metrics))
    ref, c1 = kernel(8), kernel(8, tt=(8, 8))
    be = backend(profile, tmp_path, telemetry={"sysfs": str(root), "rate_hz": 50})
    prob = problem(profile)
    be.build(prob, [ref, c1], tmp_path / "work")
    assert be.capabilities.clock_telemetry == "per_sweep"
    df = measure_frame(be, prob, plan_of([ref, c1], ref, [Size(256, 256, 1, 256)], reps=3), tmp_path / "work")
    # the stand-in APU drops 150 MHz per call; each sweep carries its own call's clock
    for sweep, clock in ((0, 1800), (1, 1650), (2, 1500)):
        at = df[df["sweep"] == sweep]
        assert len(at) == 2 and (at["clock_mhz"] == clock).all(), at
        assert (at["temperature_c"] == 60.0 + sweep).all() and (at["power_w"] == 12.0).all()
    assert (df["launch_order"] == "reported").all() and (df["clock_telemetry"] == "per_sweep").all()
    assert choose_drift(df, float(profile["clock_mhz"])).estimator == SWEEP_CLOCK
    # a slower clock, a slower kernel: the times follow the clock read in the same call
    t = df[df["kernel_id"] == ref.id].sort_values("sweep")["time_us"].to_numpy()
    assert t[2] / t[0] == pytest.approx(1800 / 1500, rel=1e-4)


def test_unreadable_telemetry_is_recorded_never_guessed(profile, tmp_path, monkeypatch):
    import struct

    from gpu_metrics_blobs import renoir

    monkeypatch.setenv("PATH", "/nonexistent:" + str(Path(sys.executable).parent))  # no rocm-smi
    root, metrics = metrics_root(tmp_path, struct.pack("<HBB", 120, 1, 3) + bytes(116))  # format 1.3
    ref, c1 = kernel(8), kernel(8, tt=(8, 8))
    prob = problem(profile)
    be = backend(profile, tmp_path, telemetry={"sysfs": str(root)})
    be.build(prob, [ref, c1], tmp_path / "work")
    assert be.capabilities.clock_telemetry == "none"
    samples = be.measure(prob, plan_of([ref, c1], ref, [Size(256, 256, 1, 256)], reps=1), tmp_path / "work")
    assert all(math.isnan(s.clock_mhz) and s.status == "ok" for s in samples)
    assert all("no telemetry" in s.telemetry_note and "format 1.3" in s.telemetry_note for s in samples)
    # the driver's file vanishes mid-run: what the sampler read stays, the death is recorded
    metrics.write_bytes(renoir(1800))
    monkeypatch.setenv("STAND_IN_CLIENT_GPU_METRICS", str(metrics))
    monkeypatch.setenv("STAND_IN_CLIENT_GPU_METRICS_VANISH", "1")
    be = backend(profile, tmp_path, telemetry={"sysfs": str(root), "rate_hz": 50})
    samples = be.measure(prob, plan_of([ref, c1], ref, [Size(256, 256, 1, 256)], reps=2), tmp_path / "work")
    first = [s for s in samples if s.sweep == 0]
    assert all(s.clock_mhz == 1800 and "sampler died" in s.telemetry_note for s in first)
    later = [s for s in samples if s.sweep == 1]
    assert all(math.isnan(s.clock_mhz) and "sampler died" in s.telemetry_note for s in later)
    assert all(s.status == "ok" for s in samples)  # telemetry never costs a measurement


def test_absurd_clock_readings_are_rejected_with_the_reason(profile, tmp_path):
    from gpu_metrics_blobs import renoir

    root, _ = metrics_root(tmp_path, renoir(0))
    ref, c1 = kernel(8), kernel(8, tt=(8, 8))
    be = backend(profile, tmp_path, telemetry={"sysfs": str(root), "rate_hz": 50})
    prob = problem(profile)
    be.build(prob, [ref, c1], tmp_path / "work")
    samples = be.measure(prob, plan_of([ref, c1], ref, [Size(256, 256, 1, 256)], reps=1), tmp_path / "work")
    assert all(math.isnan(s.clock_mhz) and "rejected as absurd" in s.telemetry_note for s in samples)
    assert all(s.temperature_c == 61.5 for s in samples)  # the rest of the reading is still good


def test_a_failed_probe_determines_nothing(profile, tmp_path):
    failing = [sys.executable, "-c", "raise SystemExit(1)"]
    be = TensileBackend(profile, {"command": failing, "asm_cache": str(tmp_path / "asm.yaml")}, "s")
    prov = be.provenance()
    assert prov["tensile_version"] == "unknown"
    assert prov["isa_registered_at_run_time"] == "unknown"
    assert prov["probe"].startswith("failed")


def test_the_probe_is_asked_once_per_install(profile, tmp_path):
    """Each job's provenance carries Tensile's version; the answer is reused from the project's cache until
    the install it came from changes, and a failed probe is never kept."""
    install = tmp_path / "venv" / "Tensile"
    install.mkdir(parents=True)
    (install / "__init__.py").write_text("__version__ = '4.44.0'\n")
    (install / "Common.py").write_text("globalParameters = {}\n")
    calls = tmp_path / "probes.txt"
    answer = {"version": "4.44.0", "python": sys.executable, "path": str(install), "native": {}}
    script = tmp_path / "probe.py"
    script.write_text(
        f"import json, sys\nopen({str(calls)!r}, 'a').write('probe\\n')\nprint(json.dumps({answer!r}))\n"
    )
    cfg = {"command": [sys.executable, str(script)], "asm_cache": str(tmp_path / "cache" / "asm.yaml")}

    def version() -> str:
        return TensileBackend(profile, cfg, "s").provenance()["tensile_version"]

    assert [version(), version(), version()] == ["4.44.0"] * 3
    assert calls.read_text().count("probe") == 1  # later backends (later jobs) read the project's cache
    (install / "Common.py").write_text("globalParameters = {'changed': True}\n")  # Tensile upgraded
    assert version() == "4.44.0"
    assert calls.read_text().count("probe") == 2
    (tmp_path / "cache" / "probe.json").write_text("{not json")  # a damaged cache costs one probe, no more
    assert version() == "4.44.0" and version() == "4.44.0"
    assert calls.read_text().count("probe") == 3

    failing = {**cfg, "command": [sys.executable, "-c", "raise SystemExit(1)"]}
    assert TensileBackend(profile, failing, "s").provenance()["probe"].startswith("failed")
    cached = json.loads((tmp_path / "cache" / "probe.json").read_text())
    assert len(cached) == 1 and next(iter(cached.values()))["info"]["path"] == str(install)


def test_the_kernels_quarantined_on_this_device_are_the_backends_to_avoid(profile, tmp_path):
    """What emit hands the floor (no yardstick at a size whose spoof kernel took the GPU down): the library's
    kernels the quarantine names on this machine's device, not another device's, not another library's."""
    from oto.registry.gpu_journal import Quarantine

    be = backend(profile, tmp_path)
    device = be.journal().device
    quarantine = Quarantine(tmp_path / "registry" / "quarantine.jsonl")
    sb, other = "Cijk_Ailk_Bjlk_SB", "Cijk_Ailk_Bljk_SB"
    for lib, kid, on in ((sb, "k0123456789ab", device), (sb, "kbbbbbbbbbbbb", "gfx1100"),
                         (other, "kcccccccccccc", device)):  # fmt: skip
        record = {"kind": "failed", "kernel_id": kid, "library": lib, "status": "gpu_reset"}
        quarantine.add({**record, "reason": f"took {on} down", "tool_versions": json.dumps({"device": on})})
    assert be.quarantined("Cijk_Ailk_Bjlk_SB") == {"k0123456789ab": f"took {device} down"}
