"""The time budget (config ``budget.hours``): GPU time shared by expected gain, starved libraries frozen with
the reason, and nothing changed without a budget."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from oto.agent.proposals import budget_decision, frozen_or_starved, frozen_proposals
from oto.config import ConfigError, validate_config
from oto.deck.model import LibraryDeck, read_library_yaml, write_library_yaml
from oto.files import StageFileError, read_yaml, write_yaml
from oto.measurement.budget import (
    UNKNOWN_IMPROVEMENT,
    BudgetInputs,
    LibraryState,
    allocate,
    generation_budget,
    generation_gpu_seconds,
    library_state,
    size_flops,
)
from oto.measurement.budget_file import read_budget
from oto.measurement.selection_file import read_selection

SIZES = [[64, 64, 1, 256], [1024, 1024, 1, 1024]]


def selection(library, generation, gflops, pct, history, frozen=False, converged=False):
    return {
        "library": library,
        "generation": generation,
        "frozen": frozen,
        "sizes": SIZES,
        "deck_indices": [0, 1],
        "per_size": [
            {"size_index": i, "winner": "k1", "score": 1.0, "gflops": g, "pct_ceiling": p}
            for i, (g, p) in enumerate(zip(gflops, pct, strict=True))
        ],
        "kernels": {"k1": {}},
        "summary": {"geomean_score": history[-1]},
        "convergence": {"converged": converged, "history": history, "reason": "flat" if converged else ""},
    }


def state(name, gain_time, improvement=0.5, spent=10.0, last=5.0, tuning=True, generation=1, measured=1):
    return LibraryState(name, generation, gain_time, improvement, spent, last, tuning, measured)


def test_the_state_weighs_the_gap_by_calls_and_time_and_reads_the_improvement():
    sel = selection("Cijk_Ailk_Bljk_DB", 2, gflops=[10.0, 100.0], pct=[50.0, 90.0], history=[1.0, 1.2, 1.5])
    s = library_state(sel, size_weights=[3, 1], generation_seconds=[1.0, 2.0, 4.0])
    t0 = 2 * 64 * 64 * 256 / 10e9
    t1 = 2 * 1024**3 / 100e9
    assert s.gap_time_s == pytest.approx(3 * t0 * 0.5 + 1 * t1 * 0.1)
    assert s.improvement == pytest.approx(0.25)
    assert (s.spent_s, s.last_generation_s, s.tuning) == (7.0, 4.0, True)
    first = library_state(
        selection("Cijk_Ailk_Bljk_DB", 0, [10.0, 100.0], [50.0, 90.0], [1.0]), [1, 1], [1.0]
    )
    assert first.improvement == UNKNOWN_IMPROVEMENT
    done = library_state(
        selection("Cijk_Ailk_Bljk_DB", 2, [10.0, 100.0], [50.0, 90.0], [1.0, 1.0], converged=True),
        [1, 1],
        [1],
    )
    assert not done.tuning


def test_a_size_with_strides_counts_its_gemm():
    assert size_flops([2, 3, 4, 5, 2, 2, 6, 6]) == size_flops([2, 3, 4, 5]) == 2 * 2 * 3 * 4 * 5


def test_a_complex_library_times_its_sizes_at_eight_flops_a_mac():
    """ZB's GFLOPS count 8 flops per multiply-accumulate: its time at a size is 4× what 2 flops would say."""
    real = library_state(selection("Cijk_Ailk_Bljk_DB", 1, [10.0, 100.0], [50.0, 90.0], [1.0]), [1, 1], [1])
    cplx = library_state(
        selection("Cijk_Ailk_Bljk_ZB_GB", 1, [10.0, 100.0], [50.0, 90.0], [1.0]), [1, 1], [1]
    )
    assert cplx.gap_time_s == pytest.approx(4 * real.gap_time_s)


def test_a_size_without_a_winner_adds_no_gain():
    sel = selection("Cijk_Ailk_Bljk_DB", 1, gflops=[None, 100.0], pct=[None, 0.0], history=[1.0, 2.0])
    s = library_state(sel, [1000, 1], [1.0])
    assert s.gap_time_s == pytest.approx(2 * 1024**3 / 100e9)


def test_the_time_left_goes_by_expected_gain_and_the_weakest_starve_first():
    states = [state("A", 9.0), state("B", 1.0), state("C", 5.0, tuning=False)]
    # budget 40 s, spent 30 s: 10 s left; B's 1 s share pays for none of its 5 s generations: A gets all 10 s
    plan = allocate(states, budget_s=40.0, generations_left=3)
    assert set(plan) == {"A", "B"}  # a converged library takes no share
    assert plan["A"].share_s == pytest.approx(10.0) and plan["A"].generations == 2 and not plan["A"].reason
    assert plan["B"].generations == 0 and plan["B"].reason.startswith("at gen2: its share 1 s of the 10 s")
    # plenty of time: both run, capped by the generations left
    plan = allocate(states, budget_s=1e6, generations_left=3)
    assert [a.generations for a in plan.values()] == [3, 3]
    # the budget used up: every library starves
    plan = allocate(states, budget_s=20.0, generations_left=3)
    assert all(a.generations == 0 and a.reason for a in plan.values())


def test_what_a_starved_library_would_have_had_goes_to_the_others():
    """Four alike libraries, time for two of their generations: two go on (the least gain per GPU second
    starves first), not none, though each one's even share is short of a generation."""
    states = [state(n, g, spent=0.0, last=10.0) for n, g in zip("ABCD", (4.0, 3.0, 2.0, 1.0), strict=True)]
    plan = allocate(states, budget_s=25.0, generations_left=4)
    assert {n for n, a in plan.items() if a.generations} == {"A", "B"}
    assert plan["A"].share_s + plan["B"].share_s == pytest.approx(25.0)


def test_a_cheap_library_takes_no_more_than_its_generations_cost():
    """A library whose generations cost a tenth of a second gets those, not its gain's share of the hour; the
    rest pays for the expensive one's generation."""
    cheap, dear = state("A", 9.0, spent=0.0, last=0.1), state("B", 1.0, spent=0.0, last=50.0)
    plan = allocate([cheap, dear], budget_s=60.0, generations_left=4)
    assert plan["A"].share_s == pytest.approx(0.4) and plan["A"].generations == 4
    assert plan["B"].share_s == pytest.approx(59.6) and plan["B"].generations == 1


def test_improvement_counts_and_a_stalled_library_keeps_a_sliver():
    """B has had the generations equal generations would give it (12), A is owed 10 more (50 s of the 51 s
    left); the 1 s beyond goes by gain: B's sliver, 1 × 0.01 / 0.51 s, is short of its 5 s generation."""
    fast = state("A", 1.0, improvement=0.5, spent=10.0, measured=2)
    slow = state("B", 1.0, improvement=0.0, spent=60.0, measured=12)
    plan = allocate([fast, slow], budget_s=70.0 + 51.0, generations_left=20)
    assert plan["A"].share_s == pytest.approx(51.0) and plan["A"].generations == 10
    assert plan["B"].generations == 0 and "improvement 0" in plan["B"].reason


def test_a_library_the_workload_calls_keeps_its_equal_generations_and_the_cold_ones_pay_for_more():
    """Time for 4 rounds of 10 s generations, 1 done: the hot library and the barely called one are owed the
    3 generations equal generations would give them; the library the workload never calls is starved and
    its 30 s go by gain, to the hot one."""
    hot, warm, cold = (state(n, g, spent=10.0, last=10.0) for n, g in (("H", 100.0), ("W", 0.01), ("C", 0.0)))
    plan = allocate([hot, warm, cold], budget_s=120.0, generations_left=7)
    assert plan["W"].generations == 3 and not plan["W"].reason
    assert plan["C"].generations == 0 and plan["C"].reason
    assert plan["H"].generations == 5 and plan["H"].share_s == pytest.approx(60.0, abs=0.01)
    # time for no more than what was spent: the guarantee lapses, gain alone decides
    assert allocate([hot, warm, cold], budget_s=35.0, generations_left=7)["W"].generations == 0


def test_the_gpu_seconds_are_the_recorded_launch_times(tmp_path):
    path = tmp_path / "samples.csv"
    path.write_text("seq,time_us,status\n0,1000000,ok\n1,500000,ok\n2,,timeout\n3,nan,ok\n")
    assert generation_gpu_seconds(path) == pytest.approx(1.5)
    empty = tmp_path / "empty.csv"
    empty.write_text("seq,time_us,status\n")
    assert generation_gpu_seconds(empty) == 0.0


def _library(tmp_path, name, gflops, pct, history, seconds):
    lib_dir = tmp_path / name
    deck = LibraryDeck(
        name=name, family="DB", pattern="NN", problem_type={}, logic={}, solutions=[], sizes=SIZES,
        shipped=[None, None], calls=[100, 100],
    )  # fmt: skip
    write_library_yaml(deck, lib_dir / "deck.yaml", {})
    for g, s in enumerate(seconds):
        (lib_dir / f"gen{g}").mkdir(parents=True, exist_ok=True)
        (lib_dir / f"gen{g}" / "samples.csv").write_text(f"seq,time_us,status\n0,{s * 1e6},ok\n")
        write_yaml(
            lib_dir / f"gen{g}" / "proposals.yaml", {"library": name, "generation": g, "proposals": []}
        )
    last = len(seconds) - 1
    write_yaml(lib_dir / f"gen{last}" / "selection.yaml", selection(name, last, gflops, pct, history))
    return lib_dir


def _budget(tmp_path, libs, gen, hours):
    return BudgetInputs(
        hours=hours,
        decks=[tmp_path / lib / "deck.yaml" for lib in libs],
        selections=[tmp_path / lib / f"gen{gen - 1}" / "selection.yaml" for lib in libs],
        samples=[tmp_path / lib / f"gen{g}" / "samples.csv" for lib in libs for g in range(gen)],
    )


def _starved(tmp_path, libs, name, gen, hours, max_generations=4):
    """The proposals mutate writes for ``name`` at ``gen``: the budget job's file of the generation (as the
    rule writes it), then mutate's reading of it."""
    path = tmp_path / "budget" / f"gen{gen}.yaml"
    write_yaml(path, generation_budget(_budget(tmp_path, libs, gen, hours), gen, max_generations))
    return frozen_or_starved(name, gen, None, budget_decision(path, gen, libs))


def test_mutate_starves_the_library_with_the_least_to_gain_and_revives_it_when_time_frees(tmp_path):
    libs = ["Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_DB"]
    _library(tmp_path, libs[0], [10.0, 100.0], [10.0, 10.0], [1.0, 2.0], [30.0, 30.0])  # far from ceiling
    _library(tmp_path, libs[1], [10.0, 100.0], [99.0, 99.0], [1.0, 1.01], [30.0, 30.0])  # at the ceiling
    hours = (120.0 + 40.0) / 3600  # 40 s left: one generation's 30 s, for one library
    starved = _starved(tmp_path, libs, libs[1], 2, hours)
    assert (
        starved["frozen"] and starved["proposals"] == [] and starved["reason"].startswith("starved at gen2: ")
    )
    assert _starved(tmp_path, libs, libs[0], 2, hours) is None
    # gen2: libs[0] ran (30 s) and converged; libs[1] was starved (its frozen gen2 recorded no launch). At
    # gen3 the 10 s left pay for nothing, but a larger budget gives libs[1] its generation back: the
    # starving is decided again, from its last measured generation's cost (30 s, not the starved 0 s).
    write_yaml(tmp_path / libs[1] / "gen1" / "proposals.yaml", starved)
    for lib, secs, converged in ((libs[0], 30.0, True), (libs[1], 0.0, False)):
        (tmp_path / lib / "gen2").mkdir()
        (tmp_path / lib / "gen2" / "samples.csv").write_text(f"seq,time_us,status\n0,{secs * 1e6},ok\n")
        sel = selection(lib, 2, [10.0, 100.0], [99.0, 99.0], [1.0, 1.01], frozen=not converged)
        sel["convergence"]["converged"] = converged
        write_yaml(tmp_path / lib / "gen2" / "selection.yaml", sel)
    assert _starved(tmp_path, libs, libs[1], 3, hours) is not None
    more = (150.0 + 30.0) / 3600  # 30 s left after the 150 s spent: libs[1]'s generation fits
    assert _starved(tmp_path, libs, libs[1], 3, more) is None
    decided = read_yaml(tmp_path / "budget" / "gen3.yaml")
    assert decided["allocations"][libs[0]]["decision"] == "converged"  # convergence, not the budget, froze it
    assert decided["allocations"][libs[1]]["decision"] == "runs"
    assert frozen_proposals(libs[1], 3, read_yaml(tmp_path / libs[1] / "gen2" / "selection.yaml")) is None
    assert frozen_proposals(libs[0], 3, read_yaml(tmp_path / libs[0] / "gen2" / "selection.yaml"))["frozen"]


def _starved_reason_851acdb(library, generation, budget, max_generations):
    """The decision as every mutate job made it before the budget job (oto.measurement.budget.starved_reason
    at commit 851acdb, kept verbatim): each job read every library's files and allocated alone."""
    seconds = {}
    for path in budget.samples:
        gen = int(path.parent.name.removeprefix("gen"))
        seconds.setdefault(path.parent.parent.name, []).append((gen, generation_gpu_seconds(path)))
    states = []
    for deck_path, selection_path in zip(budget.decks, budget.selections, strict=True):
        deck = read_library_yaml(deck_path)
        spent = [s for _, s in sorted(seconds.get(deck.name, []))]
        weights = deck.calls if deck.calls is not None else deck.weights
        states.append(library_state(read_selection(selection_path), weights, spent))
    share = allocate(states, budget.hours * 3600.0, max_generations - generation).get(library)
    return f"starved {share.reason}" if share is not None and share.reason else ""


@pytest.mark.parametrize("seed", range(6))
def test_the_budget_file_gives_every_library_the_decision_each_mutate_job_made_alone(tmp_path, seed):
    """Random libraries (gaps, improvements, generation costs, converged or starved before) and budgets from
    plenty to none: for every library, the proposals mutate writes from the budget job's file are those the
    old per-job decision gave, the reason to the character."""
    import random

    rng = random.Random(seed)
    names = [f"Cijk_{a}_{b}_{f}" for f in ("DB", "ZB_GB") for a in ("Ailk", "Alik") for b in ("Bljk", "Bjlk")]
    libs = rng.sample(names, rng.randint(2, 8))
    gen, max_generations = rng.randint(1, 4), rng.randint(5, 8)
    for name in libs:
        seconds = [
            rng.choice((0.0, rng.uniform(0.01, 100.0))) if g else rng.uniform(0.01, 100.0) for g in range(gen)
        ]
        history = [rng.uniform(0.5, 2.0) for _ in range(gen)]
        pct = [rng.choice((99.9, rng.uniform(1.0, 99.0))), rng.uniform(1.0, 99.0)]
        _library(tmp_path, name, [rng.uniform(1.0, 500.0), rng.uniform(1.0, 500.0)], pct, history, seconds)
        sel = read_yaml(tmp_path / name / f"gen{gen - 1}" / "selection.yaml")
        sel["convergence"]["converged"] = rng.random() < 0.2
        write_yaml(tmp_path / name / f"gen{gen - 1}" / "selection.yaml", sel)
    spent = sum(generation_gpu_seconds(p) for p in _budget(tmp_path, libs, gen, 1.0).samples)
    decided = {"runs": 0, "starved": 0, "converged": 0}
    for left in (0.0, 1.0, 30.0, 200.0, 1e5):
        hours = (spent + left) / 3600 + 1e-9
        inputs = _budget(tmp_path, libs, gen, hours)
        path = tmp_path / "budget" / f"gen{gen}.yaml"
        write_yaml(path, generation_budget(inputs, gen, max_generations))
        for name in libs:
            old = _starved_reason_851acdb(name, gen, inputs, max_generations)
            new = frozen_or_starved(name, gen, None, budget_decision(path, gen, libs))
            assert (new or {}).get("reason", "") == old, (name, left)
            decided[read_budget(path, gen, libs)["allocations"][name]["decision"]] += 1
    assert decided["runs"] and decided["starved"], decided  # both paths were taken


def _budget_file(tmp_path, **change):
    libs = ["Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_DB"]
    _library(tmp_path, libs[0], [10.0, 100.0], [10.0, 10.0], [1.0, 2.0], [30.0, 30.0])
    _library(tmp_path, libs[1], [10.0, 100.0], [99.0, 99.0], [1.0, 1.01], [30.0, 30.0])
    doc = generation_budget(_budget(tmp_path, libs, 2, 160.0 / 3600), 2, 4)
    for key, value in change.items():
        doc[key] = value(doc) if callable(value) else value
    write_yaml(tmp_path / "budget.yaml", doc)
    return tmp_path / "budget.yaml", libs


def test_the_budget_file_says_what_the_decision_used(tmp_path):
    path, libs = _budget_file(tmp_path)
    doc = read_budget(path, 2, libs)
    assert doc["numbers"] == "unknown"  # these selections name no provenance; a run's say simulated
    assert doc["spent_s"] == pytest.approx(120.0) and doc["left_s"] == pytest.approx(40.0)
    assert (doc["generations_left"], doc["libraries"]) == (2, libs)
    runs, starved = (doc["allocations"][lib] for lib in libs)
    assert (runs["decision"], runs["reason"], runs["generations"]) == ("runs", "", 1)
    assert starved["decision"] == "starved" and starved["reason"].startswith("at gen2: its share")
    assert starved["gap_time_s"] < runs["gap_time_s"] and starved["last_generation_s"] == pytest.approx(30.0)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"generation": 3}, "field 'generation': 3, but this is gen2"),
        ({"libraries": lambda d: d["libraries"][:1]}, "field 'libraries' names another library set than this "
         "run's 2: missing Cijk_Alik_Bljk_DB"),
        ({"libraries": lambda d: [*d["libraries"], "Cijk_Alik_Bjlk_DB"]},
         "not in this run: Cijk_Alik_Bjlk_DB"),
        ({"libraries": lambda d: [*d["libraries"], d["libraries"][0]]}, "named twice"),
        ({"allocations": lambda d: {k: v for k, v in d["allocations"].items() if "Alik" in k}},
         "field 'allocations': not one entry per library"),
        ({"allocations": lambda d: {k: {**v, "decision": "maybe"} for k, v in d["allocations"].items()}},
         "field 'allocations.Cijk_Ailk_Bljk_DB.decision': 'maybe' is not one of"),
        ({"allocations": lambda d: {k: {**v, "reason": ""} for k, v in d["allocations"].items()}},
         "field 'allocations.Cijk_Alik_Bljk_DB.reason': '' with decision starved"),
        ({"hours": "eight"}, "field 'hours': 'eight' is not of type 'number'"),
        ({"libraries": None}, "field 'libraries': None is not of type 'array'"),
    ],
)  # fmt: skip
def test_a_malformed_budget_file_or_one_of_another_run_is_named_by_file_and_field(tmp_path, change, message):
    path, libs = _budget_file(tmp_path, **change)
    with pytest.raises(StageFileError, match="budget.yaml: ") as err:
        read_budget(path, 2, libs)
    assert message in str(err.value)


def test_a_budget_file_that_is_no_yaml_mapping_is_named(tmp_path):
    path = tmp_path / "gen1.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(StageFileError, match="gen1.yaml: field '<document>'"):
        read_budget(path, 1, ["Cijk_Ailk_Bljk_DB"])


def test_a_starved_library_is_still_tuning_and_costs_its_last_measured_generation():
    sel = selection(
        "Cijk_Ailk_Bljk_DB", 3, [10.0, 100.0], [50.0, 90.0], [1.0, 1.2], frozen=True
    )  # starved at gen3
    s = library_state(sel, [1, 1], generation_seconds=[4.0, 6.0, 5.0, 0.0])
    assert s.tuning and s.last_generation_s == 5.0 and s.spent_s == 15.0


def test_a_library_whose_next_generation_fits_what_is_left_runs():
    """45 s left: the dear library's 100 s generation does not fit, the cheap one's 0.2 s do, though its gain
    per second is the lower and its gain's share (a millionth) pays for none of them."""
    dear, cheap = state("A", 100.0, spent=0.0, last=100.0), state("B", 0.001, spent=0.0, last=0.2)
    plan = allocate([dear, cheap], budget_s=45.0, generations_left=4)
    assert plan["A"].generations == 0 and plan["A"].reason
    assert plan["B"].generations == 4 and plan["B"].share_s == pytest.approx(0.8) and not plan["B"].reason


def test_the_budget_is_optional_and_checked():
    base = read_yaml(Path(__file__).parents[1] / "config" / "config.yaml")
    assert "budget" not in base  # the demo runs without one
    assert validate_config(base, "c.yaml")["budget"] is None
    assert validate_config({**base, "budget": {"hours": 7.5}}, "c.yaml")["budget"] == {
        "hours": 7.5,
        "sweep": 0,
    }
    assert validate_config({**base, "budget": {"hours": 1, "sweep": 900}}, "c.yaml")["budget"]["sweep"] == 900
    for bad in ({"hours": 0}, {"hours": -1}, {}, {"hours": 8, "minutes": 3}, {"hours": 8, "sweep": -1}):
        with pytest.raises(ConfigError, match="budget"):
            validate_config({**base, "budget": bad}, "c.yaml")


def test_oto_plan_shows_the_first_share_from_the_deck():
    from oto.run.estimate import GpuJob, RunEstimate, budget_lines

    est = RunEstimate("gfx90c", ["Big", "Small"], 4, {})
    for lib, launches in (("Big", 1e6), ("Small", 1e3)):  # 100 µs launches: 100 s and 0.1 s a generation
        est.gpu_jobs.append(GpuJob("benchmark", lib, 0, 10, 8, 80, launches, launches, 2, 100.0))
    est.workload_seconds = {"Big": 3.0, "Small": 1.0}
    lines = budget_lines(est, hours=250 / 3600)  # gen0 takes 100.1 s; 150 s left, 3/4 of it Big's
    big, small = (next(x for x in lines if x.strip().startswith(n)) for n in ("Big", "Small"))
    assert "2 of 4 generations at ~1 min 40 s each" in big and "starved" not in big
    assert "4 of 4 generations at ~0.1 s each" in small
    lines = budget_lines(est, hours=150 / 3600)  # 50 s left: Big's 3/4 pays for no generation
    assert "1 of 4 generations" in next(x for x in lines if x.strip().startswith("Big"))
    assert "(starved after gen0)" in next(x for x in lines if x.strip().startswith("Big"))
    assert not any("sweep" in x for x in lines)
    swept = budget_lines(est, hours=150 / 3600, sweep=900)  # the sweep's builds are outside the budget
    assert "up to 900 fork-lattice kernels" in swept[-1] and "built too, outside the budget" in swept[-1]


def test_oto_plan_says_what_a_budget_of_kernel_time_is_in_a_nights_hours():
    """The budget counts samples.csv's kernel time; on the real GPU a generation also builds its kernels and
    starts Tensile. oto plan says by how much the night exceeds the budget, from the target's costs."""
    from oto.backends.base import Costs
    from oto.run.estimate import GpuJob, RunEstimate, report

    est = RunEstimate("gfx90c", ["Big"], 2, {"benchmark": 2})
    for gen in (0, 1):  # 1,000 launches of 100 µs: 0.1 s of kernel time a generation; 10 kernels built
        est.gpu_jobs.append(GpuJob("benchmark", "Big", gen, 10, 8, 80, 1e3, 1e3, 1, 100.0))
    target = Costs(startup_s=5.0, build_s_per_kernel=2.0, launch_overhead_us=100.0, source="test")
    text = report(est, "sim", "simulated", target, target, 0.5, "test", budget_hours=1.0)
    # per generation: measuring 5 + 1000 × (100 + 100) µs = 5.2 s, building 5 + 10 × 2 = 25 s; kernel 0.1 s
    assert "night ~302.0× the kernel time" in text
    assert "budget.hours" in text.splitlines()[-2]


def test_a_sweep_is_set_aside_first_for_the_most_gain_and_only_what_the_time_left_pays_for():
    """config budget.sweep: the fork-lattice kernels each library with a gap adds, once, when it has had the
    generations equal generations would give it (or at its last), at its GPU time per kernel so far, the
    most expected gain first, their time set aside at every decision before; the shares come out of what is
    left, so the two together never exceed the time left. A library with nothing to gain, no kernel
    measured yet, or one that has swept, sweeps nothing."""
    big = LibraryState("A", 1, 100.0, 0.5, 10.0, 5.0, True, 2, kernels_measured=20)  # 0.5 s a kernel
    small = LibraryState("B", 1, 1.0, 0.5, 10.0, 5.0, True, 2, kernels_measured=100)  # 0.1 s a kernel
    idle = LibraryState("C", 1, 0.0, 0.5, 10.0, 5.0, True, 2, kernels_measured=10)  # no workload calls
    states = [big, small, idle]
    # 330 s left of 360: equal generations would give each library 360 / 15 = 24 generations, so none is due
    # yet; the guarantee keeps A and B 3 generations of 5 s (30 s): 300 s set aside for the sweeps
    plan = allocate(states, budget_s=30.0 + 330.0, generations_left=3, sweep=500)
    assert [(plan[x].sweep, plan[x].sweep_s) for x in "AB"] == [
        (0, pytest.approx(250.0)),
        (0, pytest.approx(50.0)),
    ]
    assert (plan["C"].sweep_s, plan["C"].share_s) == (0.0, 0.0)
    assert (plan["A"].share_s, plan["B"].share_s) == (pytest.approx(15.0), pytest.approx(15.0))
    assert sum(a.share_s + a.sweep_s for a in plan.values()) == pytest.approx(330.0)
    assert plan["A"].generations == plan["B"].generations == 3  # the search runs as it would without
    last = allocate(states, budget_s=30.0 + 110.0, generations_left=1, sweep=500)  # 100 s for the sweeps
    assert (last["A"].sweep, last["A"].sweep_s) == (200, pytest.approx(100.0))  # A's 200 kernels take it all
    assert (last["B"].sweep, last["C"].sweep) == (0, 0)
    assert last["A"].generations == last["B"].generations == 1  # the guarantee stands
    # C is dear (150 s a generation), A and B cheap and 4 generations in: equal generations give each
    # 330 / 155 = 2, which A and B are past: due now, though 4 generations are left. The 10 s left pay for
    # 20 of A's kernels, none of B's; once A has swept, B's 100 (10 s) fit
    ahead = [dataclasses.replace(x, spent_s=10.0, measured_generations=4) for x in (big, small)]
    dear = dataclasses.replace(idle, spent_s=300.0, last_generation_s=150.0)
    due = allocate([*ahead, dear], budget_s=330.0, generations_left=4, sweep=100)
    assert (due["A"].sweep, due["A"].sweep_s, due["B"].sweep) == (20, pytest.approx(10.0), 0)
    assert due["A"].generations == 0 and not due["A"].reason  # it runs: the sweep pays for its generation
    after = allocate([*ahead, dear], budget_s=330.0, generations_left=4, sweep=100, swept={"A"})
    assert (after["A"].sweep, after["A"].sweep_s, after["B"].sweep) == (0, 0.0, 100)
    level = [dataclasses.replace(x, measured_generations=2) for x in ahead]  # at equal's 2: not yet
    # a sweep's generation is spent, but not what the equal plan's generations cost on average
    swept = dataclasses.replace(big, spent_s=110.0, measured_generations=3, sweep_s=100.0)
    assert (swept.mean_generation_s, big.mean_generation_s) == (pytest.approx(5.0), pytest.approx(5.0))
    assert allocate([*level, dear], budget_s=330.0, generations_left=4, sweep=100)["A"].sweep == 0
    assert allocate(states, budget_s=360.0, generations_left=1)["A"].sweep == 0  # no sweep configured
    unknown = LibraryState("D", 0, 50.0, 0.5, 0.0, 0.0, True, 0)  # nothing measured: no cost to go by
    assert allocate([unknown], budget_s=100.0, generations_left=1, sweep=10)["D"].sweep == 0


def test_a_library_sweeps_once_and_mutate_adds_the_lattice_points_not_measured(tmp_path):
    from oto.agent.proposals import lattice_proposals
    from oto.gemm import Library
    from oto.hardware.profile import load_profile
    from oto.measurement.budget_file import sweep_count
    from oto.search.lattice import fork_lattice
    from oto.search.strategies import Evidence
    from oto.search.tensile_space import tensile_space
    from oto.tensile import legality

    libs = ["Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_DB"]
    for name in libs:
        _library(tmp_path, name, [10.0, 100.0], [10.0, 10.0], [1.0, 1.5], [30.0, 30.0])
        sel = read_yaml(tmp_path / name / "gen1" / "selection.yaml")
        write_yaml(
            tmp_path / name / "gen1" / "selection.yaml", {**sel, "measured": [f"k{i}" for i in range(60)]}
        )
    hours = (120.0 + 1000.0) / 3600  # 1000 s left; 1 s a kernel; equal generations would give 18 each
    early = generation_budget(_budget(tmp_path, libs, 2, hours), 2, 6, sweep=40)
    assert [early["allocations"][lib]["sweep"] for lib in libs] == [0, 0]  # gen2 of 6: not yet
    assert [early["allocations"][lib]["sweep_s"] for lib in libs] == [pytest.approx(40.0)] * 2  # set aside
    assert early["swept"] == []
    last = generation_budget(_budget(tmp_path, libs, 2, hours), 2, 3, sweep=40)  # gen2 of 3: the last
    write_yaml(tmp_path / "budget" / "gen2.yaml", last)
    budget = read_budget(tmp_path / "budget" / "gen2.yaml", 2, libs)  # the file's schema holds the new fields
    assert [sweep_count(budget, lib) for lib in libs] == [40, 40] and budget["swept"] == sorted(libs)
    assert sweep_count({"allocations": {libs[0]: {"decision": "starved", "sweep": 9}}}, libs[0]) == 0
    # the next decision reads this one: a library that has swept does not again, nor has time set aside
    for name in libs:
        (tmp_path / name / "gen2").mkdir()
        (tmp_path / name / "gen2" / "samples.csv").write_text("seq,time_us,status\n0,70000000,ok\n")
        sel = selection(name, 2, [10.0, 100.0], [10.0, 10.0], [1.0, 1.5, 2.0])
        write_yaml(
            tmp_path / name / "gen2" / "selection.yaml", {**sel, "measured": [f"k{i}" for i in range(99)]}
        )
    after = dataclasses.replace(_budget(tmp_path, libs, 3, hours), previous=tmp_path / "budget" / "gen2.yaml")
    doc = generation_budget(after, 3, 4, sweep=40)
    assert [(doc["allocations"][lib]["sweep"], doc["allocations"][lib]["sweep_s"]) for lib in libs] == [
        (0, 0.0)
    ] * 2
    assert doc["swept"] == sorted(libs)
    assert last["swept_at"] == doc["swept_at"] == dict.fromkeys(libs, 2)
    # the sweep's 70 s are spent, but the next generation is priced at what the search's generations cost
    # (30 s): at the sweep's, a sweep of a thousand kernels would starve the library right after it
    for lib in libs:
        entry = doc["allocations"][lib]
        assert (entry["spent_s"], entry["last_generation_s"]) == (pytest.approx(130.0), pytest.approx(30.0))
        assert entry["measured_generations"] == 3
    bad = {**last, "swept": ["Cijk_Ailk_Bljk_SB"]}
    write_yaml(tmp_path / "budget" / "gen2.yaml", bad)
    with pytest.raises(StageFileError, match="field 'swept': not this run's libraries"):
        generation_budget(after, 3, 4, sweep=40)
    write_yaml(tmp_path / "budget" / "gen2.yaml", {**last, "swept": [libs[0]]})
    with pytest.raises(StageFileError, match=f"field 'swept_at': {libs[1]} not in 'swept'"):
        generation_budget(after, 3, 4, sweep=40)

    profile = load_profile(Path(__file__).parents[1] / "arch_profiles" / "gfx90c.yaml")
    library, limits = Library.parse(libs[0]), legality.Limits.from_profile(profile)
    lattice = fork_lattice(library, limits)
    assert len(lattice) > 100 and all(legality.check(library, p, limits).valid for p in lattice)
    assert all(p["VectorWidth"] <= 2 for p in lattice)  # 8-byte elements: at most 16 bytes a load
    space = tensile_space(library, limits)
    measured = frozenset({space.id_of(lattice[0]), space.id_of(lattice[2])})
    evidence = Evidence(space=space, generation=1, observations=[], seeds=[], seen=measured)
    taken = [{"params": lattice[3]}]
    out = lattice_proposals(libs[0], evidence, profile, 4, taken)
    assert [p["params"] for p in out] == [lattice[1], lattice[4], lattice[5], lattice[6]]
    assert {p["proposer"] for p in out} == {"sweep"}
    assert lattice_proposals(libs[0], evidence, profile, 0, taken) == []


@pytest.mark.slow
def test_a_budgeted_run_sweeps_the_lattice_once_and_measures_it(tmp_path):
    """The real workflow with budget.sweep: the sweep's time is set aside at gen1, the last generation (the
    equal generations the hour pays for are far more) adds the lattice points not measured, candidates.yaml
    takes them like any proposal, and the decision says who has swept."""
    from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

    config = {**FAST_CONFIG, "max_generations": 3, "budget": {"hours": 1.0, "sweep": 20}}
    work = make_workdir(tmp_path, config)
    libs = ["Cijk_Ailk_Bjlk_DB", "Cijk_Ailk_Bljk_DB"]
    proc = snakemake(work, "--cores", "2", *(f"results/gfx90c/{lib}/gen2/selection.yaml" for lib in libs))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = work / "results" / "gfx90c"
    first, last = (read_yaml(res / "budget" / f"gen{g}.yaml") for g in (1, 2))
    assert first["swept"] == [] and all(first["allocations"][lib]["sweep_s"] > 0 for lib in libs)
    assert last["swept"] == libs and all(last["allocations"][lib]["sweep"] == 20 for lib in libs)
    for lib in libs:
        assert not [
            p
            for p in read_yaml(res / lib / "gen1" / "proposals.yaml")["proposals"]
            if p["proposer"] == "sweep"
        ]
        swept = [
            p
            for p in read_yaml(res / lib / "gen2" / "proposals.yaml")["proposals"]
            if p["proposer"] == "sweep"
        ]
        assert len(swept) == 20
        measured = set(read_yaml(res / lib / "gen1" / "selection.yaml")["measured"])
        kernels = read_yaml(res / lib / "gen2" / "candidates.yaml")["kernels"]
        taken = {k["id"] for k in kernels if k["proposer"] == "sweep" and "candidate" in k["roles"]}
        assert len(taken) == 20 and not taken & measured  # new kernels, measured now


def test_a_sweep_generation_races_on_where_the_workload_calls(tmp_path, monkeypatch):
    """A generation with lattice points races with the workload's calls per tuning size (its deck_indices
    into the deck), so the sizes the workload calls race their leaders on as finalize's race does; other
    generations, and decks without a workload, race as before (no workload)."""
    from oto.measurement.benchmarking import sweep_workload
    from oto.measurement.racing import RaceResult
    from oto.search.lattice import SWEEP_PROPOSER
    from oto.stages import benchmark

    sizes = [[64, 64, 1, 64], [128, 128, 1, 128], [256, 256, 1, 256]]
    deck = LibraryDeck(
        name="Cijk_Ailk_Bljk_DB", family="DB", pattern="NN", problem_type={}, logic={}, solutions=[],
        sizes=sizes, shipped=[None] * 3, calls=[0, 7, 3],
    )  # fmt: skip
    kernel = {"params": {"MacroTile0": 64}, "roles": ["candidate"]}
    cands = {
        "library": deck.name, "generation": 4, "sizes": [sizes[2], sizes[0]], "deck_indices": [2, 0],
        "reference": {}, "kernels": [{"id": "a", "proposer": "surrogate", **kernel}],
    }  # fmt: skip
    assert sweep_workload(cands, deck) is None
    cands["kernels"].append({"id": "b", "proposer": SWEEP_PROPOSER, **kernel})
    assert sweep_workload(cands, deck) == {0: 3.0, 1: 0.0}
    assert sweep_workload(cands, dataclasses.replace(deck, calls=None)) is None

    # The benchmark stage hands it to the race.
    write_library_yaml(deck, tmp_path / "deck.yaml", {})
    write_yaml(tmp_path / "candidates.yaml", cands)
    write_yaml(tmp_path / "build.yaml", {"kernels": [{"id": k, "status": "ok"} for k in "ab"]})
    seen = []

    def race_library(*args, workload=None, **kwargs):
        seen.append(args[-1] if len(args) == 12 else workload)
        return RaceResult(pd.DataFrame({"seq": []}), pd.DataFrame(), {}, 0, 0)

    class Backend:
        numbers = "simulated"

    monkeypatch.setattr(benchmark, "race_library", race_library)
    monkeypatch.setattr(benchmark, "resolve", lambda *a: Backend())
    paths = [tmp_path / f for f in ("candidates.yaml", "build.yaml", "deck.yaml")]
    benchmark.run(*paths, {}, {}, tmp_path / "w", tmp_path / "r", tmp_path / "samples.csv")
    assert seen == [{0: 3.0, 1: 0.0}]
