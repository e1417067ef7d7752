"""One kernel per runtime key (oto.measurement.dispatch): Tensile matches a problem by [M, N, K] and serves
the row with the highest GFLOPS among equal keys: sizes that differ only in the batch count get one kernel."""

from __future__ import annotations

import math

import pytest
from oto.measurement.dispatch import dispatch_summary, one_kernel_per_key, runtime_key
from oto.measurement.selection import FLOOR_FAILED

SIZES = [[512, 64, 1, 512], [512, 64, 40, 512], [512, 64, 80, 512], [256, 256, 1, 256]]


def score(kernel: str, i: int, s: float, status: str = "ok") -> dict:
    return {"kernel_id": kernel, "size_index": i, "score": s, "ci_low": s * 0.99, "ci_high": s * 1.01,
            "gflops": 100 * s, "status": status}  # fmt: skip


def row(i: int, kernel: str | None, s: float | None, verdict: str = "win") -> dict:
    return {"size_index": i, "winner": kernel, "score": s, "ci_low": s, "ci_high": s, "gflops": s and 100 * s,
            "ceiling_gflops": 1000.0, "pct_ceiling": s and 10 * s, "verdict": verdict,
            "contenders": [{"kernel": "x"}]}  # fmt: skip


def test_the_runtime_key_drops_the_batch_count():
    assert runtime_key([512, 64, 40, 512, 512, 512, 512, 512]) == (512, 64, 512)


def test_a_group_of_batch_sizes_takes_the_kernel_best_over_all_of_them():
    """At batch 1 kernel a wins (1.5x), at batch 40 and 80 kernel b (1.3x): rocBLAS would serve one of them
    at all three (the row with the highest GFLOPS). b is the better over the three (geomean 1.27 against
    1.14), so it takes batch 1 too, at its own score there; the other size is left alone."""
    scores = [score("a", 0, 1.5), score("b", 0, 1.2), score("a", 1, 1.0), score("b", 1, 1.3),
              score("a", 2, 0.95), score("b", 2, 1.3), score("a", 3, 1.4), score("b", 3, 1.1)]  # fmt: skip
    rows = [row(0, "a", 1.5), row(1, "b", 1.3), row(2, "b", 1.3), row(3, "a", 1.4)]
    out = one_kernel_per_key(rows, scores, SIZES, 0.02)
    assert [r["winner"] for r in out] == ["b", "b", "b", "a"]
    first = out[0]
    assert first["score"] == pytest.approx(1.2) and first["gflops"] == pytest.approx(120.0)
    assert (
        first["pct_ceiling"] == pytest.approx(12.0)
        and first["verdict"] == "win"
        and first["contenders"] == []
    )
    assert first["one_kernel_for"] == {"key": [512, 64, 512], "sizes": [0, 1, 2], "was": "a"}
    assert out[1:] == rows[1:]  # unchanged rows are the same rows
    assert dispatch_summary(out) == {"sizes": 1, "groups": 1}
    logs = {
        k: [math.log(s["score"]) for s in scores if s["kernel_id"] == k and s["size_index"] < 3] for k in "ab"
    }
    assert sum(logs["b"]) > sum(logs["a"])


def test_only_kernels_that_passed_at_every_size_of_the_group_can_take_it():
    """b hung at batch 40, so it cannot serve the group; c passed everywhere and does; a size the floor
    failed at (no score) keeps its row and is not part of the group."""
    scores = [score("a", 0, 1.5), score("b", 0, 2.0), score("c", 0, 1.1), score("a", 1, 0.8),
              score("b", 1, 3.0, "timeout"), score("c", 1, 1.2)]  # fmt: skip
    rows = [row(0, "b", 2.0), row(1, "c", 1.2), row(2, "a", None, FLOOR_FAILED), row(3, "a", 1.4)]
    rows[2]["gflops"] = 50.0
    out = one_kernel_per_key(rows, scores, SIZES, 0.02)
    assert [r["winner"] for r in out] == ["c", "c", "a", "a"] and out[2] == rows[2]
    assert out[0]["verdict"] == "win" and out[0]["one_kernel_for"]["sizes"] == [0, 1]


def test_a_size_of_the_group_without_a_winner_is_served_the_groups_kernel_all_the_same():
    scores = [score("a", 0, 1.5), score("a", 1, 1.2), score("a", 2, 0.9)]
    rows = [row(0, "a", 1.5), row(1, "a", 1.2), row(2, None, None, "not_measured"), row(3, "a", 1.4)]
    out = one_kernel_per_key(rows, scores, SIZES, 0.02)
    assert out[2]["winner"] == "a" and out[2]["verdict"] == "loss" and out[2]["score"] == pytest.approx(0.9)
    assert out[:2] == rows[:2]


def test_a_served_kernel_without_an_interval_or_gflops_is_judged_as_finalize_judges_any_size():
    """b serves the group but was timed once at batch 1 (no interval) and its GFLOPS there are unknown: its
    1.2x proves no win (as ``per_size_rows`` judges a size: a missing bound proves nothing), and the share of
    the ceiling is not the old winner's."""
    lone = {**score("b", 0, 1.2), "ci_low": None, "ci_high": float("nan"), "gflops": None}
    scores = [score("a", 0, 1.5), lone, score("a", 1, 1.0), score("b", 1, 1.3), score("a", 2, 0.95),
              score("b", 2, 1.3)]  # fmt: skip
    rows = [row(0, "a", 1.5), row(1, "b", 1.3), row(2, "b", 1.3), row(3, "a", 1.4)]
    first = one_kernel_per_key(rows, scores, SIZES, 0.02)[0]
    assert first["winner"] == "b" and first["score"] == pytest.approx(1.2)
    assert first["ci_low"] is None and first["ci_high"] is None and first["verdict"] == "tie"
    assert first["gflops"] is None and first["pct_ceiling"] is None


def test_a_group_whose_sizes_share_no_kernel_that_passed_keeps_its_rows():
    scores = [score("a", 0, 1.5), score("b", 1, 1.3)]
    rows = [row(0, "a", 1.5), row(1, "b", 1.3), row(2, None, None, "not_measured"), row(3, "a", 1.4)]
    assert one_kernel_per_key(rows, scores, SIZES, 0.02) == rows


def test_the_merge_serves_a_group_the_kernel_best_over_its_sizes_and_devices():
    """The merge decides each size across devices, then gives each runtime key's group one kernel as
    finalize does: the best geomean over the sizes of the devices' geomean score, among kernels scored at
    every size and overruled at none (b: measured slower than the spoof at size 1 on one device)."""
    from oto.fleet.combine import _served_kernel, runtime_groups

    def view(s):
        return {"score": s, "ci_low": s * 0.99, "ci_high": s * 1.01, "failed": None, "source": "final race"}

    obs = {
        "d1": {("a", 0): view(1.3), ("a", 1): view(1.1), ("b", 0): view(2.0), ("b", 1): view(0.9)},
        "d2": {("a", 0): view(1.2), ("a", 1): view(1.2), ("b", 0): view(1.9), ("c", 1): view(1.5)},
    }
    rows = [row(0, "b", 1.95), row(1, "c", 1.5), row(2, None, None, "not_measured"), row(3, "a", 1.4)]
    groups = runtime_groups(SIZES, rows)
    assert groups == {(512, 64, 512): [0, 1]}
    kernels_at = {0: {"a", "b"}, 1: {"a", "b", "c"}}
    refs = {0: "s", 1: "s"}
    assert _served_kernel([0, 1], kernels_at, refs, obs, 0.02) == "a"
    obs["d1"][("b", 1)] = view(1.05)  # b no longer loses there: its geomean over the two sizes is the best
    assert _served_kernel([0, 1], kernels_at, refs, obs, 0.02) == "b"


def test_the_report_says_which_sizes_took_their_groups_kernel():
    from oto.reporting.acceptance import one_kernel_markdown

    finals = [{"library": "L1", "one_kernel_per_key": {"sizes": 18, "groups": 6}},
              {"library": "L2", "one_kernel_per_key": {"sizes": 0, "groups": 0}},
              {"library": "L3", "one_kernel_per_key": {"sizes": 13, "groups": 7}}]  # fmt: skip
    text = "\n".join(one_kernel_markdown(finals))
    assert "31 size(s) in 13 such group(s) of 2 libraries ship their group's kernel" in text
    assert one_kernel_markdown(finals[1:2]) == [] and one_kernel_markdown([{"library": "old"}]) == []
