"""The probe behind a run's first time estimate (oto.run.probe): the CPU a job's start-up costs here and the
contention it meets, from the probe's own runs and the load average. No timing: the runs and the load are
given."""

from __future__ import annotations

import json
import time

import pytest
from oto.run.estimate import JOB_PROBE_RATIO, fmt_duration
from oto.run.probe import (
    UNSURE_SPREAD,
    Probe,
    job_probe,
    job_start_seconds,
    load_contention,
    measure,
    read_cached,
)
from oto.run.progress import RunProgress


def test_load_contention_counts_the_job_as_one_more_runnable_process():
    assert load_contention(0.0, 2) == 1.0  # a free core: the job has it to itself
    assert load_contention(1.0, 2) == 1.0  # one busy process on two cores: still a free core
    assert load_contention(3.0, 2) == 2.0  # three busy + the job on two cores: half a core each
    assert load_contention(5.0, 0) == 6.0  # no core count: taken as one


def test_a_jobs_start_up_is_its_cpu_times_the_contention_the_probe_met():
    assert job_start_seconds(0.5, 1.0) == pytest.approx(0.5)  # an idle machine: a whole core
    assert job_start_seconds(0.5, 3.0) == pytest.approx(1.5)  # a third of a core: three times the wall


def test_measure_takes_the_median_run_and_the_load_when_it_starts():
    runs = iter([(0.9, 0.5), (1.6, 0.4), (1.2, 0.6)])  # (wall, CPU): the first run's cold cache, ...
    probe = measure(run=lambda: next(runs), runs=3, budget_s=10.0, load=lambda: (3.0, 2))
    assert probe.runs == [0.9, 1.6, 1.2] and probe.cpu == [0.5, 0.4, 0.6]
    assert probe.cpu_seconds == 0.5 and probe.measured_contention == pytest.approx(2.0)  # medians
    assert (probe.load, probe.cores) == (3.0, 2)
    assert probe.seconds == pytest.approx(1.0)  # 0.5 s of CPU at half a core (the load average: its range)
    assert "0.50 s of CPU" in probe.describe() and "load 3.0 on 2 cores" in probe.describe()
    # A wall time below the CPU time (threads on two cores) is no contention below 1.
    fast = measure(run=lambda: (0.3, 0.5), runs=2, budget_s=10.0, load=lambda: (0.0, 2))
    assert fast.measured_contention == 1.0 and fast.seconds == pytest.approx(0.5)


def test_the_probe_is_unsure_where_its_own_figure_and_the_load_average_disagree():
    agree = Probe(1.0, [1.0, 1.0], 0.0, cpu=[0.5, 0.5], load=3.0, cores=2)  # wall / CPU 2, load says 2
    assert not agree.unsure and agree.span() == pytest.approx((1.0, 1.0))
    # A load that has just started: the probe felt it (wall / CPU 3), the 1-minute average not yet (1).
    fresh = Probe(1.5, [1.5, 1.5], 0.0, cpu=[0.5, 0.5], load=0.5, cores=2)
    assert UNSURE_SPREAD < 3.0 and fresh.unsure
    assert fresh.span() == pytest.approx((0.5, 1.5))
    # Without CPU figures (a probe file of an older oto): the wall seconds alone, never unsure.
    old = Probe(0.4, [0.4], 0.0)
    assert old.cpu_seconds == 0.4 and old.measured_contention == 1.0 and not old.unsure


def test_an_unsure_probe_gives_the_range_beside_the_central_figure():
    probe = Probe(1.5, [1.5, 1.5], time.time(), cpu=[0.5, 0.5], load=0.5, cores=2)
    est = {"backend": "sim", "numbers": "simulated", "gpu_seconds": {"benchmark": {"L/gen0": 4.0}}}
    p = RunProgress(
        planned={"mutate": 100, "benchmark": 1},
        estimate=est,
        job_seconds=probe.seconds * JOB_PROBE_RATIO,
        job_seconds_note=probe.describe(),
        job_seconds_range=tuple(s * JOB_PROBE_RATIO for s in probe.span()),
    )
    central, low, high = (101 * s * JOB_PROBE_RATIO + 4.0 for s in (1.5, 0.5, 1.5))
    opening = p.opening()
    assert f"about {fmt_duration(central)} (between {fmt_duration(low)} and {fmt_duration(high)}; " in opening
    assert p.time_left(0.0) == pytest.approx(central)  # the central figure is what the run counts on
    sure = RunProgress(planned=p.planned, estimate=est, job_seconds=probe.seconds * JOB_PROBE_RATIO)
    assert "between" not in sure.opening()


def test_the_estimate_file_keeps_the_probes_parts(tmp_path):
    probe = measure(run=lambda: (1.0, 0.5), runs=2, budget_s=10.0, load=lambda: (4.0, 2))
    back = Probe.from_document(json.loads(json.dumps(probe.document())), probe.measured_at)
    assert back == probe
    # the probe file of an older oto (wall seconds only) still reads
    assert Probe.from_document({"seconds": 0.3, "runs": [0.3]}, 0.0).cpu == []
    path = tmp_path / "probe.json"
    assert job_probe(path, measure_probe=lambda: probe).seconds == probe.seconds
    cached = read_cached(path)
    assert cached.cached and cached.cpu == probe.cpu and cached.load == 4.0 and cached.cores == 2
