"""Workload files (oto.deck.workload): TunableOp untuned and results files of several PyTorch versions,
rocBLAS bench logs and profile YAML, parsed to library, size and weight; bad input named by file and line. The
sample files under tests/data/workload/ are written by hand in each tool's format (see the module's
docstring for the upstream sources)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from oto.deck.workload import (
    GemmCall,
    WorkloadError,
    read_rocblas_log,
    read_tunableop,
    read_workload,
    tensile_library,
    value_category,
)

DATA = Path(__file__).resolve().parent / "data" / "workload"


def _bench_text(line: str):
    """A rocblas-bench log of one line, read."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.log"
        path.write_text(line + "\n")
        return read_rocblas_log(path)


def _by_size(workload):
    return {(g.library, g.size): g for g in workload.gemms}


def test_tunableop_untuned_file_gives_libraries_sizes_and_recorded_occurrences():
    w = read_tunableop(DATA / "tunableop_untuned0.csv")
    assert w.format == "tunableop-untuned"
    got = _by_size(w)
    # The same GEMM recorded three times (three runs appending to the file) weighs three.
    assert got[("Cijk_Ailk_Bljk_SB", (512, 512, 1, 2048))].weight == 3
    assert got[("Cijk_Ailk_Bljk_SB", (512, 512, 1, 2048))].where == "tunableop_untuned0.csv:1"
    # Signatures are the BLAS call: tn_1024_64_4096 is A transposed, M 1024, N 64, K 4096.
    tn = got[("Cijk_Alik_Bljk_SB", (1024, 64, 1, 4096))].call
    assert (tn.trans_a, tn.trans_b, tn.lda, tn.ldb, tn.ldc) == ("T", "N", 4096, 4096, 1024)
    # Half runs on rocBLAS with f32 compute (ComputeTypeFor<Half>): HHS_BH.
    assert ("Cijk_Ailk_Bjlk_HHS_BH", (4096, 4096, 1, 64)) in got
    assert got[("Cijk_Ailk_Bjlk_SB", (64, 64, 16, 32))].call.batching == "strided"
    assert ("Cijk_Ailk_Bljk_BBS_BH", (256, 256, 1, 256)) in got
    assert ("Cijk_Ailk_Bljk_CB", (64, 64, 1, 64)) in got
    # BLAS_PARAMS adds what the signature leaves out: beta 0.5 is Tensile's value category 2.
    blas = got[("Cijk_Ailk_Bjlk_SB", (100, 200, 1, 300))].call
    assert (blas.beta, blas.alpha, blas.function) == (2.0, 1.0, None)
    assert w.weight == 9 and len(w.gemms) == 7


def test_tunableop_gemms_rocblas_does_not_run_are_uncovered_with_the_reason():
    w = read_tunableop(DATA / "tunableop_untuned0.csv")
    reasons = {u.what.split(",")[0]: (u.reason, u.where, u.weight) for u in w.uncovered}
    scaled = "ScaledGemmTunableOp_Float8_e4m3fnuz_Float8_e4m3fnuz_BFloat16_NT"
    assert "hipBLASLt" in reasons[scaled][0] and reasons[scaled][1:] == ("tunableop_untuned0.csv:7", 1)
    assert "bias epilogue" in reasons["GemmAndBiasTunableOp_float_TN"][0]
    # a zero size is a call rocBLAS returns from at once, as alpha = 0 is one it runs no GEMM kernel for
    (zero,) = [u for u in w.uncovered if u.where == "tunableop_untuned0.csv:11"]
    assert zero.reason == "M = 0: rocBLAS returns at once (nothing to compute; no kernel runs)"
    assert len(w.uncovered) == 3 and not w.problems


def test_a_negative_size_names_the_file_and_line_and_a_zero_one_runs_no_kernel():
    """rocBLAS rejects a negative size (a log that holds one is not read as it is), while it logs a zero
    size or K = 0 before it returns or only scales C: such a call is uncovered, like alpha = 0, and the
    dry-run goes on."""
    bench = read_rocblas_log(DATA / "rocblas_bench.log")
    assert any(p.startswith("rocblas_bench.log:9: ") and "M = -8: a GEMM size is not negative" in p
               for p in bench.problems)  # fmt: skip
    profile = read_rocblas_log(DATA / "rocblas_profile.yaml")
    assert not profile.problems
    (zero,) = [u for u in profile.uncovered if u.where == "rocblas_profile.yaml:6"]
    assert zero.reason.startswith("M = 0: rocBLAS returns at once") and zero.weight == 3
    for flag, reason in (("-k 0", "K = 0: C is only scaled by beta"), ("--batch_count 0", "batch_count = 0")):
        line = "./rocblas-bench -f gemm_strided_batched -r f32_r -m 8 -n 8 -k 8 --batch_count 2 " + flag
        (u,) = _bench_text(line).uncovered
        assert u.reason.startswith(reason)


def test_a_bench_option_that_is_not_a_number_is_named():
    for flag, said in (("-n abc", "-n 'abc' is not an integer"), ("--lda x1", "--lda 'x1' is not an integer"),
                       ("--alpha one", "--alpha 'one' is not a number")):  # fmt: skip
        (problem,) = _bench_text(f"./rocblas-bench -f gemm -r f32_r -m 8 -n 8 -k 8 --lda 8 {flag}").problems
        assert said in problem


def test_pytorch_2_2_results_file_without_leading_dimensions():
    w = read_tunableop(DATA / "tunableop_results0_pt22.csv")
    assert w.format == "tunableop-results"
    assert w.validators == {
        "PT_VERSION": "2.2.0",
        "ROCM_VERSION": "6.0.0.0-12969-1544e39",
        "HIPBLASLT_VERSION": "0.6.0-a9c5cc7",
        "ROCBLAS_VERSION": "4.0.0-72e57364-dirty",
    }
    got = _by_size(w)
    assert set(got) == {
        ("Cijk_Ailk_Bjlk_SB", (25088, 4096, 1, 64)),
        ("Cijk_Ailk_Bjlk_SB", (4096, 4096, 1, 64)),
        ("Cijk_Ailk_Bljk_HHS_BH", (128, 128, 8, 64)),
        ("Cijk_Alik_Bjlk_DB", (96, 96, 1, 96)),  # a results line without its optional time
    }
    assert all(g.call.lda is None and g.weight == 1 for g in w.gemms)  # that signature has no ld
    assert not w.problems


def test_a_newer_pytorch_file_is_read_where_it_can_be_and_names_the_version_where_not():
    w = read_tunableop(DATA / "tunableop_results0_pt29.csv")
    assert w.validators["HIP_VERSION"] == "60342134" and w.validators["GCN_ARCH_NAME"] == "gfx90c:xnack-"
    assert {g.size for g in w.gemms} == {(2048, 2048, 1, 2048), (1024, 512, 1, 1024), (64, 128, 12, 32)}
    hhs = _by_size(w)[("Cijk_Alik_Bljk_HHS_BH", (1024, 512, 1, 1024))].call
    assert hhs.beta == 1.0  # from its BLAS_PARAMS
    assert len(w.problems) == 3
    for line, what in (
        (9, "unknown suffix '_sk_1'"),
        (10, "data type 'Float4'"),
        (11, "GroupedGemmTunableOp"),
    ):
        (p,) = [p for p in w.problems if p.startswith(f"tunableop_results0_pt29.csv:{line}: ")]
        assert what in p and "PyTorch 2.9.0" in p


@pytest.mark.parametrize(
    "name, good, cut",
    [("tunableop_untuned_truncated.csv", 2, 3), ("rocblas_profile_truncated.yaml", 1, 2)],
)
def test_a_truncated_file_keeps_its_whole_lines_and_names_the_cut_one(name, good, cut):
    w = read_workload(DATA / name)
    assert len(w.gemms) == good
    assert w.problems == [f"{name}:{cut}: truncated: the file ends in the middle of this line (the writer "
                          "stopped), so it is not read"]  # fmt: skip


def test_a_cut_line_that_still_parses_is_not_read(tmp_path):
    # "nn_512_512_20" would read as K = 20: a last line without its newline is never trusted.
    path = tmp_path / "cut.csv"
    path.write_text("GemmTunableOp_float_NN,nn_64_64_64_ld_64_64_64\nGemmTunableOp_float_NN,nn_512_512_20")
    w = read_tunableop(path)
    assert [g.size for g in w.gemms] == [(64, 64, 1, 64)] and "cut.csv:2: truncated" in w.problems[0]


def test_tunableop_layout_disagreeing_with_params_is_a_problem(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("GemmTunableOp_float_NT,nn_64_64_64\nGemmStridedBatchedTunableOp_float_NN,nn_8_8_8\n")
    w = read_tunableop(path)
    assert not w.gemms
    assert "disagree with the op's layout NT" in w.problems[0] and "bad.csv:1" in w.problems[0]
    assert "needs _B_<batch>" in w.problems[1]


def test_rocblas_bench_log_with_other_blas_calls_mixed_in():
    w = read_rocblas_log(DATA / "rocblas_bench.log")
    assert w.format == "rocblas-bench"
    assert w.skipped == {"axpy": 1, "trsm": 1}
    got = _by_size(w)
    assert got[("Cijk_Ailk_Bljk_SB", (1024, 1024, 1, 1024))].weight == 2  # one line per call
    ex = got[("Cijk_Alik_Bljk_HHS_BH", (512, 256, 1, 768))].call
    assert (ex.function, ex.a_type, ex.c_type, ex.compute_type, ex.lda) == (
        "gemm_ex",
        "f16_r",
        "f16_r",
        "f32_r",
        768,
    )
    sb = got[("Cijk_Ailk_Bjlk_DB", (64, 64, 10, 64))].call
    assert (sb.stride_a, sb.stride_b, sb.stride_c, sb.beta) == (4096, 4096, 4096, 1.0)
    assert got[("Cijk_Ailk_Bljk_SB_GB", (128, 128, 4, 128))].call.function == "gemm_batched"
    assert ("Cijk_Ailk_Bljk_BBS_BH", (96, 96, 1, 96)) in got  # --api 1 and --atomics_not_allowed
    # A conjugate transpose conjugates a complex A; alpha 1+2i is "any other value" to Tensile.
    conj = got[("Cijk_AlikC_Bljk_CB", (32, 32, 1, 32))].call
    assert conj.alpha == 2.0
    # The kernel-selection layer's trailing comment is not an option.
    assert got[("Cijk_Ailk_Bjlk_SB", (300, 200, 1, 100))].call.ldc == 300
    (alpha0,) = w.uncovered
    assert alpha0.where == "rocblas_bench.log:8" and "alpha = 0" in alpha0.reason
    assert [p.split(": ")[0] for p in w.problems] == ["rocblas_bench.log:9", "rocblas_bench.log:13"]
    assert "not a rocBLAS bench, profile or trace line" in w.problems[1]


def test_rocblas_profile_weighs_each_entry_by_its_call_count():
    w = read_rocblas_log(DATA / "rocblas_profile.yaml")
    assert w.format == "rocblas-profile"
    got = _by_size(w)
    assert got[("Cijk_Ailk_Bjlk_SB", (2048, 1024, 1, 512))].weight == 120
    assert got[("Cijk_Ailk_Bljk_HHS_BH", (4096, 4096, 1, 4096))].weight == 8
    sbe = got[("Cijk_Alik_Bljk_SB", (64, 64, 32, 256))].call
    assert (sbe.stride_a, sbe.stride_c, sbe.alpha, sbe.beta) == (16384, 4096, 2.0, 1.0)
    assert got[("Cijk_Ailk_Bljk_HB_GB", (128, 128, 6, 64))].weight == 2  # rocblas_hgemm_batched
    assert w.skipped == {"saxpy": 300}
    assert w.weight == 180


def test_a_log_with_every_layer_counts_each_call_once():
    w = read_rocblas_log(DATA / "rocblas_all_layers.log")
    assert [(g.library, g.size, g.weight) for g in w.gemms] == [("Cijk_Ailk_Bljk_SB", (256, 256, 1, 256), 2)]
    assert w.skipped == {"trace lines": 2}
    assert "bench lines not counted" in w.notes[0]
    assert not w.problems


def test_auto_format_and_files_that_are_no_workload(tmp_path):
    assert read_workload(DATA / "rocblas_profile.yaml").format == "rocblas-profile"
    assert read_workload(DATA / "tunableop_results0_pt22.csv").format == "tunableop-results"
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "other.txt").write_text("hello, world\n")
    for name, why in (
        ("empty.csv", "empty file"),
        ("blob.bin", "not a text file"),
        ("other.txt", "line 1 is"),
    ):
        with pytest.raises(WorkloadError, match=why) as exc:
            read_workload(tmp_path / name)
        assert name in str(exc.value)
    with pytest.raises(WorkloadError, match="no rocBLAS bench line"):
        read_rocblas_log(DATA / "tunableop_untuned0.csv")
    with pytest.raises(WorkloadError, match="cannot read"):
        read_workload(tmp_path / "missing.csv")


def test_covered_by_reports_the_libraries_a_deck_lacks():
    w = read_tunableop(DATA / "tunableop_untuned0.csv")
    covered, missing = w.covered_by(["Cijk_Ailk_Bljk_SB", "Cijk_Ailk_Bjlk_HHS_BH"])
    assert covered == {
        "Cijk_Ailk_Bjlk_HHS_BH": {(4096, 4096, 1, 64): 1},
        "Cijk_Ailk_Bljk_SB": {(512, 512, 1, 2048): 3},
    }
    lacked = {u.library: u.reason for u in missing if u.library}
    assert "no library Cijk_Ailk_Bljk_BBS_BH" in lacked["Cijk_Ailk_Bljk_BBS_BH"]
    assert sum(u.weight for u in missing) + sum(sum(s.values()) for s in covered.values()) == w.weight + 3


def _call(a, c, compute, ta="N", tb="N", batching="none"):
    return GemmCall(None, batching, ta, tb, 8, 8, 8, 1, a, c, compute)


@pytest.mark.parametrize(
    "types, ta, tb, batching, library",
    [
        (("f32_r", "f32_r", "f32_r"), "N", "N", "none", "Cijk_Ailk_Bljk_SB"),
        (("f64_r", "f64_r", "f64_r"), "T", "T", "strided", "Cijk_Alik_Bjlk_DB"),
        (("f16_r", "f16_r", "f16_r"), "N", "T", "none", "Cijk_Ailk_Bjlk_HB"),
        (("f16_r", "f16_r", "f32_r"), "T", "N", "pointers", "Cijk_Alik_Bljk_HHS_BH_GB"),
        (("f16_r", "f32_r", "f32_r"), "N", "N", "none", "Cijk_Ailk_Bljk_HSS_BH"),
        (("bf16_r", "f32_r", "f32_r"), "N", "N", "none", "Cijk_Ailk_Bljk_BSS_BH"),
        (("i8_r", "i32_r", "i32_r"), "T", "N", "none", "Cijk_Alik_Bljk_I8II_BH"),
        (("f64_c", "f64_c", "f64_c"), "C", "C", "pointers", "Cijk_AlikC_BjlkC_ZB_GB"),
        (("f32_r", "f32_r", "f32_r"), "C", "N", "none", "Cijk_Alik_Bljk_SB"),  # real: C is a transpose
    ],
)
def test_rocblas_types_and_transposes_name_the_tensile_library(types, ta, tb, batching, library):
    assert tensile_library(_call(*types, ta=ta, tb=tb, batching=batching)) == (library, "")


@pytest.mark.parametrize(
    "types, why",
    [
        (("f32_r", "f32_r", "xf32_r"), "F32XdlMathOp"),
        (("f8_r", "f32_r", "f32_r"), "hipBLASLt"),
        (("f16_r", "f64_r", "f32_r"), "rocBLAS has no GEMM"),
    ],
)
def test_types_no_library_serves_say_why(types, why):
    name, reason = tensile_library(_call(*types))
    assert name is None and why in reason


def test_value_category_is_rocblas_s():
    assert [value_category(x) for x in (0.0, 1.0, -1.0, 0.5, 3.0)] == [0.0, 1.0, -1.0, 2.0, 2.0]
    assert value_category(1.0, 1.0) == 2.0 and value_category(0.0, 0.0) == 0.0


def test_a_log_every_rocblas_layer_wrote_to_is_read_by_its_profile(tmp_path):
    """ROCBLAS_LAYER=5 with one ROCBLAS_LOG_PATH: the trace lines come first (thousands of them), the profile
    at the end. Telling formats apart from the first 200 lines refused it ("not a workload oto reads") while
    --format rocblas-log read it."""
    from oto.deck.workload import read_workload

    trace = "rocblas_dgemm,N,N,512,512,512,1,0x7f00,512,0x7f10,512,0,0x7f20,512,atomics_allowed\n"
    profile = (
        "- { rocblas_function: \"rocblas_dgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: 512, "
        "N: 512, K: 512, alpha: 1.0, lda: 512, ldb: 512, beta: 0.0, ldc: 512, call_count: 500 }\n"
    )
    path = tmp_path / "rocblas.log"
    path.write_text(trace * 500 + profile)
    auto = read_workload(path)
    assert auto.format == "rocblas-profile" and auto == read_workload(path, "rocblas-log")


def test_the_same_workload_file_twice_is_refused_not_counted_twice(tmp_path):
    from oto.deck.sources import DeckConfigError, workload_sources

    path = tmp_path / "calls.log"
    path.write_text("x\n")
    twice = [{"source": "rocblas-log", "path": str(path)}, {"source": "rocblas-log", "path": str(path)}]
    with pytest.raises(DeckConfigError, match=r"'deck.workload\[1\].path': .* is deck.workload\[0\]'s file"):
        workload_sources({"arch": "gfx90c", "workload": twice})


def test_a_runs_jobs_parse_a_workload_file_once(tmp_path, monkeypatch):
    """Every deck job of a run reads the same workload file: a 50,000-line rocBLAS log took 16 s to parse in
    each (46 libraries: 12 minutes). Within a run (oto.run.context.stage sets the cache) it is parsed once;
    a changed file is parsed again."""
    from oto.deck import workload as wl

    trace = "rocblas_dgemm,N,N,512,512,512,1,0x7f00,512,0x7f10,512,0,0x7f20,512,atomics_allowed\n"
    profile = (
        "- { rocblas_function: \"rocblas_dgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: 512, "
        "N: 512, K: 512, alpha: 1.0, lda: 512, ldb: 512, beta: 0.0, ldc: 512, call_count: 500 }\n"
    )
    path = tmp_path / "rocblas.log"
    path.write_text(trace + profile)
    monkeypatch.setattr(wl, "CACHE", tmp_path / "cache")
    first = wl.read_workload(path)
    assert len(list((tmp_path / "cache").iterdir())) == 1

    def parsed_again(*a, **k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(wl, "read_rocblas_log", parsed_again)
    assert wl.read_workload(path) == first  # from the cache
    path.write_text(trace + profile.replace("call_count: 500", "call_count: 501"))
    with pytest.raises(AssertionError, match="parsed again"):
        wl.read_workload(path)


def test_a_bench_line_with_quotes_is_read_as_the_shell_would():
    """rocBLAS writes no quotes (oto splits such lines on spaces); a line someone quoted is read by shlex."""
    plain = _bench_text("./rocblas-bench -f gemm -r f32_r --transposeA N -m 8 -n 16 -k 32 --lda 8")
    quoted = _bench_text("./rocblas-bench -f 'gemm' -r \"f32_r\" --transposeA N -m 8 -n 16 -k 32 --lda 8")
    assert [g.call for g in plain.gemms] == [g.call for g in quoted.gemms] and len(plain.gemms) == 1
    assert "not a shell command line" in _bench_text("./rocblas-bench -f 'gemm -m 8").problems[0]
