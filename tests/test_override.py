"""The override file for a stock install (oto.deck.override, `oto override`): per workload GEMM the fastest
shipped kernel by measured or simulated times, written so rocBLAS's own override parser (Tensile's
UserDrivenTuningParser.cpp, mirrored by read_override) loads every line, with the installed library's
solution indices. The installed library is the golden gfx900 TensileCreateLibrary output (.dat)."""

from __future__ import annotations

from pathlib import Path

import pytest
from oto.cli import main
from oto.deck.model import DeckError
from oto.deck.override import (
    TableScorer,
    call_variants,
    can_solve,
    choose_shipped,
    plan_override,
    read_measured_csv,
    read_override,
    stock_pick,
    write_override,
)
from oto.deck.sources import deck_from_logic_files, deck_from_rocblas_dir
from oto.deck.workload import GemmCall, WorkloadGemm, read_workload, tensile_library
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.hardware.simulated.scorer import SimulatedScorer
from oto.tensile.logic_reader import read_logic_file

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "workload"
PROFILE = REPO / "arch_profiles" / "gfx90c.yaml"
HHS_NT = "Cijk_Ailk_Bjlk_HHS_BH"


@pytest.fixture(scope="module")
def installed(golden_dir):
    """A stock rocBLAS library folder (lazy gfx900 .dat files) holding Cijk_Ailk_Bjlk_HHS_BH."""
    return golden_dir / "tcl" / "gfx900-lazy-msgpack" / "HHS_BH_NT"


@pytest.fixture(scope="module")
def deck(installed):
    return deck_from_rocblas_dir(installed, "gfx900")


class Stub:
    """A scorer whose time of a solution is a function of its position and the size."""

    def __init__(self, time, numbers="simulated"):
        self.time, self.numbers, self.label = time, numbers, f"stub {numbers}"

    def times_us(self, library, solutions, sizes):
        return [[self.time(p, s) for s in sizes] for p in range(len(solutions))]


def _gemm(m, n, k, b=1, **kw):
    fields = dict(function="gemm_ex", batching="none", trans_a="N", trans_b="T", m=m, n=n, k=k, batch=b,
                  a_type="f16_r", c_type="f16_r", compute_type="f32_r", beta=0.0)  # fmt: skip
    call = GemmCall(**{**fields, **kw})
    return WorkloadGemm(call, tensile_library(call)[0], 1, "test:1")


def test_size_asserts_are_read_from_the_installed_library(deck, vega10_dir):
    """The .dat keeps a solution's AssertElementMultiple as Free0SizeMultiple/BoundSizeMultiple predicates."""
    lib = deck.libraries[HHS_NT]
    logic = deck_from_logic_files([read_logic_file(vega10_dir / f"vega10_{HHS_NT}.yaml")]).libraries[HHS_NT]
    key = ("AssertFree0ElementMultiple", "AssertFree1ElementMultiple", "AssertSummationElementMultiple")
    got = [tuple(s["params"].get(k, 1) for k in key) for s in lib.solutions]
    assert got == [tuple(s["params"].get(k, 1) for k in key) for s in logic.solutions]
    assert (2, 1, 2) in got and (1, 1, 1) in got


def test_the_fastest_solvable_shipped_kernel_is_chosen(deck):
    lib = deck.libraries[HHS_NT]
    odd = next(
        p for p, s in enumerate(lib.solutions) if s["params"].get("AssertSummationElementMultiple", 1) > 1
    )
    assert not can_solve(lib.solutions[odd]["params"], (64, 64, 1, 63))
    # The odd-K-incapable solution is the fastest everywhere: chosen at K 64, never at K 63.
    scorer = Stub(lambda p, s: 1.0 if p == odd else 10.0 + p)
    picks = choose_shipped(lib, [(64, 64, 1, 64), (64, 64, 1, 63)], [scorer])
    assert picks[(64, 64, 1, 64)].position == odd
    at63 = picks[(64, 64, 1, 63)]
    assert at63.position != odd and can_solve(lib.solutions[at63.position]["params"], (64, 64, 1, 63))
    assert at63.index == lib.solutions[at63.position]["index"] and at63.numbers == "simulated"
    assert at63.candidates == sum(can_solve(s["params"], (64, 64, 1, 63)) for s in lib.solutions)


def test_can_solve_checks_every_size_multiple():
    params = {
        "AssertFree0ElementMultiple": 2,
        "AssertFree1ElementMultiple": 4,
        "AssertSummationElementMultiple": 8,
    }
    assert can_solve(params, (2, 4, 3, 8)) and can_solve({}, (1, 1, 1, 1))
    assert not any(can_solve(params, s) for s in ((3, 4, 1, 8), (2, 6, 1, 8), (2, 4, 1, 12)))


def test_stock_pick_is_the_winner_of_the_nearest_shipped_size(deck):
    lib = deck.libraries[HHS_NT]
    j = len(lib.sizes) // 2
    m, n, _, k = lib.sizes[j]
    assert stock_pick(lib, (m, n, 1, k)) == lib.shipped[j][0]


def test_measured_times_decide_where_they_exist_and_are_never_mixed(deck):
    lib = deck.libraries[HHS_NT]
    measured_size, simulated_size = (128, 128, 1, 64), (256, 256, 1, 64)
    index = {s["index"]: p for p, s in enumerate(lib.solutions)}
    slow_in_sim = lib.solutions[5]["index"]
    table = TableScorer({(HHS_NT, measured_size, slow_in_sim): 3.0})
    sim = Stub(lambda p, s: 1.0 if p != 5 else 100.0)
    picks = choose_shipped(lib, [measured_size, simulated_size], [table, sim])
    # The only measured kernel wins its size even though the model calls it the slowest: never mixed.
    assert picks[measured_size].index == slow_in_sim and picks[measured_size].numbers == "measured"
    assert picks[measured_size].timed == 1
    assert picks[simulated_size].numbers == "simulated" and index[picks[simulated_size].index] != 5


def test_call_variants_follow_each_rocblas_entry_point():
    base = dict(batching="none", trans_a="N", trans_b="T", m=4, n=6, k=8, batch=1, a_type="f32_r",
                c_type="f32_r", compute_type="f32_r", lda=4, ldb=6, ldc=4, beta=0.0)  # fmt: skip
    assert [v[4:] for v in call_variants(GemmCall("gemm", **base))] == [(0, 0, 0)]
    assert [v[4:] for v in call_variants(GemmCall("gemm_ex", **base))] == [(1, 1, 1)]
    # TunableOp names neither the entry point nor beta: a line for each PyTorch can pass.
    tunable = GemmCall(None, **{**base, "beta": None, "lda": None, "ldb": None, "ldc": None})
    assert call_variants(tunable) == [
        (0.0, 4, 6, 4, 0, 0, 0), (0.0, 4, 6, 4, 1, 1, 1), (1.0, 4, 6, 4, 0, 0, 0), (1.0, 4, 6, 4, 1, 1, 1)
    ]  # fmt: skip
    half = GemmCall(None, **{**base, "a_type": "f16_r", "c_type": "f16_r", "compute_type": "f32_r"})
    assert [v[4:] for v in call_variants(half)] == [(1, 1, 1)]  # only rocblas_gemm_ex takes f32 compute
    batched = {**base, "batching": "pointers", "batch": 3}
    assert [v[4:] for v in call_variants(GemmCall("gemm_batched", **batched))] == [(0, 0, 0)]
    assert [v[4:] for v in call_variants(GemmCall("gemm_batched_ex", **batched))] == [
        (32, 48, 24)
    ]  # lda*k, ldb*k (B transposed), ldc*n
    strided = {**base, "batching": "strided", "batch": 3, "stride_a": 100, "stride_b": 200, "stride_c": 300}
    assert [v[4:] for v in call_variants(GemmCall("gemm_strided_batched", **strided))] == [(100, 200, 300)]


def test_override_lines_load_as_rocblas_reads_them(deck, tmp_path):
    gemms = [_gemm(4096, 4096, 64), _gemm(1000, 512, 300, beta=2.0, lda=1000, ldb=512, ldc=1024)]
    plan = plan_override(gemms, deck, [Stub(lambda p, s: 1.0 + (p * 7 + s[0]) % 13)])
    assert len(plan.choices) == 2 and not plan.uncovered and not plan.unsolved
    out = tmp_path / "override.csv"
    write_override(out, plan, ["a note; with no comma"])
    text = out.read_text()
    assert all("," not in line for line in text.splitlines() if line.startswith("#"))
    assert "undo: unset ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH" in text
    entries, dropped = read_override(out)
    assert not dropped and len(entries) == len(plan.lines) == 2
    indices = {s["index"] for s in deck.libraries[HHS_NT].solutions}
    for e in entries:
        assert e.solution_index - 1 in indices  # rocBLAS looks up index - 1
        assert (e.trans_a, e.trans_b, e.hpa, e.input_type, e.output_type) == (
            False,
            True,
            True,
            "f16_r",
            "f16_r",
        )
    ex, plain = sorted(entries, key=lambda e: e.m, reverse=True)
    assert (ex.stride_a, ex.beta, ex.lda) == (1, 0.0, 4096)  # gemm_ex passes stride 1; tight ld unrecorded
    assert (plain.m, plain.k, plain.beta, plain.ldc) == (1000, 300, 2.0, 1024)
    assert plain.solution_index - 1 == plan.choices[(HHS_NT, (1000, 512, 1, 300))].index


def test_read_override_drops_what_tensile_drops(tmp_path):
    path = tmp_path / "o.csv"
    path.write_text(
        "no comma here\n"
        "transA,transB,M,N,batch_count,K,alpha,beta,lda,ldb,ldc,input_type,output_type,compute_type,solution_index\n"
        "N,N,64,64,4,64,1,0,64,64,64,f32_r,f32_r,f32_r,603979777\n"
        "N,N,64,64,1,64,1,0,64,64,64,f32_r,f32_r,f32_r,0\n"
        "N,N,64,64,1,64,1,0,64,64,64,f99_r,f32_r,f32_r,5\n"
        "N,N,64,64,1,64,1,0,64,64\n"
    )
    entries, dropped = read_override(path)
    (e,) = entries
    assert (e.batch, e.stride_a, e.stride_b, e.stride_c, e.hpa) == (4, 4096, 4096, 4096, False)
    assert [d.split(": ")[0] for d in dropped] == ["o.csv:4", "o.csv:5", "o.csv:6"]


def test_a_deck_from_logic_files_cannot_give_solution_indices(vega10_dir):
    logic = deck_from_logic_files([read_logic_file(vega10_dir / f"vega10_{HHS_NT}.yaml")])
    with pytest.raises(DeckError, match="solution indices of the installed rocBLAS library"):
        plan_override([_gemm(64, 64, 64)], logic, [Stub(lambda p, s: 1.0)])


def test_gemms_the_installed_library_lacks_are_reported(deck):
    sb = _gemm(64, 64, 64, a_type="f32_r", c_type="f32_r", compute_type="f32_r")
    plan = plan_override([sb], deck, [Stub(lambda p, s: 1.0)])
    assert not plan.lines and plan.uncovered[0].library == "Cijk_Ailk_Bjlk_SB"
    assert "installed library has no Cijk_Ailk_Bjlk_SB" in plan.uncovered[0].reason


def test_simulated_scorer_times_every_solution_at_every_size(deck):
    lib = deck.libraries[HHS_NT]
    scorer = SimulatedScorer(load_profile(PROFILE))
    times = scorer.times_us(
        Library.parse(HHS_NT), lib.solutions[:3], [(64, 64, 1, 64), (4096, 4096, 1, 4096)]
    )
    assert len(times) == 3 and all(len(row) == 2 for row in times)
    assert all(row[0] < row[1] for row in times if None not in row)


def test_measured_csv_errors_name_the_file_and_line(tmp_path):
    good = tmp_path / "m.csv"
    good.write_text(f"library,M,N,B,K,solution_index,time_us\n{HHS_NT},64,64,1,64,603979777,12.5\n")
    assert read_measured_csv(good).times == {(HHS_NT, (64, 64, 1, 64), 603979777): 12.5}
    bad = tmp_path / "bad.csv"
    bad.write_text(f"library,M,N,B,K,solution_index,time_us\n{HHS_NT},64,64,1,64,603979777,-1\n")
    with pytest.raises(DeckError, match="bad.csv:2: time_us -1.0"):
        read_measured_csv(bad)
    (tmp_path / "cols.csv").write_text("library,M\n")
    with pytest.raises(DeckError, match="missing column"):
        read_measured_csv(tmp_path / "cols.csv")


def test_oto_override_writes_a_file_rocblas_loads_and_says_it_was_simulated(installed, tmp_path, capsys):
    out = tmp_path / "override.csv"
    args = ["override", "--workload", str(DATA / "tunableop_untuned0.csv"), "--deck", str(installed)]
    assert main([*args, "--profile", str(PROFILE), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "numbers: simulated" in printed and "measure on your GPU" in printed
    assert "unset ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH" in printed
    assert "the installed library has no Cijk_Ailk_Bljk_SB" in printed  # uncovered, never dropped
    assert "tunableop_untuned0.csv:11" in printed  # the zero size, named
    text = out.read_text()
    assert "# numbers that chose them: simulated" in text
    entries, dropped = read_override(out)
    assert not dropped and {(e.m, e.n, e.k) for e in entries} == {(4096, 4096, 64)}
    # TunableOp's Half GEMM: beta unknown (0 and 1), rocblas_gemm_ex's stride 1.
    assert sorted((e.beta, e.stride_a) for e in entries) == [(0.0, 1), (1.0, 1)]
    expected = read_workload(DATA / "tunableop_untuned0.csv")
    assert expected.library_weights()[HHS_NT] == {(4096, 4096, 1, 64): 1}


def test_oto_override_refuses_without_numbers_or_with_a_bad_deck(installed, tmp_path, capsys):
    args = ["override", "--workload", str(DATA / "rocblas_profile.yaml"), "--out", str(tmp_path / "o.csv")]
    with pytest.raises(SystemExit):
        main([*args, "--deck", str(installed), "--arch", "gfx900"])
    assert "give --profile (the simulated GPU) or --measured" in capsys.readouterr().err
    # measured times alone: which GPU's library to read is not guessed (it was gfx900's for every GPU)
    measured = tmp_path / "measured.csv"
    measured.write_text("library,M,N,B,K,solution_index,time_us\n")
    with pytest.raises(SystemExit):
        main([*args, "--deck", str(installed), "--measured", str(measured)])
    assert "give --profile (your GPU" in capsys.readouterr().err and not (tmp_path / "o.csv").exists()
    assert main([*args, "--deck", str(tmp_path), "--profile", str(PROFILE)]) == 1
    assert "TensileLibrary" in capsys.readouterr().err
    # Nothing of this workload is in the installed library: nothing written, and it says so.
    assert main([*args, "--deck", str(installed), "--profile", str(PROFILE)]) == 1
    assert "not written" in capsys.readouterr().err and not (tmp_path / "o.csv").exists()


def test_oto_override_takes_an_arch_and_reads_the_library_its_owners_run(
    installed, tmp_path, capsys, monkeypatch
):
    """`--profile gfx1103` finds arch_profiles/gfx1103.yaml and reads the library a 780M's rocBLAS loads
    (gfx1100's, spoofed; it read gfx900's for every GPU unless --arch said otherwise); the gfx90c's spoof
    says which HSA_OVERRIDE_GFX_VERSION the file goes with."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "override.csv"
    args = ["override", "--workload", str(DATA / "tunableop_untuned0.csv"), "--deck", str(installed)]
    assert main([*args, "--profile", "gfx90c", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "(with HSA_OVERRIDE_GFX_VERSION=9.0.0: rocBLAS loads gfx900's library)" in printed and out.is_file()
    )
    assert main([*args, "--profile", "gfx1103", "--out", str(tmp_path / "o2.csv")]) == 1
    assert "TensileLibrary_lazy_gfx1100.dat" in capsys.readouterr().err  # the golden folder is gfx900's
    assert main([*args, "--profile", "gfx1999", "--out", str(tmp_path / "o3.csv")]) == 1
    assert "--profile gfx1999: no arch_profiles/gfx1999.yaml here (profiles here: " in capsys.readouterr().err
