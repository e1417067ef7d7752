import numpy as np
import pandas as pd
from oto.scoring import SAMPLE_COLUMNS, flag_bad_timings, score_samples, verdict
from oto.stages.benchmark import interleave


def _samples(drift_amp: float, seed: int = 0) -> tuple[pd.DataFrame, dict[str, float]]:
    """Synthetic batch: 3 candidates and a reference at 2 sizes, under a slow ±drift_amp drift."""
    true = {"ref": 100.0, "a": 80.0, "b": 125.0, "c": 95.0}
    launches = interleave(["a", "b", "c"], {0: "ref", 1: "ref"}, 2, 6, "t")
    rng = np.random.default_rng(seed)
    rows = []
    for seq, launch in enumerate(launches):
        drift = 1 + drift_amp * np.sin(seq / len(launches) * 2 * np.pi)
        t = true[launch.kernel_id] * drift * rng.lognormal(0, 0.01)
        rows.append(
            (
                seq,
                launch.kernel_id,
                launch.role,
                launch.size_index,
                64,
                64,
                1,
                64,
                launch.rep,
                t,
                "ok",
                "",
                "simulated",
            )
        )
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS), true


def test_drift_normalised_scores_recover_true_ratios():
    df, true = _samples(0.25)
    scores = score_samples(df, {0: 1e6, 1: 1e6}, bootstrap=200, seed=1)
    for kid in "abc":
        got = scores[(scores.kernel_id == kid) & (scores.size_index == 0)].iloc[0]
        expect = true["ref"] / true[kid]
        assert abs(got.score / expect - 1) < 0.03, (kid, got.score, expect)
        assert got.ci_low <= got.score <= got.ci_high


def test_raw_medians_would_be_fooled_but_scores_rank_correctly():
    df, true = _samples(0.25, seed=4)
    scores = score_samples(df, {0: 1e6, 1: 1e6}, bootstrap=100, seed=1)
    ranking = scores[scores.size_index == 1].sort_values("score", ascending=False).kernel_id.tolist()
    assert ranking[:3] == ["a", "c", "ref"] and ranking[-1] == "b"


def test_bad_timings_are_flagged_not_averaged():
    df, _ = _samples(0.0)
    df.loc[3, "time_us"] = np.nan
    df.loc[4, "time_us"] = -1.0
    df.loc[5, "time_us"] = 1e-6  # far above any ceiling
    flagged = flag_bad_timings(df, np.full(len(df), 1e6), peak_gflops=100.0)
    assert (flagged.loc[[3, 4, 5], "status"] == "bad_timing").all()
    assert "exceeds the theoretical" in flagged.loc[5, "reason"]
    assert (flagged.drop(index=[3, 4, 5]).status == "ok").all()


def test_failed_kernel_never_scores_as_ok():
    df, _ = _samples(0.0)
    df.loc[df.kernel_id == "a", ["status", "reason"]] = ["validation_failed", "max error 1e3"]
    df.loc[df.kernel_id == "a", "time_us"] = np.nan
    scores = score_samples(df, {0: 1e6, 1: 1e6}, bootstrap=50)
    a = scores[scores.kernel_id == "a"]
    assert (a.status == "validation_failed").all() and a.score.isna().all()


def test_verdict():
    assert verdict(1.2, 1.1, 1.3, 0.02) == "win"
    assert verdict(1.01, 0.98, 1.04, 0.02) == "tie"
    assert verdict(0.8, 0.7, 0.9, 0.02) == "loss"
    assert verdict(float("nan"), float("nan"), float("nan"), 0.02) == "loss"


def test_interleave_brackets_candidates_with_reference():
    launches = interleave(["a", "b", "c", "d", "e"], {0: "r"}, 1, 1, "x")
    roles = [x.role for x in launches]
    assert roles[0] == "reference" and roles[-1] == "reference"
    assert max(len(run) for run in "".join("c" if r == "candidate" else "|" for r in roles).split("|")) <= 4
