"""rocBLAS's own clients (oto.rocblas): rocblas-bench and rocblas-test output read per size, the client
runners (a stand-in rocblas-bench with a crash, a hang, a malformed line and a verification failure; the
simulated GPU behind the same interface), the verify decision and the compare A/B statistics.

The outputs below are small samples written for these tests in the formats rocBLAS 4.4.0 defines (ROCm/rocBLAS
commit b520bc83: clients/include/argument_model.hpp for rocblas-bench, clients/gtest/blas3/gemm_gtest.cpp and
clients/common/gtest_helpers.cpp for rocblas-test's names and failures)."""

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from oto.config import validate_config
from oto.deck.sources import load_deck
from oto.registry.gpu_journal import GPU_RESET, GpuJournal, Quarantine
from oto.rocblas.bench_output import parse_bench_output
from oto.rocblas.clients import Arm, RocblasBenchRunner, SimulatedClientRunner, arm_kernels, bench_arguments
from oto.rocblas.compare import compare_scores, family_summary, interleaved_schedule, run_compare
from oto.rocblas.gtest_output import gemm_test_name, parse_gtest_output
from oto.rocblas.verify import (
    NEAREST_ROW,
    SPOOF_KERNEL,
    VerifyRow,
    decide,
    removed_kernels,
    run_verify,
    tolerance,
)
from oto.tensile.params import candidate_id, canonical

ROOT = Path(__file__).resolve().parents[1]

BENCH_VERIFIED = """\
rocBLAS-commit-hash: b520bc83f

Tensile-commit-hash: 7a2f5b2ea

Query device success: there are 1 devices
-------------------------------------------------------------------------------
Device ID 0 : AMD Radeon Graphics gfx900:xnack-
with 0.5 GB memory, max. SCLK 1800 MHz, max. MCLK 1600 MHz, compute capability 9.0
maxGridDimX 2147483647, sharedMemPerBlock 65.5 KB, maxThreadsPerBlock 1024, warpSize 64
-------------------------------------------------------------------------------

rocblas-bench INFO: lda < min_lda, set lda = 512
transA,transB,M,N,K,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,batch_count,cold_iters,hot_iters,\
rocblas-Gflops,us,CPU-Gflops,CPU-us,norm_error_1
N,T,512,256,128,1,512,65536,0,256,32768,512,131072,4, 2, 10, 361.513, 371.32,4.1,32713.1,2.35e-07
"""


def test_rocblas_bench_output_gives_size_time_gflops_and_norm():
    out = parse_bench_output(BENCH_VERIFIED)
    assert out.problems == [] and out.notes == ["rocblas-bench INFO: lda < min_lda, set lda = 512"]
    (row,) = out.rows
    assert row.size == (512, 256, 4, 128) and row.time_us == 371.32 and row.gflops == 361.513
    assert row.norm_error == 2.35e-07 and row.fields["transB"] == "T"


def test_a_complex_scalar_is_one_field_and_the_old_error_column_is_read():
    text = "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,cold_iters,hot_iters,rocblas-Gflops,us,rocblas-error\n"
    text += "N,N,64,64,64,(1: 0),64,(0: 0),64,64, 2, 10, 12.5, 41.9,0.125\n"
    (row,) = parse_bench_output(text).rows
    assert row.fields["alpha"] == "(1: 0)" and row.norm_error == 0.125


def test_malformed_lines_are_named_and_the_other_rows_kept():
    good = BENCH_VERIFIED.splitlines()[-2:]
    text = "\n".join([
        good[0], "N,T,512,256,128,1,512", *good,
        good[0], "N,T,x512,256,128,1,512,65536,0,256,32768,512,131072,4, 2, 10, 1, 2,3,4,5",
        good[0],
    ])  # fmt: skip
    out = parse_bench_output(text, "call.log")
    assert len(out.rows) == 1
    assert out.problems == [
        "call.log:2: 7 values for the 21 fields of line 1",
        "call.log:6: field 'M' is 'x512', not a number",
        "call.log:7: a result header with no values line after it",
    ]


def test_bench_arguments_follow_the_problem_type():
    sb = bench_arguments("Cijk_Ailk_Bjlk_SB", (512, 256, 1, 128), True, 10, 2)
    assert sb[:4] == ["-f", "gemm", "-r", "s"] and sb[sb.index("--transposeB") + 1] == "T"
    assert (
        sb[sb.index("--lda") + 1] == "512" and sb[sb.index("--ldb") + 1] == "256" and sb[-2:] == ["-v", "1"]
    )
    hhs = bench_arguments("Cijk_Alik_Bljk_HHS_BH", (64, 32, 3, 16), False, 10, 2)
    assert hhs[:2] == ["-f", "gemm_strided_batched_ex"] and "--compute_type" in hhs and "-v" not in hhs
    assert hhs[hhs.index("--lda") + 1] == "16" and hhs[hhs.index("--stride_a") + 1] == str(16 * 64)
    assert hhs[hhs.index("--c_type") + 1] == "f16_r" and hhs[hhs.index("--compute_type") + 1] == "f32_r"
    gb = bench_arguments("Cijk_Ailk_Bljk_DB_GB", (64, 64, 1, 64), False, 10, 2)
    assert gb[:4] == ["-f", "gemm_batched", "-r", "d"] and "--stride_a" not in gb
    assert "initial strides" in bench_arguments("Cijk_Ailk_Bljk_SBIc", (64, 64, 1, 64), True, 10, 2)


FAKE_BENCH = """\
#!{python}
# A stand-in rocblas-bench: the GEMM size decides what happens (written for oto's tests).
import os, sys, time
a = sys.argv[1:]
m = int(a[a.index("-m") + 1]); n = int(a[a.index("-n") + 1]); k = int(a[a.index("-k") + 1])
print("rocBLAS-commit-hash: b520bc83f")
print("rocblas-bench INFO: library", os.environ.get("ROCBLAS_TENSILE_LIBPATH", "rocBLAS's own"),
      "override", os.environ.get("HSA_OVERRIDE_GFX_VERSION", "none"))
if m == 256:
    print("Memory access fault by GPU node-1 (Agent handle: 0x55d0) on address 0x7f00. "
          "Reason: Page not present.")
    sys.stdout.flush(); os.abort()
if m == 512:
    time.sleep(600)
once = os.path.join(os.path.dirname(sys.argv[0]), "hung-once")
if m == 640 and not os.path.exists(once):  # hangs the first time only: the machine's hang, not the kernel's
    open(once, "w").close()
    time.sleep(600)
head = "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,cold_iters,hot_iters,rocblas-Gflops,us"
norm = 0.5 if m == 128 else 3e-7
t = 2.0 * m * n * k / 1e3 / (100.0 if os.environ.get("ROCBLAS_TENSILE_LIBPATH") else 80.0)
if "-v" in a:
    head += ",CPU-Gflops,CPU-us,norm_error_1"
print(head)
vals = f"N,N,{{m}},{{n}},{{k}},1,{{m}},0,{{k}},{{m}}, 2, 10, {{2.0*m*n*k/t/1e3:.6g}}, {{t:.6g}}"
if "-v" in a:
    vals += f",1.5,9999,{{norm}}"
if m == 1024:
    vals = vals.rsplit(",", 3)[0]  # a truncated values line
print(vals)
"""

SB = "Cijk_Ailk_Bljk_SB"


@pytest.fixture
def bench(tmp_path):
    path = tmp_path / "rocblas-bench"
    path.write_text(FAKE_BENCH.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def runner_for(tmp_path, bench, device="gfx90c") -> RocblasBenchRunner:
    journal = GpuJournal(tmp_path / "journal", device, Quarantine(tmp_path / "quarantine.jsonl"), "gfx90c")
    return RocblasBenchRunner(bench, tmp_path / "calls", journal, timeout_s=3, iters=10, cold_iters=2)


def test_verify_records_pass_fail_crash_hang_and_malformed_per_size_and_goes_on(tmp_path, bench):
    sizes = [[64, 64, 1, 64], [128, 64, 1, 64], [256, 64, 1, 64], [512, 64, 1, 64], [1024, 64, 1, 64],
             [96, 96, 1, 96]]  # fmt: skip
    kernels = [f"k{i:012x}" for i in range(len(sizes))]
    tuned = Arm(
        "tuned", "/opt/tuned/library", {"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}, arm_kernels(SB, sizes, kernels)
    )
    rows = run_verify(runner_for(tmp_path, bench), tuned, SB, sizes)
    assert [r.status for r in rows] == ["pass", "fail", "crash", "timeout", "malformed", "pass"]
    assert rows[0].norm_error == 3e-7 and rows[0].tolerance == pytest.approx(64 * 2**-23)
    assert (
        "exceeds" in rows[1].reason and "rc -6" in rows[2].reason and "Memory access fault" in rows[2].reason
    )
    assert "killed after 3 s" in rows[3].reason and "values for the" in rows[4].reason
    # the kernel's only timeout was run once more, and hung again
    assert [r.retried for r in rows] == [False, False, False, True, False, False]
    assert (
        rows[3].reason.count("killed after 3 s") == 2
        and "run again: its first call timed out" in rows[3].reason
    )
    assert [r.kernel_id for r in rows] == kernels and {r.numbers for r in rows} == {"measured"}
    first = sorted((tmp_path / "calls").glob("call-0001-*.log"))[0].read_text()
    assert "library /opt/tuned/library override 9.0.0" in first  # the arm's environment reached the client
    assert not list((tmp_path / "journal" / "calls").glob("*.json"))  # every call left the journal


def test_a_kernels_one_hang_is_run_again_and_a_hang_that_repeats_across_sizes_is_not(tmp_path, bench):
    """One timeout among a kernel's calls can be the machine's: it is run once more and the second result
    stands (here the stand-in hangs at M = 640 the first time only). A kernel that hung at two sizes is not
    run again: on hardware each hung call costs the client's whole timeout."""
    sizes = [[640, 64, 1, 64], [64, 64, 1, 64], [512, 64, 1, 64], [512, 96, 1, 64], [96, 96, 1, 96]]
    kernels = ["kflaky0000000", "kflaky0000000", "khangs0000000", "khangs0000000", "kgood00000000"]
    tuned = Arm("tuned", "/opt/tuned/library", {}, arm_kernels(SB, sizes, kernels))
    rows = run_verify(runner_for(tmp_path, bench), tuned, SB, sizes)
    assert [r.status for r in rows] == ["pass", "pass", "timeout", "timeout", "pass"]
    assert [r.retried for r in rows] == [True, False, False, False, False]
    assert rows[0].reason == "run again: its first call timed out (rocblas-bench killed after 3 s)"
    assert len(list((tmp_path / "calls").glob("call-*.log"))) == 6  # five sizes, one of them twice
    d = decide(SB, [{"size_index": i, "winner": k, "shipped": "kspoof"} for i, k in enumerate(kernels)], rows)
    assert set(d.failing) == {"khangs0000000"} and d.winners[0] == "kflaky0000000"
    from oto.reporting.collect import _retried

    entry = {"rows": [r.as_dict() for r in rows]}
    assert _retried(entry) == " (1 run again after a timeout: pass 1)"


def test_a_quarantined_size_is_never_run_and_a_dead_call_is_run_alone_first(tmp_path, bench):
    runner = runner_for(tmp_path, bench)
    arm = Arm("tuned", "/lib", {}, arm_kernels(SB, [[64, 64, 1, 64]], ["k00000000000a"]))
    ctx = {
        "command": [bench, *bench_arguments(SB, (64, 64, 1, 64), True, 1, 1)],
        "env": {},
        "sizes": [[64] * 4],
    }
    code = textwrap.dedent(
        f"""
        import os, sys
        sys.path[:0] = {sys.path!r}
        from pathlib import Path
        from oto.registry.gpu_journal import GpuJournal, Quarantine
        j = GpuJournal(Path({str(tmp_path / "journal")!r}), "gfx90c", Quarantine(Path("q")), "gfx90c")
        with j.call("rocblas-bench", [{{"id": "k00000000000a", "library": {SB!r}}}], {ctx!r}, probe_of="s"):
            os._exit(9)
        """
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9
    notes = runner.recover()
    assert any("quarantined" in n for n in notes)
    res = runner.run(arm, SB, (64, 64, 1, 64), verify=True)
    assert (
        res.status == GPU_RESET and "quarantined" in res.reason and not list((tmp_path / "calls").glob("*"))
    )


GTEST_LOG = """\
[==========] Running 4 tests from 2 test suites.
[----------] 3 tests from _/gemm
[ RUN      ] _/gemm.blas3_tensile/nightly_blas3_f32_r_NT_512_256_128_1_512_256_0_512
[       OK ] _/gemm.blas3_tensile/nightly_blas3_f32_r_NT_512_256_128_1_512_256_0_512 (41 ms)
[ RUN      ] _/gemm.blas3_tensile/nightly_blas3_f16_r_NN_1024_1024_4096_1_1024_4096_0_1024
/rocBLAS/clients/include/near.hpp:288: Failure
The difference between hCPU[i + j * lda] and hGPU[i + j * lda] is 7.5, which exceeds abs_error, where
hCPU[i + j * lda] evaluates to 1021.5,
[  FAILED  ] _/gemm.blas3_tensile/nightly_blas3_f16_r_NN_1024_1024_4096_1_1024_4096_0_1024, where \
GetParam() = {{ function: gemm, a_type: f16_r }} (1233 ms)
[----------] 1 test from _/gemm_strided_batched_ex
[ RUN      ] _/gemm_strided_batched_ex.blas3_tensile/{ex}
SIGNAL raised in: {ex}
/rocBLAS/clients/common/gtest_helpers.cpp:154: Failure
Failed
Received Segmentation fault signal
[  FAILED  ] _/gemm_strided_batched_ex.blas3_tensile/{ex}, where GetParam() = {{}} (12 ms)
[ RUN      ] _/gemm_batched.blas3_tensile/nightly_blas3_f64_r_NN_256_256_256_n1p5_256_256_0p5_256_7

Aborting tests due to an alarm timeout.
""".format(ex="quick_blas3_f16_rf16_rf16_rf16_rf32_r_TN_64_32_16_1_16_16_0_64_64_3_1024_512_2048")


def test_rocblas_test_output_gives_each_gemm_tests_size_and_fate():
    run = parse_gtest_output(GTEST_LOG)
    assert [t.status for t in run.tests] == ["passed", "failed", "failed", "died"]
    ok, near, signal, hang = run.tests
    assert (
        ok.gemm.size == (512, 256, 1, 128) and (ok.gemm.transA, ok.gemm.transB) == ("N", "T") and ok.ms == 41
    )
    assert near.gemm.types == "f16_r" and any("exceeds abs_error" in m for m in near.messages)
    assert signal.gemm.function == "gemm_strided_batched_ex" and signal.gemm.size == (64, 32, 3, 16)
    assert any("Segmentation fault" in m for m in signal.messages)
    assert hang.gemm.size == (256, 256, 7, 256) and "alarm" in run.aborted
    assert gemm_test_name("_/trsm.blas3/quick_blas3_f32_r_L_U_N_N_1_1_1") is None


def test_the_verify_decision_takes_a_failing_kernel_out_everywhere_it_wins():
    rows = [
        VerifyRow(SB, 0, (64, 64, 1, 64), "kbad", "fail", 0.5, 1e-5, 10.0, "norm", "measured"),
        VerifyRow(SB, 1, (96, 96, 1, 96), "kgood", "pass", 1e-7, 1e-5, 10.0, "", "measured"),
        VerifyRow(SB, 2, (128, 96, 1, 96), "kbad", "pass", 1e-7, 1e-5, 10.0, "", "measured"),
        VerifyRow(SB, 3, (160, 96, 1, 96), "kother", "malformed", None, 1e-5, math.nan, "x", "measured"),
    ]
    per_size = [
        {"size_index": 0, "winner": "kbad", "shipped": "kspoof0", "ranking": ["kbad", "kunknown", "kgood"]},
        {"size_index": 1, "winner": "kgood", "shipped": "kspoof1", "ranking": ["kgood"]},
        {"size_index": 2, "winner": "kbad", "shipped": "kspoof2", "ranking": ["kbad", "kunknown"]},
        {"size_index": 3, "winner": "kother", "shipped": "kspoof3"},
    ]
    d = decide(SB, per_size, rows)
    assert d.winners == {0: "kgood", 1: "kgood", 2: "kspoof2", 3: "kother"}
    assert [(c.size_index, c.how) for c in d.changes] == [(0, "next verified candidate"), (2, "spoof kernel")]
    assert d.failing == {"kbad": "fail at size [64, 64, 1, 64]: norm"} and d.verified == ["kgood"]
    assert d.unverified_sizes == [3] and d.counts == {"fail": 1, "pass": 2, "malformed": 1}
    assert tolerance("Cijk_Ailk_Bljk_HB", 900) == pytest.approx(1.0)


def test_the_spoof_kernel_is_no_last_resort_where_it_is_known_wrong_the_size_gets_no_row():
    """The winner out and no other candidate verified: the size goes back to its shipped kernel, unless that
    kernel failed at the size in finalize's race (``shipped_failed``) or verification took it out at some
    size. Then the size gets no row (Tensile serves it from the nearest size's), not a kernel known wrong."""
    rows = [
        VerifyRow(SB, 0, (64, 64, 1, 64), "kbad", "fail", 0.5, 1e-5, 10.0, "norm", "measured"),
        VerifyRow(SB, 3, (160, 96, 1, 96), "kspoof2", "crash", None, 1e-5, math.nan, "x", "measured"),
    ]
    per_size = [
        {"size_index": 0, "winner": "kbad", "shipped": "kspoof0", "ranking": ["kbad"]},
        {
            "size_index": 1,
            "winner": "kbad",
            "shipped": "kspoof1",
            "ranking": ["kbad"],
            "shipped_failed": True,
        },
        {"size_index": 2, "winner": "kbad", "shipped": "kspoof2", "ranking": ["kbad"]},
        {"size_index": 3, "winner": "kspoof2", "shipped": "kspoof2", "ranking": ["kspoof2"]},
    ]
    d = decide(SB, per_size, rows)
    assert d.winners == {0: "kspoof0", 1: "", 2: "", 3: ""}
    assert [(c.size_index, c.how) for c in d.changes] == [
        (0, SPOOF_KERNEL),
        (1, NEAREST_ROW),
        (2, NEAREST_ROW),
        (3, NEAREST_ROW),
    ]
    assert "1 → no row" in removed_kernels(d.changes)[0]


# ---- compare: the paired, interleaved A/B ----


def test_the_schedule_visits_every_arm_at_every_size_each_repetition_in_fresh_orders():
    sched = interleaved_schedule(3, ["tuned", "spoof", "upstream"], 4, seed=1)
    assert len(sched) == 36 and len(set(sched)) == 36
    firsts = {tuple(a for r, i, a in sched[j : j + 3]) for j in range(0, 36, 3)}
    assert len(firsts) > 1  # the arms' order changes from size to size
    for j in range(0, 36, 3):  # at a size, the arms run back to back
        assert len({(r, i) for r, i, _ in sched[j : j + 3]}) == 1


def sim_arms(library: str, n_sizes: int):
    deck = load_deck("manifest").libraries[library]
    sizes = deck.sizes[:n_sizes]
    params = {}
    spoof = []
    for pos, _ in deck.shipped[:n_sizes]:
        p = canonical(deck.solutions[int(pos)]["params"])
        params[candidate_id(p)] = p
        spoof.append(candidate_id(p))
    tuned_p = canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4})
    slow_p = canonical({"ThreadTile": [1, 1], "WorkGroup": [8, 8, 1], "DepthU": 8, "VectorWidth": 1})
    params[candidate_id(tuned_p)], params[candidate_id(slow_p)] = tuned_p, slow_p
    arms = [
        Arm("spoof", None, {"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}, arm_kernels(library, sizes, spoof), params),
        Arm("upstream", None, {}, arm_kernels(library, sizes, spoof), params),
        Arm("tuned", "lib", {}, arm_kernels(library, sizes, [candidate_id(tuned_p)] * n_sizes), params),
        Arm("slow", "lib2", {}, arm_kernels(library, sizes, [candidate_id(slow_p)] * n_sizes), params),
    ]
    return sizes, arms


def test_compare_on_the_simulated_gpu_gives_speedups_with_intervals_labelled_simulated():
    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    config = validate_config({"arch": "gfx90c", "families": "all", "seed": 3})
    library = "Cijk_Ailk_Bljk_SB"
    sizes, arms = sim_arms(library, 6)
    runner = SimulatedClientRunner(profile, config, iters=3, cold_iters=1)
    samples = run_compare(runner, arms, library, sizes, repetitions=6, seed=1)
    assert set(samples["numbers"]) == {"simulated"} and len(samples) == 6 * 6 * 4
    scores = compare_scores(samples, library, sizes, baseline="spoof", bootstrap=200)
    assert set(scores["kernel_id"]) == {"upstream", "tuned", "slow"}
    ok = scores[scores["status"] == "ok"]
    assert (ok["ci_low"] <= ok["score"]).all() and (ok["score"] <= ok["ci_high"]).all()
    upstream = ok[ok["kernel_id"] == "upstream"]["score"]
    assert upstream.between(0.9, 1.1).all()  # the same kernels: speed-up 1 within noise
    summary = family_summary({library: scores}, "slow", bootstrap=200)
    assert summary["SB"]["regressions"] and summary["SB"]["losses"] >= 1
    assert summary["SB"]["median_ci"][0] <= summary["SB"]["median_speedup"] <= summary["SB"]["median_ci"][1]


def test_compare_records_a_failed_call_as_its_arms_sample_and_scores_the_rest(tmp_path, bench):
    sizes = [[64, 64, 1, 64], [256, 64, 1, 64], [96, 64, 1, 64]]
    ks = [f"k{i:012x}" for i in range(3)]
    arms = [
        Arm("spoof", None, {}, arm_kernels(SB, sizes, ks)),
        Arm("tuned", "/t", {}, arm_kernels(SB, sizes, ks)),
    ]
    samples = run_compare(runner_for(tmp_path, bench), arms, SB, sizes, repetitions=3, seed=2)
    crashed = samples[samples["size_index"] == 1]
    assert set(crashed["status"]) == {"crash"} and crashed["time_us"].isna().all()
    scores = compare_scores(samples, SB, sizes, baseline="spoof", bootstrap=100)
    by_size = {int(r["size_index"]): r for r in scores.to_dict("records")}
    assert by_size[1]["status"] == "crash" and "rc -6" in by_size[1]["reason"]
    assert by_size[0]["score"] == pytest.approx(100 / 80, rel=1e-3)  # the stand-in's two libraries
    summary = family_summary({SB: scores}, "tuned", bootstrap=100)["SB"]
    assert summary["measured"] == 2 and summary["failed"][0]["size_index"] == 1 and summary["wins"] == 2


def test_a_size_where_the_baselines_kernel_gave_wrong_results_counts_in_no_speed_up(tmp_path):
    """compare times the arms without validating them: where finalize's race saw the baseline's kernel give
    wrong results, the tuned arm's time there is no regression and no win. The size is left out of the
    figures, listed with its reason and said in the report; the other baseline keeps it."""
    import pandas as pd
    from oto.reporting.collect import rocblas_clients
    from oto.rocblas.compare import compare_document
    from oto.rocblas.night import baseline_failures

    def scores(speedups):
        return pd.DataFrame(
            [{"kernel_id": "tuned", "size_index": i, "score": s, "ci_low": s * 0.99, "ci_high": s * 1.01,
              "status": "ok", "reason": ""} for i, s in enumerate(speedups)]
        )  # fmt: skip

    per_size = [
        {"size_index": 0, "shipped_status": "ok", "native": "kn", "native_status": "ok"},
        {"size_index": 1, "shipped_status": "ok", "native": "kn", "native_status": "validation_failed"},
        {"size_index": 2, "shipped_status": "validation_failed", "native": None, "native_status": None},
        {"size_index": 3, "shipped_status": None},  # a final.yaml from before the statuses: nothing left out
    ]
    wrong = baseline_failures({SB: {"per_size": per_size}})
    assert set(wrong["spoof"][SB]) == {2} and set(wrong["upstream"][SB]) == {1, 2}
    # size 4: its interval is below 1 but within the tie tolerance, a tie and no regression
    table = scores([1.2, 0.8, 0.7, 1.1, 0.99])
    kept = family_summary({SB: table}, "tuned", bootstrap=50)["SB"]
    assert [r["size_index"] for r in kept["regressions"]] == [1, 2] and kept["baseline_failed"] == []
    assert (kept["ties"], kept["losses"]) == (1, 2)
    upstream = family_summary({SB: table}, "tuned", bootstrap=50, baseline_wrong=wrong["upstream"])["SB"]
    assert upstream["regressions"] == [] and upstream["sizes"] == 5 and upstream["measured"] == 3
    assert [g["size_index"] for g in upstream["baseline_failed"]] == [1, 2]
    assert upstream["geomean_speedup"] == pytest.approx((1.2 * 1.1 * 0.99) ** (1 / 3), rel=1e-3)
    spoof = family_summary({SB: table}, "tuned", bootstrap=50, baseline_wrong=wrong["spoof"])["SB"]
    assert [r["size_index"] for r in spoof["regressions"]] == [1] and spoof["measured"] == 4
    samples = pd.DataFrame({"numbers": ["simulated"]})
    doc = compare_document({"spoof": {"SB": spoof}, "upstream": {"SB": upstream}}, "tuned", samples, {})
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "compare.yaml").write_text(yaml.safe_dump(doc))
    notes = rocblas_clients(tmp_path)["compare"]["notes"]
    assert notes == [
        f"against spoof, SB: 1 size(s) left out, where the baseline's kernel failed validation in finalize's "
        f"race ({SB} size 2)",
        f"against upstream, SB: 2 size(s) left out, where the baseline's kernel failed validation in "
        f"finalize's race ({SB} size 1; {SB} size 2)",
    ]


def test_a_baselines_own_failed_calls_are_listed_and_said(tmp_path):
    """The spoof hangs some RDNA3 APUs (ROCm/rocm-libraries#6320): compare's figures are speed-ups of the
    tuned arm, so a baseline's own crash or hang would show nowhere. It is listed per family (library, size,
    status, calls) and the report says it; the tuned arm's failures, per size in ``failed``, are said too."""
    import pandas as pd
    from oto.reporting.collect import rocblas_clients
    from oto.rocblas.compare import compare_document, failed_calls

    rows = [
        ("spoof", SB, 3, "timeout", "no completion within 5000000 us"),
        ("spoof", SB, 3, "timeout", "no completion within 5000000 us"),
        ("spoof", SB, 5, "crash", "rc -6"),
        ("spoof", SB, 5, "ok", ""),
        ("tuned", SB, 4, "timeout", "no completion within 5000000 us"),
        ("upstream", "Cijk_Ailk_Bljk_DB", 0, "ok", ""),
    ]
    samples = pd.DataFrame(rows, columns=["kernel_id", "library", "size_index", "status", "reason"])
    spoof = failed_calls(samples, "spoof")
    assert spoof == {"SB": [
        {"library": SB, "size_index": 3, "status": "timeout", "calls": 2,
         "reason": "no completion within 5000000 us"},
        {"library": SB, "size_index": 5, "status": "crash", "calls": 1, "reason": "rc -6"},
    ]}  # fmt: skip
    assert failed_calls(samples, "upstream") == {}
    summary = {"sizes": 6, "measured": 6, "wins": 6, "ties": 0, "losses": 0, "regressions": [], "failed": []}
    # the tuned arm's own hang at size 4 (the report said nothing of it: "6 (5)" only)
    hang = "no completion within 5000000 us"
    hung = [{"library": SB, "size_index": 4, "status": "timeout", "reason": hang}]
    doc = compare_document(
        {
            "spoof": {"SB": {**summary, "baseline_calls_failed": spoof["SB"], "failed": hung}},
            "upstream": {"SB": summary},
        },
        "tuned",
        samples.assign(numbers="simulated"),
        {},
    )
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "compare.yaml").write_text(yaml.safe_dump(doc))
    notes = rocblas_clients(tmp_path)["compare"]["notes"]
    assert notes == [
        f"against spoof, SB: 3 call(s) of the spoof arm itself failed (crash 1, timeout 2: {SB} size 3; {SB} "
        "size 5)",
        f"against spoof, SB: 1 size(s) where the tuned library's calls failed or did not run (timeout 1: "
        f"{SB} size 4); the figures leave them out",
    ]
    # with the library's final.yaml there, a size is named by its shape too, as a user looks it up
    sizes = [[64 * (i + 1), 64, 1, 256] for i in range(6)]
    (tmp_path / SB).mkdir()
    (tmp_path / SB / "final.yaml").write_text(yaml.safe_dump({"sizes": sizes}))
    notes = rocblas_clients(tmp_path)["compare"]["notes"]
    assert f"{SB} size 4 [320, 64, 1, 256]); the figures leave them out" in notes[1]


def test_the_runner_follows_the_backend_and_says_why_when_there_is_none(tmp_path, bench):
    from oto.rocblas.clients import client_runner

    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    config = validate_config({"arch": "gfx90c", "families": "all", "rocblas": {"bench": bench, "iters": 3}})
    sim, what = client_runner(config, profile, "sim")
    assert sim.numbers == "simulated" and sim.iters == 3 and "simulated" in what
    journal = GpuJournal(tmp_path / "j", "gfx90c", Quarantine(tmp_path / "q.jsonl"), "gfx90c")
    real, what = client_runner(config, profile, "tensile", journal)
    assert real.numbers == "measured" and real.bench == bench and real.timeout_s == 600
    none, why = client_runner(config, profile, "replay")
    assert none is None and "skipped" in why
    missing = validate_config({"arch": "gfx90c", "families": "all", "rocblas": {"bench": "/nope"}})
    none, why = client_runner(missing, profile, "tensile", journal)
    assert none is None and "'rocblas.bench': /nope does not exist" in why


def test_each_verify_job_draws_its_own_simulated_noise():
    """One noise stream for every verify job hung each library's verify at the same launches, so at the
    same deck sizes (the gfx1103 demo: every library lost a kernel at [256, 256, 1, 4096]). A job's
    libraries name its stream; the same job draws the same noise again (resumable, reproducible)."""
    from oto.rocblas.clients import client_runner

    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    config = validate_config({"arch": "gfx90c", "families": "all", "seed": 3, "sim": {"hang_rate": 0.2}})
    library = "Cijk_Ailk_Bljk_SB"
    sizes, arms = sim_arms(library, 6)
    calls = [(arm, library, size) for size in sizes for arm in arms]

    def hung(job_libraries):
        runner, _ = client_runner(config, profile, "sim", libraries=job_libraries)
        return [r.status != "ok" for r in runner.run_calls(calls, verify=True)]

    one, again, other = hung([library]), hung([library]), hung(["Cijk_Ailk_Bjlk_SB"])
    assert any(one) and one == again and one != other


@pytest.mark.parametrize(
    ("arch", "library"), [("gfx1103", "Cijk_Ailk_Bljk_I8II_BH"), ("gfx90c", "Cijk_Ailk_Bljk_SB")]
)
def test_the_simulated_client_verifies_a_correct_kernel_within_rocblas_tolerance(arch, library):
    """An int8 GEMM accumulates in int32 exactly and rocBLAS checks it bit for bit (tolerance 0): the
    simulated client gave it a float's rounding error, and verify took every tuned int8 kernel of a gfx1103
    demo out."""
    profile = yaml.safe_load((ROOT / "arch_profiles" / f"{arch}.yaml").read_text())
    config = validate_config({"arch": arch, "families": "all", "seed": 3, "sim": {"hang_rate": 0.0}})
    sizes = [[64, 64, 1, 64], [256, 256, 1, 512]]
    p = canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4})
    tuned = Arm("tuned", "lib", {}, arm_kernels(library, sizes, [candidate_id(p)] * 2), {candidate_id(p): p})
    rows = run_verify(SimulatedClientRunner(profile, config, iters=3, cold_iters=1), tuned, library, sizes)
    assert [r.status for r in rows] == ["pass", "pass"], [r.reason for r in rows]


@pytest.mark.parametrize("order", ["plan", "sweeps"])
def test_the_simulated_client_times_each_call_by_its_own_launches(order):
    """A call's time is the mean of its warm launches, read from the simulated GPU's arrays in either
    launch order the simulator offers: the same figure as the samples measure() returns."""
    from oto.backends.base import Kernel, Launch, MeasurePlan, Problem
    from oto.gemm import Library

    profile = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
    config = validate_config({"arch": "gfx90c", "families": "all", "seed": 5, "sim": {"launch_order": order}})
    library = "Cijk_Ailk_Bljk_SB"
    sizes, arms = sim_arms(library, 4)
    calls = [(arm, library, tuple(int(x) for x in s[:4])) for s in sizes for arm in arms]
    got = SimulatedClientRunner(profile, config, iters=3, cold_iters=1).run_calls(calls, verify=False)
    # the same plan through measure() on a twin of the runner's backend: one Sample per launch
    twin = SimulatedClientRunner(profile, config, iters=3, cold_iters=1).backend
    index = {s: i for i, s in enumerate(dict.fromkeys(size for _, _, size in calls))}
    launches = [Launch(arm.kernel(library, size), "candidate", index[size], j * 4 + r)
                for j, (arm, _, size) in enumerate(calls) for r in range(4)]  # fmt: skip
    kernels = {la.kernel_id: Kernel(la.kernel_id, dict(arms[0].params[la.kernel_id])) for la in launches}
    plan = MeasurePlan(kernels, [list(s) for s in index], launches)
    samples = {(s.kernel_id, s.size_index, s.rep): s for s in twin.measure(Problem(Library.parse(library),
               profile, {}), plan, Path("."))}  # fmt: skip
    assert [r.status for r in got] == ["ok"] * len(calls)
    for j, (result, (arm, _, size)) in enumerate(zip(got, calls, strict=True)):
        warm = [samples[(arm.kernel(library, size), index[size], j * 4 + r)].time_us for r in (1, 2, 3)]
        assert result.time_us == sum(warm) / 3 and result.kernel_id == arm.kernel(library, size)
