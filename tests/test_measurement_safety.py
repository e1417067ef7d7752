"""Timings checked against physics, an implausible reference failing its batch loudly, and measurements that
outlive the jobs that took them (kept per experiment, reused instead of re-measured)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from oto.backends.base import Capabilities, Kernel, Problem, Sample, Size
from oto.config import validate_config
from oto.files import write_yaml
from oto.gemm import Library
from oto.hardware.profile import load_profile
from oto.measurement.benchmarking import run_race
from oto.measurement.samples import read_samples
from oto.measurement.scoring import (
    MAX_LAUNCH_US,
    ImplausibleReference,
    flag_bad_timings,
    score_library,
)
from oto.stages import normalise
from test_scoring import _samples

REPO = Path(__file__).resolve().parents[1]
PROFILE = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
LIBRARY = Library.parse("Cijk_Ailk_Bljk_SB")
SIZES = [Size(64, 64, 1, 64), Size(128, 128, 1, 128)]
CONFIG = validate_config({"arch": "gfx90c", "families": ["SB"], "backend": "sim", "seed": 5})


class StubBackend:
    """A backend whose kernels take fixed times (µs per kernel), counting every launch it is asked for."""

    name, numbers = "stub", "simulated"
    PROFILE_FIELDS = ("clock_mhz",)
    launch_timeout_us = 5e6
    capabilities = Capabilities("plan", "none", None)

    def __init__(self, times: dict[str, float]):
        self.times = times
        self.launches = 0

    def provenance(self):
        return {"backend": self.name, "numbers": self.numbers}

    def measure(self, problem, plan, workdir):
        self.launches += len(plan.launches)
        return [
            Sample(
                i,
                la.kernel_id,
                la.role,
                la.size_index,
                la.rep,
                self.times[la.kernel_id] * (1 + 0.001 * i),
                "ok",
            )
            for i, la in enumerate(plan.launches)
        ]


def race(backend, tmp_path: Path, archive: Path | None = None, config=CONFIG):
    kernels = {k: Kernel(k, {"DepthU": i}) for i, k in enumerate(["ka", "kb", "ref"])}
    sizes = [s.as_list() for s in SIZES]
    return run_race(
        backend,
        Problem(LIBRARY, PROFILE, {}),
        kernels,
        SIZES,
        {0: ["ka", "kb"], 1: ["ka", "kb"]},
        {0: "ref", 1: "ref"},
        lambda df, only: score_library(df, LIBRARY, sizes, PROFILE, config, only, 100),
        config,
        tmp_path / "work",
        "5:test:gen0",
        archive=archive,
    )


# ---- timings against physics ----------------------------------------------------------------------


def test_a_time_slower_than_any_launch_can_take_is_a_bad_timing_with_its_reason():
    df, _ = _samples(0.0)
    df.loc[[3, 4], "time_us"] = [1e30, MAX_LAUNCH_US * 2]
    flagged = flag_bad_timings(df, np.full(len(df), 1e6), peak_gflops=1e6)
    assert (flagged.loc[[3, 4], "status"] == "bad_timing").all()
    assert "1e+30 us is longer than any launch can take" in flagged.at[3, "reason"]
    assert (flagged.drop(index=[3, 4])["status"] == "ok").all()
    # A tighter bound (the backend's) applies the same way.
    tight = flag_bad_timings(df, np.full(len(df), 1e6), peak_gflops=1e6, max_time_us=110.0)
    assert (tight.loc[tight["time_us"] > 110, "status"] == "bad_timing").all()


def test_the_benchmark_flags_times_past_the_backends_launch_timeout(tmp_path):
    backend = StubBackend({"ka": 80.0, "kb": 7e6, "ref": 100.0})  # kb: past the 5e6 us timeout
    result = race(backend, tmp_path)
    kb = result.samples[result.samples["kernel_id"] == "kb"]
    assert (kb["status"] == "bad_timing").all()
    assert "longer than the backend's launch timeout 5e+06 us" in kb["reason"].iloc[0]
    scores = result.scores.set_index(["kernel_id", "size_index"])
    assert scores.loc[("kb", 0), "status"] != "ok" or math.isnan(scores.loc[("kb", 0), "score"])
    assert scores.loc[("ka", 0), "score"] == pytest.approx(1.25, rel=0.02)  # never scored against 7e6


def test_a_reference_at_1e30_fails_its_batch_loudly_and_keeps_the_samples(tmp_path):
    backend = StubBackend({"ka": 80.0, "kb": 90.0, "ref": 1e30})
    archive = tmp_path / "measurements" / "lib" / "gen0"
    with pytest.raises(ImplausibleReference) as err:
        race(backend, tmp_path, archive)
    msg = str(err.value)
    assert "Cijk_Ailk_Bljk_SB: the reference (shipped kernel ref) at size 0 [64, 64, 1, 64]" in msg
    assert "implausible timing(s)" in msg and "longer than the backend's launch timeout" in msg
    kept = next(archive.glob("*.implausible.csv"))
    assert f"kept in {kept}" in msg
    assert len(read_samples(kept)) == backend.launches  # nothing measured is lost


def test_normalise_refuses_a_samples_file_whose_reference_is_implausible(tmp_path):
    df, _ = _samples(0.0)
    df["kernel_id"] = df["kernel_id"].replace({"a": "ka", "b": "kb", "c": "kc"})
    df.loc[df["role"] == "reference", "time_us"] = 1e30  # every reference row, as in the field report
    samples, cands = tmp_path / "samples.csv", tmp_path / "candidates.yaml"
    df.to_csv(samples, index=False)
    write_yaml(cands, {"library": LIBRARY.name, "generation": 0, "sizes": [s.as_list() for s in SIZES]})
    out = tmp_path / "scores.csv"
    with pytest.raises(ImplausibleReference, match=rf"{samples}: .*reference \(shipped kernel ref\)"):
        normalise.run(samples, cands, PROFILE, CONFIG, out)
    assert not out.exists()  # never scored, so never selected or shipped


def test_scoring_bounds_times_by_the_backends_launch_timeout_not_an_hour():
    """A reference at 1e8 us is above the simulated GPU's launch timeout (sim.timeout_us, 5e6 us) though
    below the one-hour cap: scoring flags it in the run as the benchmark stage would have (it once changed
    what shipped, 1.32x against 2.01x), whoever edited the samples after the benchmark."""
    from oto.measurement.scoring import launch_timeout_us

    assert launch_timeout_us(CONFIG, ["simulated"]) == 5e6
    measured = validate_config({**CONFIG, "backend": "tensile", "tensile": {"timeout_s": 60}})
    assert launch_timeout_us(measured, ["measured"]) == 60e6
    assert launch_timeout_us(CONFIG, ["simulated", "measured"]) == min(5e6, 1800e6)
    assert (
        launch_timeout_us(CONFIG, ["replayed"]) == MAX_LAUNCH_US
        and launch_timeout_us({}, []) == MAX_LAUNCH_US
    )
    df, _ = _samples(0.0)
    ref0 = df.index[(df["role"] == "reference") & (df["size_index"] == 0)]
    df.loc[ref0[:2], "time_us"] = 1e8
    sizes = [s.as_list() for s in SIZES]
    scores = score_library(df, LIBRARY, sizes, PROFILE, CONFIG)
    ref = scores[(scores["kernel_id"] == "ref") & (scores["size_index"] == 0)].iloc[0]
    assert ref["excluded"] == 2 and "longer than the backend's launch timeout (5e+06 us)" in ref["reason"]
    df.loc[df["role"] == "reference", "time_us"] = 1e8  # every reference: the batch fails loudly
    with pytest.raises(ImplausibleReference, match="the backend's launch timeout"):
        score_library(df, LIBRARY, sizes, PROFILE, CONFIG)
    looser = validate_config({**CONFIG, "sim": {"timeout_us": 1e9}})
    assert score_library(df, LIBRARY, sizes, PROFILE, looser)["status"].eq("ok").all()


def test_a_few_bad_reference_timings_are_excluded_not_fatal():
    df, _ = _samples(0.0)
    ref0 = df.index[(df["role"] == "reference") & (df["size_index"] == 0)]
    df.loc[ref0[:2], "time_us"] = 1e30
    sizes = [s.as_list() for s in SIZES]
    scores = score_library(df, LIBRARY, sizes, PROFILE, CONFIG)
    ref = scores[(scores["kernel_id"] == "ref") & (scores["size_index"] == 0)].iloc[0]
    assert ref["excluded"] == 2 and ref["status"] == "ok"


# ---- measurements kept per experiment -------------------------------------------------------------


def test_a_rerun_of_the_same_experiment_reuses_its_measurements(tmp_path):
    archive = tmp_path / "measurements" / "lib" / "gen0"
    first = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    taken = race(first, tmp_path, archive)
    assert first.launches > 0 and len(list(archive.glob("*.csv"))) == 1
    again = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    reused = race(again, tmp_path, archive)
    assert again.launches == 0  # nothing re-measured
    assert "none re-measured" in reused.log[0]
    pd.testing.assert_frame_equal(reused.samples, read_samples(next(archive.glob("*.csv"))))
    assert reused.samples["time_us"].tolist() == pytest.approx(taken.samples["time_us"].tolist())
    assert {d.leader for d in reused.decisions.values()} == {"ka"}


class NoisyBackend(StubBackend):
    """Each launch ±10% (lognormal, seeded by the plan's length): intervals wide enough to stay open."""

    def measure(self, problem, plan, workdir):
        rng = np.random.default_rng(len(plan.launches))
        return [
            dataclasses.replace(s, time_us=s.time_us * rng.lognormal(0, 0.1))
            for s in super().measure(problem, plan, workdir)
        ]


@pytest.mark.parametrize("racing", [True, False])
def test_a_size_left_open_is_labelled_by_what_stopped_it_reused_or_not(tmp_path, racing):
    """docs/architecture.md: race is budget (the racing budget) for a raced size left open, fixed without
    racing; a rerun reusing the kept samples says the same as the run that measured them."""
    config = validate_config({**CONFIG, "benchmark": {"racing": {"enabled": racing}, "repetitions": 3}})
    archive = tmp_path / "measurements" / "lib" / "gen0"
    backend = NoisyBackend({"ka": 100.0, "kb": 104.0, "ref": 120.0})
    taken = race(backend, tmp_path, archive, config=config)
    reused = race(NoisyBackend(backend.times), tmp_path, archive, config=config)
    assert "none re-measured" in reused.log[0]
    want = "budget" if racing else "fixed"
    assert [d.stop for d in taken.decisions.values()] == [want, want]
    assert [d.stop for d in reused.decisions.values()] == [want, want]


def test_a_rerun_says_how_the_race_it_reuses_ended_there(tmp_path):
    """A size's stop reason is how the race there ended, which the final scores need not repeat (the budget
    stopped it, its final scores separate it): a job run again on the kept samples said "separated" where the
    first run said "budget" (the gfx1035 demo, finalize after -R mutate). The race's own reasons are kept
    beside its samples and a rerun says them."""
    import json

    from oto.measurement.benchmarking import stops_path

    archive = tmp_path / "measurements" / "lib" / "gen0"
    backend = NoisyBackend({"ka": 100.0, "kb": 104.0, "ref": 120.0})
    taken = race(backend, tmp_path, archive, config=validate_config({**CONFIG}))
    (kept,) = archive.glob("*.csv")
    record = json.loads(stops_path(kept).read_text())
    assert record == {
        "launches": len(taken.samples),
        "stops": {str(i): d.stop for i, d in taken.decisions.items()},
    }
    record["stops"]["0"] = "separated"  # as if the race had stopped size 0 separated in an early round
    stops_path(kept).write_text(json.dumps(record))
    reused = race(NoisyBackend(backend.times), tmp_path, archive, config=validate_config({**CONFIG}))
    assert "none re-measured" in reused.log[0] and reused.decisions[0].stop == "separated"
    assert reused.decisions[1].stop == taken.decisions[1].stop


def test_another_experiment_or_reuse_off_measures_again(tmp_path):
    archive = tmp_path / "measurements" / "lib" / "gen0"
    race(StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0}), tmp_path, archive)
    other = {**PROFILE, "clock_mhz": 1700}  # a figure the backend reads: another experiment
    backend = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    sizes = [s.as_list() for s in SIZES]
    kernels = {k: Kernel(k, {"DepthU": i}) for i, k in enumerate(["ka", "kb", "ref"])}
    run_race(
        backend, Problem(LIBRARY, other, {}), kernels, SIZES,
        {0: ["ka", "kb"], 1: ["ka", "kb"]}, {0: "ref", 1: "ref"},
        lambda df, only: score_library(df, LIBRARY, sizes, PROFILE, CONFIG, only, 100),
        CONFIG, tmp_path / "work", "5:test:gen0", archive=archive,
    )  # fmt: skip
    assert backend.launches > 0 and len(list(archive.glob("*.csv"))) == 2
    off = validate_config({**CONFIG, "benchmark": {**CONFIG["benchmark"], "reuse_measurements": False}})
    again = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    race(again, tmp_path, archive, config=off)
    assert again.launches > 0


def test_a_kept_file_cut_at_a_lines_end_is_not_reused(tmp_path):
    """A kept race cut at a line boundary reads as a samples file; reused, it was half the race, said as
    "none re-measured", and moved the library's figures. The race's launch count is kept beside it."""
    archive = tmp_path / "measurements" / "lib" / "gen0"
    race(StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0}), tmp_path, archive)
    kept = next(archive.glob("*.csv"))
    lines = kept.read_text().splitlines(keepends=True)
    kept.write_text("".join(lines[: len(lines) // 2]))
    backend = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    again = race(backend, tmp_path, archive)
    assert backend.launches > 0 and list(archive.glob("*.unreadable-*"))
    assert "none re-measured" not in " ".join(again.log)


def test_an_unreadable_kept_file_is_moved_aside_and_measured_again(tmp_path):
    archive = tmp_path / "measurements" / "lib" / "gen0"
    race(StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0}), tmp_path, archive)
    kept = next(archive.glob("*.csv"))
    kept.write_text("seq,kernel_id\nnot,a samples file\n")
    backend = StubBackend({"ka": 80.0, "kb": 120.0, "ref": 100.0})
    race(backend, tmp_path, archive)
    assert backend.launches > 0 and list(archive.glob("*.unreadable-*"))
    assert len(read_samples(kept)) == backend.launches  # the fresh measurement is kept in its place
