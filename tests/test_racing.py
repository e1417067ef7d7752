from pathlib import Path

import numpy as np
import pandas as pd
from oto.config import load_config
from oto.deck.sources import load_deck
from oto.hardware.profile import load_profile
from oto.measurement.benchmarking import interleave_sizes
from oto.measurement.racing import (
    BUDGET,
    NO_VALID,
    SEPARATED,
    TIE,
    RaceSettings,
    SizeDecision,
    annotate_scores,
    decide_size,
    race,
)
from oto.measurement.scoring import SAMPLE_COLUMNS, SCORE_COLUMNS, score_samples
from oto.measurement.selection import measurement_failures, observations
from oto.search.evidence import evidence_for

TRUE = {"ref": 100.0, "fast": 70.0, "close": 71.0, "slow": 130.0, "mid": 90.0, "bad": 50.0, "meh": 108.0}


def _scores(rows):
    """rows: (kernel, score, lo, hi[, status]) at size 0."""
    out = []
    for r in rows:
        kid, score, lo, hi, *status = r
        out.append(
            (kid, 0, 5, score, lo, hi, 1.0, 1.0, status[0] if status else "ok", "", 0, "reference_timeline")
        )
    return pd.DataFrame(out, columns=SCORE_COLUMNS)


def test_decide_separated_tie_open_and_failed_never_leads():
    sep = decide_size(_scores([("a", 1.3, 1.25, 1.35), ("ref", 1.0, 0.98, 1.02)]), 0, 0.02)
    assert (sep.leader, sep.stop, sep.contenders) == ("a", SEPARATED, ("a",))
    tie = decide_size(_scores([("a", 1.300, 1.295, 1.305), ("b", 1.298, 1.293, 1.303)]), 0, 0.02)
    assert tie.stop == TIE and set(tie.contenders) == {"a", "b"}
    wide = decide_size(
        _scores([("a", 1.30, 1.20, 1.40), ("b", 1.25, 1.15, 1.35), ("c", 1.0, 0.9, 1.1)]), 0, 0.02
    )
    assert wide.stop is None and wide.contenders == ("a", "b")
    # The fastest kernel failed validation: it cannot lead, the gate holds inside the race too.
    gated = decide_size(_scores([("x", 2.0, 1.9, 2.1, "validation_failed"), ("a", 1.3, 1.2, 1.4)]), 0, 0.02)
    assert gated.leader == "a"
    assert decide_size(_scores([("x", np.nan, np.nan, np.nan, "crash")]), 0, 0.02).stop == NO_VALID


class FakeGPU:
    """Times launches with a slow ±25% drift over execution order and 3% log-normal jitter."""

    def __init__(self, seed=0, fail=()):
        self.rng = np.random.default_rng(seed)
        self.clock = 0
        self.fail = set(fail)
        self.calls = 0

    def measure(self, launches):
        self.calls += 1
        rows = []
        for seq, la in enumerate(launches):
            drift = 1 + 0.25 * np.sin(2 * np.pi * (self.clock + seq) / 3000)
            t = TRUE[la.kernel_id] * (1 + 0.1 * la.size_index) * drift * self.rng.lognormal(0, 0.03)
            status, reason = (
                ("validation_failed", "max error 3e2") if la.kernel_id in self.fail else ("ok", "")
            )
            rows.append((seq, la.kernel_id, la.role, la.size_index, 64, 64, 1, 64, la.rep,
                         np.nan if status != "ok" else t, status, reason, "simulated"))  # fmt: skip
        self.clock += len(launches)
        return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)


def _race(gpu, candidates, settings, n_sizes=3):
    reference = dict.fromkeys(range(n_sizes), "ref")
    return race(
        gpu.measure,
        lambda df, only: score_samples(
            df, dict.fromkeys(range(n_sizes), 1e6), bootstrap=100, seed=0, sizes=only
        ),
        lambda per, reps, off, rnd: interleave_sizes(per, reference, reps, f"t:{rnd}", off),
        {i: list(candidates) for i in range(n_sizes)},
        reference,
        settings,
    )


def test_race_probes_everyone_then_tops_up_only_contenders():
    gpu = FakeGPU(seed=1)
    settings = RaceSettings(probe_repetitions=3, round_repetitions=4, max_repetitions=24)
    res = _race(gpu, ["fast", "close", "slow", "mid"], settings)
    s = res.samples
    probe = s[s["round"] == 0]
    assert set(probe["kernel_id"]) == {"fast", "close", "slow", "mid", "ref"}
    assert (probe[probe.role == "candidate"].groupby(["kernel_id", "size_index"]).size() == 3).all()
    later = s[(s["round"] > 0) & (s.role == "candidate")]
    assert "slow" not in set(later["kernel_id"])  # 30% behind the spoof floor: out after the probe
    assert gpu.calls == res.rounds > 1  # one backend call per round
    # Execution order continues across rounds (one timeline for the drift model); reps never repeat.
    assert s["seq"].is_unique and (np.diff(s["seq"].to_numpy()) > 0).all()
    assert not s[s.role == "candidate"].duplicated(["kernel_id", "size_index", "rep"]).any()
    assert s.groupby(["kernel_id", "size_index"]).size().max() <= 2 * settings.max_repetitions + 8
    for d in res.decisions.values():
        assert d.leader in ("fast", "close") and d.stop in (SEPARATED, TIE, BUDGET)
    # fast and close are 1.4% apart: the race keeps sampling them, not the losers.
    n = s[s.role == "candidate"].groupby("kernel_id").size()
    assert n["fast"] > n["mid"] and n["close"] > n["slow"]


def test_race_separates_clear_winner_quickly():
    res = _race(FakeGPU(seed=2), ["fast", "slow", "mid"], RaceSettings(max_repetitions=40))
    assert {d.stop for d in res.decisions.values()} == {SEPARATED}
    assert {d.leader for d in res.decisions.values()} == {"fast"}
    per = res.samples[res.samples.role == "candidate"].groupby(["kernel_id", "size_index"]).size()
    assert per.mean() <= 10


def test_reference_is_a_contender_and_can_win():
    res = _race(FakeGPU(seed=3), ["slow", "meh"], RaceSettings())
    assert {d.leader for d in res.decisions.values()} == {"ref"}
    assert {d.stop for d in res.decisions.values()} == {SEPARATED}


def test_validation_failure_never_wins_the_race():
    res = _race(FakeGPU(seed=4, fail={"bad"}), ["bad", "mid", "slow"], RaceSettings())
    assert {d.leader for d in res.decisions.values()} == {"mid"}
    bad = res.scores[res.scores.kernel_id == "bad"]
    assert (bad.status == "validation_failed").all() and (bad.reason == "max error 3e2").all()
    assert "bad" not in set(res.samples.loc[res.samples["round"] > 0, "kernel_id"])  # no samples wasted


def test_budget_stops_the_race_and_says_so():
    res = _race(FakeGPU(seed=5), ["fast", "close"], RaceSettings(budget_per_pair=5))
    assert res.rounds == 1 and {d.stop for d in res.decisions.values()} == {BUDGET}
    capped = _race(FakeGPU(seed=5), ["fast", "close"], RaceSettings(max_repetitions=7))
    assert {d.stop for d in capped.decisions.values()} <= {BUDGET, SEPARATED, TIE}
    per = capped.samples[capped.samples.role == "candidate"].groupby(["kernel_id", "size_index"]).size()
    assert per.max() <= 7


def test_annotate_scores_reproduces_the_decision():
    res = _race(FakeGPU(seed=6), ["fast", "slow", "mid"], RaceSettings())
    ann = annotate_scores(res.scores, 0.02)
    for i, d in res.decisions.items():
        at = ann[ann.size_index == i]
        assert set(at["race"]) == {d.stop}
        assert set(at.loc[at.contender, "kernel_id"]) == set(d.contenders)
    assert set(
        annotate_scores(_scores([("a", 1.3, 1.0, 1.6), ("b", 1.2, 0.9, 1.5)]), 0.02, "fixed").race
    ) == {"fixed"}


def test_settings_from_config():
    s = RaceSettings.from_config(
        {"tie_tolerance": 0.05, "racing": {"probe_repetitions": 5, "budget_per_pair": 9}}
    )
    assert (s.probe_repetitions, s.budget_per_pair, s.tie_tolerance, s.max_repetitions) == (5, 9, 0.05, 20)


def test_failures_are_counted_and_reach_the_evidence():
    scores = pd.DataFrame(
        [
            (
                "a",
                0,
                5,
                1.1,
                1.0,
                1.2,
                9.0,
                1.0,
                "ok",
                "2 timing(s) excluded: NaN, zero or negative time",
                2,
                "",
            ),
            ("v", 0, 5, 1.5, 1.4, 1.6, 9.0, 1.0, "validation_failed", "results differ", 0, ""),
            ("t", 0, 4, 1.0, 0.9, 1.1, 9.0, 1.0, "timeout", "no completion within 5000000 us", 0, ""),
        ],
        columns=SCORE_COLUMNS,
    )
    scores = scores.to_dict("records")  # select reads scores.csv as plain rows (oto.measurement.score_rows)
    assert measurement_failures(scores) == {"bad_timing": 2, "validation_failed": 1, "timeout": 1}
    params = {k: {"DepthU": 8} for k in ("a", "v", "t", "c")}
    rows = [{"winner": "a"}]
    obs = {o["id"]: o for o in observations(scores, params, rows, [], {"c": ("compile_error", "VGPR > 256")})}
    assert obs["v"]["failure"] == "validation_failed" and obs["v"]["failure_reason"] == "results differ"
    assert obs["t"]["failure"] == "timeout"
    assert (obs["c"]["failure"], obs["c"]["failure_reason"]) == ("compile_error", "VGPR > 256")
    assert obs["a"]["failure"] == "" and obs["a"]["sizes_won"] == 1
    # ... and the strategies get class and reason with each observation (mutate's evidence)
    repo = Path(__file__).resolve().parents[1]
    deck = load_deck("manifest").libraries["Cijk_Ailk_Bljk_SB"]
    config = load_config(repo / "config" / "config.yaml")
    ev = evidence_for(
        deck,
        1,
        {"observations": list(obs.values())},
        load_profile(repo / "arch_profiles" / "gfx90c.yaml"),
        config,
    )
    got = {o.kernel_id: (o.failure, o.failure_reason) for o in ev.observations}
    assert got["c"] == ("compile_error", "VGPR > 256") and got["v"] == ("validation_failed", "results differ")


def _workload_race(seed, precision, workload=None, cap=120, budget_per_pair=40):
    settings = RaceSettings(
        budget_per_pair=budget_per_pair, workload_precision=precision, workload_max_repetitions=cap
    )
    reference = dict.fromkeys(range(3), "ref")
    return race(
        FakeGPU(seed=seed).measure,
        lambda df, only: score_samples(df, dict.fromkeys(range(3), 1e6), bootstrap=100, seed=0, sizes=only),
        lambda per, reps, off, rnd: interleave_sizes(per, reference, reps, f"t:{rnd}", off),
        {i: ["fast", "slow", "mid"] for i in range(3)},
        reference,
        settings,
        {0: 1, 1: 2, 2: 100} if workload is None else workload,
    )


def _leader_n_and_width(res, size):
    s, sc = res.samples, res.scores
    n = int(((s.kernel_id == "fast") & (s.size_index == size) & (s.status == "ok")).sum())
    row = lambda k: sc[(sc.kernel_id == k) & (sc.size_index == size)].iloc[0]  # noqa: E731
    half = lambda r: (np.log(r.ci_high) - np.log(r.ci_low)) / 2  # noqa: E731
    return n, float(np.hypot(half(row("fast")), half(row("ref")))), float(row("fast").score)


def test_workload_precision_races_the_heavy_size_to_its_target():
    off = _workload_race(7, 0.0)
    on = _workload_race(7, 0.01)
    # Decided after the probe either way: the winner is clear at every size.
    assert {d.leader for d in on.decisions.values()} == {"fast"} == {d.leader for d in off.decisions.values()}
    n_off, width_off, _ = _leader_n_and_width(off, 2)
    n_on, width_on, _ = _leader_n_and_width(on, 2)
    assert n_off == 3 and not off.refined  # off: the probe decided it, and that was all
    # Size 2 has ~97% of the workload's time: its interval (the floor's in quadrature) within ~1% (the
    # race's last scores; the final rescoring refits the drift on every sample and may move it a little).
    target = 0.01 / np.sqrt(100 * 1.2 / (1 * 1.0 + 2 * 1.1 + 100 * 1.2))
    assert width_off > 3 * target and width_on <= 1.15 * target
    assert n_on > 20 and 2 in on.refined and on.refined[2] >= n_on - 3
    # The light sizes ask for 10x the precision, mostly met by the probe: far fewer launches there.
    assert _leader_n_and_width(on, 0)[0] < n_on / 3
    # Top-ups of only precision sizes come in few rounds, not round_repetitions at a time.
    assert on.rounds <= 6


def test_workload_precision_stops_at_its_cap_and_is_off_without_a_workload():
    capped = _workload_race(7, 0.001, cap=30)  # 0.1%: out of reach at 3% jitter
    n, width, _ = _leader_n_and_width(capped, 2)
    assert 30 <= n <= 30 + 4 and width > 0.001
    assert all(d.stop in (SEPARATED, TIE) for d in capped.decisions.values())  # not budget: its own cap
    # Precision launches are not the race's budget's: a budget the probe nearly spends still gets them.
    tight = _workload_race(7, 0.01, budget_per_pair=4)
    assert _leader_n_and_width(tight, 2)[1] <= 1.15 * 0.01 and BUDGET not in {
        d.stop for d in tight.decisions.values()
    }
    none = _workload_race(7, 0.01, workload={})
    assert not none.refined and _leader_n_and_width(none, 2)[0] == 3


def test_workload_precision_brings_the_heavy_score_closer_to_the_truth():
    """Over seeds, the heavy size's measured score (floor / winner) is nearer the true 100/70: the error
    the workload's figure inherits from the probe alone is what the option removes."""
    truth = np.log(100 / 70)
    err_off = [abs(np.log(_leader_n_and_width(_workload_race(s, 0.0), 2)[2]) - truth) for s in range(8)]
    err_on = [abs(np.log(_leader_n_and_width(_workload_race(s, 0.01), 2)[2]) - truth) for s in range(8)]
    assert np.sqrt(np.mean(np.square(err_on))) < 0.6 * np.sqrt(np.mean(np.square(err_off)))
    assert max(err_on) < 0.02


def _close_race(seed, decides, workload=None):
    """'fast' (70) against 'close' (71), 1.4% apart at 3% jitter, at two sizes; max_repetitions 6 leaves
    them undecided. The workload calls size 0 only."""
    settings = RaceSettings(max_repetitions=6, workload_precision=0.01, workload_decides=decides)
    reference = dict.fromkeys(range(2), "ref")
    return race(
        FakeGPU(seed=seed).measure,
        lambda df, only: score_samples(df, dict.fromkeys(range(2), 1e6), bootstrap=100, seed=0, sizes=only),
        lambda per, reps, off, rnd: interleave_sizes(per, reference, reps, f"t:{rnd}", off),
        {i: ["fast", "close"] for i in range(2)},
        reference,
        settings,
        {0: 100} if workload is None else workload,
    )


def _launches(res, kernel, size):
    s = res.samples
    return int(((s.kernel_id == kernel) & (s.size_index == size) & (s.status == "ok")).sum())


def test_an_undecided_size_the_workload_calls_races_on_until_its_contenders_are_within_its_target():
    """workload_decides: at a size the workload calls, max_repetitions leaving a contender possibly slower
    than the leader by more than the size's precision target (0.01 / sqrt(share)) keeps both racing; within
    the target, at another size, with the option off or with no workload, nothing races on."""
    from oto.measurement.racing import _WorkloadPrecision

    def rows(fast_half, near_half):  # (kernel, size, time, half-width in log) at size 0 and 1
        out = []
        for i in (0, 1):
            for k, t, h in (("ref", 100.0, 0.01), ("fast", 70.0, fast_half), ("near", 70.7, near_half)):
                out.append((k, i, 9, 100.0 / t, 100.0 / t * np.exp(-h), 100.0 / t * np.exp(h), t, 1.0, "ok",
                            "", 0, "reference_timeline"))  # fmt: skip
        return pd.DataFrame(out, columns=SCORE_COLUMNS)

    d = SizeDecision(0, "fast", ("fast", "near"), None)
    counts = pd.Series({("fast", 0): 23, ("near", 0): 23, ("fast", 1): 23, ("near", 1): 23})
    for decides, workload, expect in (
        (True, {0: 100}, ["fast", "near"]),  # 1% apart +- 1.4%: "near" may be 2.4% slower; target 1%
        (False, {0: 100}, []),
        (True, {}, []),
        (True, {0: 1, 1: 1_000_000}, []),  # size 0's share ~1e-6: a target of ~10, any gap within it
    ):
        w = _WorkloadPrecision(workload, {0: "ref", 1: "ref"}, RaceSettings(workload_decides=decides))
        w.update(rows(0.01, 0.01), counts)
        assert w.deciding(0, d) == expect, (decides, workload)
        assert (0 in w.undecided) == bool(expect)
    w = _WorkloadPrecision({0: 100}, {0: "ref", 1: "ref"}, RaceSettings(workload_decides=True))
    w.update(rows(0.01, 0.01), counts.replace(23, 120))
    assert w.deciding(0, d) == []  # both at workload_max_repetitions
    w.update(rows(0.001, 0.001), counts)  # 0.2% apart +- 0.14%: within the 1% target
    w.row_us[("near", 0)] = 70.14
    assert w.deciding(0, d) == []


def test_with_workload_decides_a_race_ends_decided_or_at_its_cap_where_the_workload_calls():
    """The whole race: 'fast' and 'close' (1.4% apart at 3% jitter), max_repetitions 6. Where the workload
    calls (size 0) the race ends separated, tied, or with both at workload_max_repetitions; the uncalled size
    stops as before."""
    for seed in range(4):
        r = _close_race(seed, True)
        n = {k: _launches(r, k, 0) for k in ("fast", "close")}
        assert r.decisions[0].stop in (SEPARATED, TIE) or min(n.values()) >= 120, (seed, n)
        assert max(_launches(r, k, 1) for k in ("fast", "close")) <= 12
