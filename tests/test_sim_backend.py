"""SimBackend: the Backend protocol over the simulated GPU (build, measure, provenance, ground truth)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from oto.backends import resolve
from oto.backends.base import BUILD_CLASSES, SAMPLE_CLASSES, Kernel, Launch, MeasurePlan, Problem, Size
from oto.backends.sim import SimBackend
from oto.config import config_defaults
from oto.gemm import Library
from oto.hardware.simulated.performance import MODEL_VERSION, chip_version
from oto.tensile.params import candidate_id
from test_simgpu import gfx90c_like

LIB = Library.build("SB", "NN")
PROBLEM = Problem(LIB, gfx90c_like(), {})


def kernel(**params) -> Kernel:
    return Kernel(candidate_id(params), params)


KERNELS = [
    kernel(ThreadTile=[8, 8], WorkGroup=[16, 16, 1], DepthU=16, VectorWidth=4),
    kernel(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=16, VectorWidth=4),
    kernel(ThreadTile=[4, 4], WorkGroup=[8, 8, 1], DepthU=8, VectorWidth=2, GlobalSplitU=4),
]
SIZES = [Size(512, 512, 1, 512), Size(2048, 2048, 1, 2048), Size(1024, 256, 4, 4096)]


def plan(reps: int = 3, kernels=KERNELS, sizes=SIZES) -> MeasurePlan:
    launches = [
        Launch(k.id, "reference" if i == 0 else "candidate", s, r)
        for r in range(reps)
        for s in range(len(sizes))
        for i, k in enumerate(kernels)
    ]
    return MeasurePlan({k.id: k for k in kernels}, sizes, launches)


def backend(stream: str = "Cijk_Ailk_Bljk_SB/gen0", seed: int = 0, **cfg) -> SimBackend:
    return SimBackend(gfx90c_like(), cfg, seed=seed, stream=stream)


def test_resolve_builds_a_sim_backend_with_provenance():
    be = resolve({"backend": "auto", "seed": 3, "sim": {"jitter": 0.05}}, gfx90c_like(), "lib/gen1")
    assert isinstance(be, SimBackend)
    assert (be.name, be.numbers) == ("sim", "simulated")
    prov = be.provenance()
    assert prov["backend"] == "sim" and prov["numbers"] == "simulated"
    assert prov["model_version"] == MODEL_VERSION
    assert (prov["seed"], prov["stream"]) == (3, "lib/gen1")
    assert prov["noise"]["jitter"] == 0.05
    assert set(prov["noise"]) | {"launch_order", "chip"} == set(config_defaults("sim"))
    assert prov["chip_version"] == chip_version(gfx90c_like())  # the chip it runs: no hidden one
    assert prov["capabilities"] == {
        "launch_order": "plan",
        "clock_telemetry": "per_launch",
        "repetitions_per_call": None,
    }


def test_unknown_sim_key_is_refused():
    with pytest.raises(ValueError, match="unknown key"):
        backend(jiter=0.1)


def test_build_reports_one_result_per_kernel_failures_included(tmp_path):
    bad = [
        kernel(ThreadTile=[16, 16], WorkGroup=[16, 16, 1]),  # 256 accumulators
        kernel(ThreadTile=[8, 8], WorkGroup=[16, 16, 1], DepthU=64),  # 128 KiB of LDS
    ]
    results = backend().build(PROBLEM, KERNELS + bad, tmp_path)
    assert [r.kernel_id for r in results] == [k.id for k in KERNELS + bad]
    assert all(r.status in BUILD_CLASSES for r in results)
    assert [r.status for r in results] == ["ok", "ok", "ok", "register_overflow", "rejected"]
    assert results[0].resources == {"vgpr": 121, "sgpr": 63, "lds_bytes": 32768}


def test_measure_is_deterministic_per_seed_and_stream(tmp_path):
    a = backend().measure(PROBLEM, plan(), tmp_path)
    b = backend().measure(PROBLEM, plan(), tmp_path)
    c = backend(stream="Cijk_Ailk_Bljk_SB/gen1").measure(PROBLEM, plan(), tmp_path)
    d = backend(seed=1).measure(PROBLEM, plan(), tmp_path)
    times = [np.array([s.time_us for s in x]) for x in (a, b, c, d)]
    assert a == b
    assert not np.allclose(times[0], times[2])
    assert not np.allclose(times[0], times[3])


def test_samples_follow_plan_order_and_track_ground_truth(tmp_path):
    be = backend(drift=0.0, jitter=0.02, outlier_rate=0.0, hang_rate=0.0, validation_fail_rate=0.0)
    p = plan(reps=20)
    samples = be.measure(PROBLEM, p, tmp_path)
    assert [(s.seq, s.kernel_id, s.size_index, s.rep, s.role) for s in samples] == [
        (i, la.kernel_id, la.size_index, la.rep, la.role) for i, la in enumerate(p.launches)
    ]
    assert all(s.status == "ok" for s in samples)
    for k in KERNELS:
        truth = be.ground_truth(PROBLEM, k.params, SIZES)
        assert truth.shape == (len(SIZES),)
        for si in range(len(SIZES)):
            t = [s.time_us for s in samples if s.kernel_id == k.id and s.size_index == si]
            assert np.median(t) == pytest.approx(truth[si], rel=0.03)
    assert (
        be.noise.clock_us
        >= sum(s.time_us for s in samples) + len(samples) * config_defaults("sim")["cooldown_us"] - 1
    )


def test_drift_moves_measurements_the_same_way_for_neighbours(tmp_path):
    be = backend(drift=0.25, drift_period_s=1.0, jitter=0.0, outlier_rate=0.0, hang_rate=0.0)
    k = KERNELS[0]
    p = MeasurePlan(
        {k.id: k}, [Size(2048, 2048, 1, 2048)], [Launch(k.id, "candidate", 0, r) for r in range(400)]
    )
    t = np.array([s.time_us for s in be.measure(PROBLEM, p, tmp_path)])
    truth = be.ground_truth(PROBLEM, k.params, p.sizes)[0]
    ratio = t / truth
    assert ratio.min() >= 0.99 and ratio.max() <= 1.25 / 0.75 + 0.01  # throttling only, jitter off
    assert ratio.max() - ratio.min() > 0.1  # one virtual second spans a drift period
    assert np.max(np.abs(np.diff(np.log(ratio)))) < 0.1  # consecutive launches see nearly the same factor


def test_samples_carry_the_clock_an_observer_would_read(tmp_path):
    """The clock reading tells the state: ALU-bound time x clock is constant up to jitter and reading noise,
    and ground truth at a read clock is what the kernel takes in that state."""
    quiet = dict(drift=0.25, drift_period_s=1.0, jitter=0.0, outlier_rate=0.0, hang_rate=0.0)
    be = backend(**quiet, clock_noise=0.0)
    k = KERNELS[0]
    size = Size(2048, 2048, 1, 2048)
    p = MeasurePlan({k.id: k}, [size], [Launch(k.id, "candidate", 0, r) for r in range(300)])
    got = be.measure(PROBLEM, p, tmp_path)
    t, mhz = np.array([s.time_us for s in got]), np.array([s.clock_mhz for s in got])
    nominal = gfx90c_like()["clock_mhz"]
    assert mhz.max() <= nominal and mhz.min() >= nominal * 0.75 / 1.25 - 1  # throttling range
    assert np.ptp(mhz) > 0.1 * nominal  # it moves with the drift
    expected = np.array([be.ground_truth(PROBLEM, k.params, [size], c)[0] for c in mhz])
    assert np.allclose(t, expected, rtol=2e-3)  # 1 MHz rounding of the reading
    # A memory-bound state dependence: the same state slows a kernel less when it is less ALU-bound.
    at = [be.ground_truth(PROBLEM, k.params, [size], c)[0] for c in (0.6 * nominal, None)]
    assert 1.0 < at[0] / at[1] <= 1 / 0.6 + 1e-9
    off = backend(**quiet, clock_telemetry=0).measure(PROBLEM, p, tmp_path)
    assert all(math.isnan(s.clock_mhz) for s in off)
    assert [s.time_us for s in off] == t.tolist()  # reading the clock never changes a timing


def test_too_large_problems_fail_fast_without_running(tmp_path):
    sizes = [Size(512, 512, 1, 512), Size(16384, 16384, 1, 16384)]  # 4 x 1 GiB of FP32 > 1.5 GiB
    be = backend()
    samples = be.measure(PROBLEM, plan(reps=1, sizes=sizes), tmp_path)
    big = [s for s in samples if s.size_index == 1]
    assert big and all(s.status == "too_large" and math.isnan(s.time_us) for s in big)
    assert "usable" in big[0].reason
    assert all(s.status == "ok" for s in samples if s.size_index == 0)
    assert be.noise.clock_us < 1e5  # the big launches never ran


def test_validation_failures_are_per_configuration(tmp_path):
    always = backend(validation_fail_rate=1.0).measure(PROBLEM, plan(), tmp_path)
    assert all(s.status == "validation_failed" and math.isnan(s.time_us) for s in always)
    never = backend(validation_fail_rate=0.0, hang_rate=0.0).measure(PROBLEM, plan(), tmp_path)
    assert all(s.status == "ok" for s in never)
    # at a realistic rate a stable subset of many configurations fails, the same one every time
    be = backend(validation_fail_rate=0.05)
    ks = [kernel(ThreadTile=[4, 4], WorkGroup=[16, 16, 1], DepthU=du, WorkGroupMapping=w, StaggerU=su)
          for du in (8, 16, 32) for w in (1, 2, 4, 8, 16) for su in (0, 2, 4, 8, 16, 32)]  # fmt: skip
    fails = {k.id for k in ks if be.gpu.fails_validation(LIB.family, k.params, 0.05)}
    assert 0 < len(fails) < 0.2 * len(ks)
    samples = be.measure(PROBLEM, plan(reps=1, kernels=ks, sizes=SIZES[:1]), tmp_path)
    assert {s.kernel_id for s in samples if s.status == "validation_failed"} == fails


def test_hangs_are_reported_as_timeouts(tmp_path):
    samples = backend(hang_rate=0.2, timeout_us=1e5).measure(PROBLEM, plan(reps=30), tmp_path)
    hung = [s for s in samples if s.status == "timeout"]
    assert 0.1 < len(hung) / len(samples) < 0.3
    assert all(math.isnan(s.time_us) and "no completion" in s.reason for s in hung)
    assert {s.status for s in samples} <= set(SAMPLE_CLASSES)


def test_unbuilt_kernel_in_plan_crashes_instead_of_timing(tmp_path):
    bad = kernel(ThreadTile=[16, 16], WorkGroup=[16, 16, 1])
    samples = backend().measure(PROBLEM, plan(reps=1, kernels=[KERNELS[0], bad]), tmp_path)
    assert all(s.status == "crash" for s in samples if s.kernel_id == bad.id)
    with pytest.raises(ValueError, match="does not list"):
        backend().measure(PROBLEM, MeasurePlan({}, SIZES, [Launch("knope", "candidate", 0, 0)]), tmp_path)


def test_pace_stretches_wall_time_without_changing_numbers(tmp_path):
    quick = backend().measure(PROBLEM, plan(reps=2), tmp_path)
    kernel_s = sum(s.time_us for s in quick if s.status == "ok") / 1e6
    start = time.perf_counter()
    paced = backend(pace=0.2 / kernel_s).measure(PROBLEM, plan(reps=2), tmp_path)
    assert time.perf_counter() - start >= 0.19
    assert paced == quick
    with pytest.raises(ValueError, match="pace"):
        backend(pace=-1)


def test_fifty_thousand_launches_in_one_plan(tmp_path):
    ks = [kernel(ThreadTile=[a, b], WorkGroup=[16, 16, 1], DepthU=du, VectorWidth=2)
          for a in (2, 4, 8) for b in (2, 4, 8) for du in (8, 16, 32)]  # fmt: skip
    sizes = [Size(m, n, 1, k) for m in (256, 1024, 3000) for n in (512, 2048) for k in (128, 1024, 4096)]
    p = plan(reps=int(np.ceil(50_000 / (len(ks) * len(sizes)))), kernels=ks, sizes=sizes)
    assert len(p.launches) >= 50_000
    samples = backend().measure(PROBLEM, p, tmp_path)
    assert len(samples) == len(p.launches)
    assert [s.seq for s in samples] == list(range(len(p.launches)))


def test_sweeps_order_runs_the_plan_as_tensiles_client_would(tmp_path):
    """sim.launch_order: sweeps — one sweep per repetition, every kernel of a problem back to back with the
    size's reference, orders permuted per sweep, one clock reading per sweep."""
    from oto.measurement.benchmarking import interleave

    be = backend(launch_order="sweeps")
    caps = be.capabilities
    assert (caps.launch_order, caps.clock_telemetry, caps.repetitions_per_call) == (
        "reported",
        "per_sweep",
        1,
    )
    ks = KERNELS[:3]
    ref = ks[0].id
    launches = interleave([k.id for k in ks[1:]], {0: ref, 1: ref}, 2, 3, "t")
    got = be.measure(PROBLEM, MeasurePlan({k.id: k for k in ks}, SIZES[:2], launches), tmp_path)
    assert [s.seq for s in got] == list(range(len(got))) == list(range(3 * 2 * 3))
    assert [s.sweep for s in got] == [r for r in range(3) for _ in range(6)]
    assert all(s.rep == s.sweep for s in got)
    for sweep in range(3):
        cells = [s for s in got if s.sweep == sweep]
        assert len({s.clock_mhz for s in cells}) == 1  # one reading per sweep
        for size in range(2):  # a problem's kernels back to back, its reference among them, once
            at = [i for i, s in enumerate(cells) if s.size_index == size]
            assert at == list(range(at[0], at[0] + 3))
            assert [cells[i].role for i in at].count("reference") == 1
    orders = {tuple(s.kernel_id for s in got if s.sweep == w)[:3] for w in range(3)}
    assert len(orders) > 1
    assert backend(launch_order="sweeps", clock_telemetry=0).capabilities.clock_telemetry == "none"
    with pytest.raises(ValueError, match="sim.launch_order"):
        backend(launch_order="random")


@pytest.mark.parametrize("order", ["plan", "sweeps"])
def test_simulate_is_measure_as_arrays(tmp_path, order):
    """The rocBLAS client reads simulate's arrays; the stages read measure's samples: the same launches,
    the same draws, outcomes of every kind (too large, hung, failed validation, ok) in the same order."""
    sizes = [*SIZES, Size(16384, 16384, 1, 16384)]  # the last one does not fit in memory
    cfg = {"launch_order": order, "hang_rate": 0.1, "timeout_us": 3e3, "validation_fail_rate": 0.3}
    the_plan = plan(reps=4, sizes=sizes)
    samples = backend(**cfg).measure(PROBLEM, the_plan, tmp_path)
    run = backend(**cfg).simulate(PROBLEM, the_plan)
    assert {s.status for s in samples} >= {"ok", "timeout", "too_large"}
    assert [(la.kernel_id, la.size_index, la.rep) for la in run.launches] == [
        (s.kernel_id, s.size_index, s.rep) for s in samples
    ]
    assert run.status.tolist() == [s.status for s in samples]
    assert run.reason.tolist() == [s.reason for s in samples]
    np.testing.assert_array_equal(run.times, [s.time_us for s in samples])
    np.testing.assert_array_equal(run.clock_mhz, [s.clock_mhz for s in samples])
    assert run.sweep.tolist() == [s.sweep for s in samples]
    assert backend(**cfg).simulate(PROBLEM, MeasurePlan({}, SIZES, [])).launches == []


def test_a_race_s_rounds_reuse_the_model_s_truth_without_changing_a_number(tmp_path):
    """The noise-free times a backend remembers between plans (a race's rounds) are those of the kernel's
    parameters at the plan's sizes: forgetting them between plans gives the same samples, and a kernel id
    that names other parameters in a later plan is timed as those."""
    first, again = plan(2), plan(3)
    other = {KERNELS[0].id: Kernel(KERNELS[0].id, KERNELS[1].params), **{k.id: k for k in KERNELS[1:]}}
    swapped = MeasurePlan(other, SIZES, again.launches)
    remembered, fresh = backend(), backend()
    got = []
    for be in (remembered, fresh):
        runs = []
        for p in (first, again, swapped, plan(2, sizes=SIZES[::-1])):
            runs.append(be.simulate(PROBLEM, p).times)
            if be is fresh:
                be._truth.clear()
        got.append(runs)
    for a, b in zip(*got, strict=True):
        np.testing.assert_array_equal(a, b)
    swapped_run = remembered.simulate(PROBLEM, swapped)  # K0's id now names K1's parameters

    def mean_at(kid: str, size: int) -> float:
        at = [i for i, la in enumerate(swapped_run.launches) if la.kernel_id == kid and la.size_index == size]
        return float(np.mean(swapped_run.times[at]))

    # at 2048^3 K0's own parameters are ~25% faster than K1's: here the two ids time alike
    assert mean_at(KERNELS[0].id, 1) / mean_at(KERNELS[1].id, 1) == pytest.approx(1.0, abs=0.1)
