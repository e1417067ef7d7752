"""Weights everywhere (issue #31): scores aggregated by a workload's weights beside the plain geomean, and the
expected time a workload saves per library and in total, with its interval, in final.yaml and the report."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from oto.gemm import Library, gemm_flops
from oto.measurement.finals import Z95, workload_time
from oto.measurement.selection import summarise
from oto.numbers import is_weighted, weighted_geomean
from oto.reporting.acceptance import workload_markdown
from oto.reporting.figures import library_rows, workload_rows

LIB = Library.parse("Cijk_Ailk_Bljk_DB")


def _row(i, score, gflops=100.0, lo=None, hi=None):
    return {"size_index": i, "score": score, "gflops": gflops, "ci_low": lo if lo is not None else score,
            "ci_high": hi if hi is not None else score, "verdict": "win", "pct_ceiling": 50.0}  # fmt: skip


def test_weighted_geomean_counts_sizes_by_weight():
    assert weighted_geomean([2.0, 0.5], [1.0, 1.0]) == pytest.approx(1.0)
    assert weighted_geomean([2.0, 0.5], [3.0, 1.0]) == pytest.approx(
        math.exp((3 * math.log(2) - math.log(2)) / 4)
    )
    assert weighted_geomean([None, 4.0, float("nan")], [5.0, 1.0, 1.0]) == pytest.approx(4.0)
    assert weighted_geomean([None], [1.0]) is None
    assert not is_weighted([1.0, 1.0]) and not is_weighted(None) and is_weighted([0.1, 3.0])


def test_summaries_add_the_weighted_geomean_only_for_a_workload():
    rows = [_row(0, 2.0), _row(1, 1.0), _row(2, 1.0)]
    plain = summarise(rows, Counter())
    assert "weighted_geomean_score" not in plain  # a run without a workload writes what it wrote before
    assert "weighted_geomean_score" not in summarise(rows, Counter(), [1.0, 1.0, 1.0])
    weighted = summarise(rows, Counter(), [2.8, 0.1, 0.1])
    assert weighted["geomean_score"] == plain["geomean_score"] == pytest.approx(2 ** (1 / 3))
    assert weighted["weighted_geomean_score"] == pytest.approx(2 ** (2.8 / 3.0))
    shown = library_rows([{"library": LIB.name, "family": "DB", "pattern": "NN", "per_size": rows,
                           "summary": weighted}], 0.02)  # fmt: skip
    assert shown[0]["weighted_geomean_score"] == pytest.approx(weighted["weighted_geomean_score"])


def test_time_saved_on_the_workload_with_its_interval():
    sizes = [[256, 256, 1, 256], [1024, 1024, 1, 1024], [64, 64, 1, 64]]
    calls = [10, 4, 0]  # the third: a footprint size the workload does not call
    rows = [_row(0, 2.0, 50.0, 1.8, 2.2), _row(1, 1.0, 200.0, 0.98, 1.02), _row(2, 3.0, 10.0)]
    w = workload_time(rows, sizes, calls, LIB)
    t0 = gemm_flops(LIB.family, 256, 256, 1, 256) / (50.0 * 1e3)  # µs per call with the winner
    t1 = gemm_flops(LIB.family, 1024, 1024, 1, 1024) / (200.0 * 1e3)
    assert w["calls"] == 14 and w["calls_unmeasured"] == 0
    assert w["time_before_us"] == pytest.approx(10 * 2 * t0 + 4 * t1, abs=1e-3)
    assert w["time_after_us"] == pytest.approx(10 * t0 + 4 * t1, abs=1e-3)
    assert w["saved_us"] == pytest.approx(10 * t0, abs=1e-3)  # the tie at size 1 saves nothing
    half = Z95 * math.hypot(10 * t0 * 0.4 / (2 * Z95), 4 * t1 * 0.04 / (2 * Z95))
    assert w["saved_ci_us"] == pytest.approx([10 * t0 - half, 10 * t0 + half], abs=2e-3)
    # the floor's own interval widens the saving's (in quadrature, on the score's scale), not where the
    # floor itself won
    floor = {0: 0.05, 1: 0.02}
    rows[0].update(winner="k1", shipped="ref")
    rows[1]["winner"] = rows[1]["shipped"] = "ref"
    wider = workload_time(rows, sizes, calls, LIB, floor)
    half_f = Z95 * math.hypot(10 * t0 * math.hypot(0.2, 2.0 * 0.05) / Z95, 4 * t1 * 0.04 / (2 * Z95))
    assert wider["saved_ci_us"] == pytest.approx([10 * t0 - half_f, 10 * t0 + half_f], abs=2e-3)
    assert wider["saved_us"] == w["saved_us"]
    # a called size without a winner saves nothing and is counted apart
    rows[1] = {**_row(1, None, None), "score": None, "gflops": None}
    assert workload_time(rows, sizes, calls, LIB)["calls_unmeasured"] == 4


def test_the_report_gives_the_time_saved_per_library_and_in_total_and_the_uncovered():
    a = {"calls": 10, "calls_unmeasured": 0, "time_before_us": 3000.0, "time_after_us": 1000.0,
         "saved_us": 2000.0, "saved_ci_us": [1700.0, 2300.0], "saved_share": 2 / 3}  # fmt: skip
    b = {"calls": 5, "calls_unmeasured": 1, "time_before_us": 1000.0, "time_after_us": 1000.0,
         "saved_us": 0.0, "saved_ci_us": [-400.0, 400.0], "saved_share": 0.0}  # fmt: skip
    rows = workload_rows([{"library": "A", "workload": a}, {"library": "B", "workload": b},
                          {"library": "C"}])  # fmt: skip
    total = rows["total"]
    assert [r["library"] for r in rows["libraries"]] == ["A", "B"]
    assert total["saved_us"] == pytest.approx(2000.0) and total["saved_share"] == pytest.approx(0.5)
    assert total["saved_ci_us"] == pytest.approx([1500.0, 2500.0])  # half-widths 300 and 400: 500
    deck = {
        "files": [{"path": "p.yaml", "format": "rocblas-profile", "calls": 120, "skipped": {"daxpy": 3}}],
        "calls_uncovered": 100,
        "uncovered": [{"where": "p.yaml:5", "gemm": "gemm NN f32_r", "calls": 100, "reason": "not selected"}],
    }
    text = "\n".join(workload_markdown({"deck": deck, **rows}))  # fmt: skip
    assert "| **total** | 15 | 4 ms | 2 ms | 2 ms | 1.5 ms … 2.5 ms | 50.0 |" in text
    assert "- p.yaml:5: gemm NN f32_r (100 calls): not selected" in text and "daxpy 3" in text
    assert "1 calls are at sizes without a measured winner" in text
    # a library an earlier night tuned for another workload is listed apart, never added in (the report
    # credited a PyTorch workload of 3 calls with 2,810 calls and 1.94 s from an earlier run's workload)
    mine = {**a, "files": [["rocblas-log", "mine.log"]]}
    theirs = {**b, "files": [["tunableop", "earlier.csv"]]}
    files = [{"source": "rocblas-log", "path": "mine.log", "format": "rocblas-bench", "calls": 10}]
    rows = workload_rows([{"library": "A", "workload": mine}, {"library": "B", "workload": theirs}], files)
    assert [r["library"] for r in rows["libraries"]] == ["A"] and rows["other_workload"] == ["B"]
    assert rows["total"]["calls"] == 10 and rows["total"]["saved_us"] == pytest.approx(2000.0)
    text = "\n".join(workload_markdown({"deck": {**deck, "files": files}, **rows}))
    assert "Not counted: B, finished by an earlier night for another workload" in text
    from oto.deck.sources import workload_identity

    assert workload_identity({"workload": [{"source": "rocblas-log", "path": "mine.log"}]}) == [
        ["rocblas-log", "mine.log"]
    ]
    assert workload_identity({"source": "tunableop", "path": "t.csv"}) == [["tunableop", "t.csv"]]
    assert workload_identity({"source": "manifest"}) == []
