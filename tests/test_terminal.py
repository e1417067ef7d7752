"""What a run prints: one line per finished job with done/total and the time left, errors in full, a closing
summary; Snakemake's job blocks and shell commands go to the log (oto's logger plugin, profiles/default)."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
import yaml
from dashboard_helpers import CONFIG, make_results
from oto.reporting.dashboard import write_dashboard
from oto.reporting.summary import library_note, results_folders, run_summary
from oto.run.estimate import JOB_PROBE_RATIO, LEARNING_JOB_SECONDS, fmt_duration, job_overhead
from oto.run.probe import Probe, job_probe, machine_key, read_cached
from oto.run.progress import PRIOR_JOBS, RULE_PRIOR_JOBS, RunProgress, job_key, job_label
from snakemake_interface_logger_plugins.common import LogEvent
from workflow_helpers import FAST_CONFIG, make_workdir, plan_counts, snakemake

LINE = re.compile(r"^\s*(\d+)/(\d+)  (\w+)\s")


def test_time_left_uses_recorded_durations_and_the_backends_estimate():
    est = {"gpu_seconds": {"benchmark": {"L/gen0": 10.0, "L/gen1": 30.0, "M/gen0": 20.0, "M/gen1": 20.0}}}
    p = RunProgress(planned={"mutate": 4, "benchmark": 4}, recorded={"mutate": [2.0, 4.0]}, estimate=est)
    # Before any job: mutate from the earlier runs' record (3 s), benchmarks from the backend (80 s) plus
    # an overhead of the mean recorded job (3 s each).
    assert p.remaining_work() == pytest.approx(4 * 3.0 + 80.0 + 4 * 3.0)
    for key in ("L/gen0", "L/gen1"):
        p.finish("mutate", key, 1.0)
    p.finish("benchmark", "L/gen0", 19.0)  # a rule's first job is its slowest (cold caches): not counted
    p.finish("benchmark", "L/gen1", 32.0)  # 2 s beyond its estimate: that is the benchmark overhead
    # The mean job: this run's counted two (1 s, 2 s beyond the backend) drawn towards the recorded 3 s.
    mean = (1.0 + 2.0 + PRIOR_JOBS * 3.0) / (2 + PRIOR_JOBS)
    assert p.mean_job() == pytest.approx(mean)
    # A rule's jobs move its estimate by a part of their deviation: towards its record (mutate), else
    # towards the mean job (benchmark: a recorded benchmark holds the GPU's work too).
    assert p.expected("mutate") == pytest.approx((1.0 + RULE_PRIOR_JOBS * 3.0) / (1 + RULE_PRIOR_JOBS))
    assert p.expected("benchmark") == pytest.approx((2.0 + RULE_PRIOR_JOBS * mean) / (1 + RULE_PRIOR_JOBS))
    # Left: 2 mutate + 2 benchmarks × (their overhead + the mean of the unfinished estimates, 20 s).
    left = 2 * p.expected("mutate") + 2 * (p.expected("benchmark") + 20.0)
    assert p.remaining_work() == pytest.approx(left)
    # Wall time twice the summed job time (a slow scheduler): the pace, drawn towards 1 with the weight of
    # PRIOR_JOBS mean jobs, rises above 1 and the time left with it.
    weight = PRIOR_JOBS * p.mean_job()
    assert p.time_left(elapsed=106.0) == pytest.approx(left * (106.0 + weight) / (53.0 + weight))
    line = p.line("benchmark", "L gen1", 32.0, 106.0)
    assert LINE.match(line).groups() == ("4", "8", "benchmark") and "left" in line


def test_the_first_estimate_comes_from_this_machines_probe():
    """No timing here: the probe's figure is given. A new folder's first line is the planned jobs at the
    probe's figure × JOB_PROBE_RATIO each, plus the backend's own seconds for the GPU jobs."""
    est = {"backend": "sim", "numbers": "simulated", "gpu_seconds": {"benchmark": {"L/gen0": 4.0}}}
    probe = Probe(seconds=0.4, runs=[0.41, 0.39, 0.4], measured_at=0.0)
    p = RunProgress(
        planned={"mutate": 100, "benchmark": 1},
        estimate=est,
        job_seconds=probe.seconds * JOB_PROBE_RATIO,
        job_seconds_note=probe.describe(),
    )
    expected = 101 * 0.4 * JOB_PROBE_RATIO + 4.0
    assert p.time_left(0.0) == pytest.approx(expected)
    opening = p.opening()
    assert f"about {fmt_duration(expected)}" in opening and "0.40 s, measured just now" in opening
    assert "backend sim (simulated numbers)" in opening and "learning" not in opening
    # Twice the probe (a machine twice as slow, or as busy): twice the jobs' time, the backend's the same.
    slow = RunProgress(planned=p.planned, estimate=est, job_seconds=0.8 * JOB_PROBE_RATIO)
    assert slow.time_left(0.0) == pytest.approx(2 * (expected - 4.0) + 4.0)
    # oto plan takes the same figure where this folder has recorded no jobs.
    assert job_overhead({}, probe)[0] == pytest.approx(0.4 * JOB_PROBE_RATIO)
    assert job_overhead({"mutate": [2.0] * 10}, probe)[0] == 2.0


def test_without_a_probe_or_a_record_the_first_line_says_it_is_learning_and_gives_a_range():
    p = RunProgress(planned={"deck": 1, "mutate": 100})
    low, high = (101 * s for s in LEARNING_JOB_SECONDS)
    assert p.learning
    assert p.opening().endswith(
        f"learning this machine's pace from the first jobs: between {fmt_duration(low)} and "
        f"{fmt_duration(high)}"
    )
    assert not RunProgress(planned=p.planned, recorded={"mutate": [1.0]}).learning


def test_the_probe_is_cached_for_this_machine_python_and_oto(tmp_path, monkeypatch):
    path = tmp_path / ".snakemake" / "oto" / "probe.json"
    calls = []

    def fake() -> Probe:
        calls.append(1)
        return Probe(seconds=0.25, runs=[0.25], measured_at=time.time())

    first = job_probe(path, measure_probe=fake)
    assert first.seconds == 0.25 and not first.cached and len(calls) == 1
    again = job_probe(path, measure_probe=fake)  # young enough: read, not measured
    assert again.cached and again.seconds == 0.25 and len(calls) == 1 and "ago" in again.describe()
    assert job_probe(path, max_age_s=0, measure_probe=fake).cached is False and len(calls) == 2  # a run
    doc = json.loads(path.read_text())
    assert doc["key"] == machine_key()
    doc["key"]["python"] = "2.7.18"  # another Python (or machine, or oto version): measured again
    path.write_text(json.dumps(doc))
    assert read_cached(path) is None
    doc["key"], doc["measured_at"] = machine_key(), time.time() - 7200  # too old
    path.write_text(json.dumps(doc))
    assert read_cached(path) is None and read_cached(path, max_age_s=10_000) is not None

    def broken() -> Probe:
        raise OSError("no python")

    assert job_probe(tmp_path / "other.json", measure_probe=broken) is None


def test_the_probe_runs_within_its_budget():
    from oto.run.probe import measure

    idle = lambda: (None, 2)  # noqa: E731  (no load average: the probe's own wall / CPU alone)
    slow = measure(run=lambda: (0.5, 0.5), runs=3, budget_s=0.6, load=idle)  # a busy machine: two runs
    assert slow.runs == [0.5, 0.5] and slow.seconds == 0.5
    swamped = iter([(2.0, 0.5), (1.0, 0.5), (9.0, 0.5)])
    assert measure(run=lambda: next(swamped), runs=3, budget_s=0.6, load=idle).runs == [2.0, 1.0]  # two
    fast = measure(run=lambda: (0.1, 0.1), runs=3, budget_s=0.6, load=idle)
    assert fast.runs == [0.1, 0.1, 0.1]


def test_slow_early_jobs_move_the_time_left_by_a_part_of_their_deviation():
    """The early time-left lines swung ±40%: the first select, which draws the live dashboard, took 6 s and
    every select after it was then expected to take 6 s (31 × 4 s more at once)."""
    planned = {"deck": 1, "mutate": 32, "select": 32, "benchmark": 32}
    p = RunProgress(planned=planned, job_seconds=2.0)
    p.finish("deck", "", 5.0)  # a one-off, and the first of its rule: not counted
    p.finish("select", "L/gen0", 6.0)  # the first select: not counted either
    assert p.expected("select") == p.expected("mutate") == pytest.approx(2.0)
    before = p.time_left(elapsed=11.0)
    p.finish("select", "L/gen1", 6.0)  # a second slow one counts, drawn towards the mean job
    assert p.expected("select") < 2.5
    jump = p.time_left(elapsed=17.0) - (before - 2.0)  # less the select it expected (2 s)
    assert 0 < jump < 30 * (6.0 - 2.0) / 5  # a fifth of the jump it made before
    for i in range(2, 32):  # as the run goes on, its own jobs outweigh the prior
        p.finish("select", f"L/gen{i}", 6.0)
    assert p.expected("select") > 4.5


def test_a_rule_of_another_kind_is_expected_at_its_own_jobs_pace():
    """A gfx1103 run's first finalize took 5 min against a mean job of seconds, and the time left still
    counted 3 min for the three finalizes to come (the first job was dropped, the next ones drawn towards
    the mean job twelve to one)."""
    planned = {"mutate": 16, "select": 16, "finalize": 4}
    p = RunProgress(planned=planned, job_seconds=3.0)
    p.finish("finalize", "A", 300.0)  # alone and 100x the mean job: not a cold start
    assert p.expected("finalize") == pytest.approx(300.0)
    assert p.time_left(elapsed=300.0) > 3 * 300.0
    p.finish("finalize", "B", 600.0)  # from the second job on, the rule's later jobs
    assert p.expected("finalize") == pytest.approx(600.0)
    p.finish("select", "L/gen0", 6.0)  # a cold first select (2x) still counts for nothing
    assert p.expected("select") == pytest.approx(p.expected("mutate"))


def test_a_resumed_run_says_what_it_resumes():
    planned = {"mutate": 24, "emit": 24, "compile": 24, "benchmark": 24, "normalise": 24, "select": 24}
    planned.update(finalize=8, logic=1)
    p = RunProgress(planned=planned, recorded={"mutate": [1.0] * 8}, resumed=(61, 214))
    assert p.total == 153
    assert p.opening().startswith(
        "oto: resuming: 61 of 214 jobs already done in this folder; 153 left (mutate 24, emit 24,"
    )
    assert "by the job durations recorded in this folder" in p.opening()
    fresh = RunProgress(planned=planned, resumed=(0, 153), job_seconds=1.0)
    assert fresh.opening().startswith("oto: 153 jobs to run (") and "resuming" not in fresh.opening()


def test_recorded_durations_are_this_archs_when_the_run_names_its_arch(tmp_path, monkeypatch):
    """A folder that ran gfx90c's demo (532 deck sizes) gives a gfx1103 run (4,096) no prior: its
    library-wide jobs ran on another deck. Snakemake names a record after its output, urlsafe base64."""
    import base64

    from oto.run.estimate import recorded_durations
    from snakemake_logger_plugin_oto import _set_prior

    def record(output: str, rule: str, start: float, seconds: float) -> None:
        name = base64.urlsafe_b64encode(output.encode()).decode()
        meta = {"rule": rule, "job_hash": hash(output), "starttime": start, "endtime": start + seconds}
        (tmp_path / name).write_text(json.dumps(meta))

    record("results/gfx90c/Cijk_Ailk_Bljk_DB/final.yaml", "finalize", 0.0, 3.0)
    record("results/gfx90c/Cijk_Ailk_Bljk_DB/gen0/candidates.yaml", "mutate", 10.0, 1.0)
    record("results/gfx1103/Cijk_Ailk_Bljk_SB/final.yaml", "finalize", 20.0, 20.0)
    (tmp_path / "not-base64!").write_text("{}")
    assert recorded_durations(tmp_path) == {"finalize": [3.0, 20.0], "mutate": [1.0]}
    assert recorded_durations(tmp_path, arch="gfx1103") == {"finalize": [20.0]}
    assert recorded_durations(tmp_path, arch="gfx902") == {}

    p = RunProgress(planned={"mutate": 4}, recorded=recorded_durations(tmp_path), job_seconds=0.5)
    assert "recorded in this folder" in p.opening()
    p.recorded, p.recorded_arch = {"mutate": [1.0] * 8}, "gfx1103"
    assert "by the job durations recorded for gfx1103 in this folder" in p.opening()
    # the logger narrows the folder's records to the arch the run's estimate names (here: none recorded)
    (tmp_path / "workdir").mkdir()
    monkeypatch.chdir(tmp_path / "workdir")
    p = RunProgress(planned={"mutate": 4}, recorded={"mutate": [9.0] * 8})
    _set_prior(p, {"arch": "gfx902", "probe": Probe(0.5, [0.5], time.time()).document()}, fresh=True)
    assert p.recorded == {} and "recorded" not in p.opening()


def test_job_keys_and_labels_name_what_a_job_works_on():
    wc = {"arch": "gfx90c", "library": "Cijk_Ailk_Bljk_DB", "gen": "2"}
    assert job_key("benchmark", wc) == "Cijk_Ailk_Bljk_DB/gen2"
    assert job_label(wc) == "Cijk_Ailk_Bljk_DB gen2"
    assert job_key("finalize", {"arch": "gfx90c", "library": "X"}) == "X"
    assert job_label({"arch": "gfx90c", "family": "SB"}) == "SB"


def test_summary_says_where_everything_is_and_what_the_numbers_are(tmp_path):
    res = make_results(tmp_path)
    write_dashboard(res, CONFIG)
    (res / "TensileLibrary.dat").write_bytes(b"\x80")
    lines = run_summary(res, 12, "1 min 02 s", log=".snakemake/log/x.snakemake.log")
    text = "\n".join(lines)
    assert lines[0] == "oto: 12 jobs finished in 1 min 02 s."
    # simulated numbers: the library is no install candidate, and the summary says so instead of pointing
    # at the install instructions
    assert f"library    {res / 'TensileLibrary.dat'}  (simulated — not for installing)" in text
    assert "numbers    simulated — not for installing: oto's model of the GPU" in text
    assert "install the result" not in text and "README" not in text
    assert f"dashboard  {res / 'dashboard' / 'index.html'}" in text
    assert "headline" in text and "x.snakemake.log" in text
    failed = run_summary(res, 3, "5 s", failed=["select"])
    assert "1 job(s) failed (select)" in failed[0] and "run the same command again" in failed[0]
    found = results_folders(["results/gfx90c/a/b.yaml", "x.txt", "results/gfx902/c", "results/gfx90c/d"])
    assert found == [Path("results/gfx90c"), Path("results/gfx902")]


def test_measured_numbers_point_at_the_install_instructions_only_with_code_objects(tmp_path):
    res = tmp_path / "results" / "gfx90c"
    (res / "library").mkdir(parents=True)
    manifest = res / "library" / "manifest.yaml"
    manifest.write_text("tensile_create_library: {files: [], why: 'not run: Tensile not found'}\n")
    assert library_note(res, ["measured"]) == "no code objects built (not run: Tensile not found)"
    manifest.write_text("tensile_create_library: {files: [TensileLibrary_lazy_gfx90c.dat, a.co]}\n")
    assert "install the result" in library_note(res, ["measured"])
    assert library_note(res, ["measured", "replayed"]) == "replayed — not for installing"
    assert library_note(res, []) == "unknown — not for installing"


def test_the_headline_gives_every_family_next_to_the_whole_run(tmp_path):
    fam = {"sizes": 32, "geomean_score": 3.51, "wins": 32, "ties": 0, "losses": 0,
           "median_pct_roofline": 19.0, "latency_bound": 24}  # fmt: skip
    big = {
        "sizes": 500,
        "geomean_score": 1.23,
        "wins": 466,
        "ties": 34,
        "losses": 0,
        "median_pct_roofline": 72.6,
    }
    doc = {
        "state": "finished",
        "numbers": ["simulated"],
        "final": {
            "overall": {**big, "sizes": 532, "geomean_score": 1.31, "wins": 498, "latency_bound": 24},
            "libraries": [{}] * 8,
            "families": [{"family": "DB", **fam}, {"family": "ZB_GB", **big}],
        },
    }
    res = tmp_path / "results" / "gfx90c"
    (res / "dashboard").mkdir(parents=True)
    (res / "dashboard" / "data.json").write_text(json.dumps(doc))
    text = "\n".join(run_summary(res, 1, "1 s"))
    assert "headline   8 libraries, 532 deck sizes (final), geomean 1.31× the gfx900 spoof" in text
    assert (
        "  DB         32 sizes, geomean 3.51× the gfx900 spoof, 32 wins / 0 ties / 0 losses, median 19.0%"
        in text
    )
    assert "(24 sizes latency-bound)" in text and "  ZB_GB      500 sizes, geomean 1.23×" in text


def test_a_narrower_target_speaks_of_what_it_built(tmp_path):
    """After `snakemake results/gfx90c/<library>/final.yaml` the summary names that file and its figures,
    not the whole run's headline nor a TensileLibrary.dat it did not build (left from an earlier run)."""
    res = make_results(tmp_path)
    write_dashboard(res, CONFIG)
    (res / "TensileLibrary.dat").write_bytes(b"\x80")  # an earlier run's
    nn = res / "Cijk_Ailk_Bljk_DB"
    built = [str(nn / "gen2" / "selection.yaml"), str(nn / "final.yaml"), str(nn / "final_samples.csv")]
    text = "\n".join(run_summary(res, 3, "4 s", built=built))
    assert f"final      {nn / 'final.yaml'}  (4 deck sizes, final measurement" in text
    assert "wins / 1 ties / 1 losses" in text and "geomean 1.20× the gfx900 spoof" in text
    assert "headline" not in text and f"library    {res / 'TensileLibrary.dat'}" not in text
    assert "not built by this run" in text and "numbers    simulated — not for installing" in text
    # one generation of the library still running elsewhere: its latest selection
    nt = res / "Cijk_Ailk_Bjlk_DB"
    text = "\n".join(run_summary(res, 2, "2 s", built=[str(nt / "gen0" / "selection.yaml"),
                                                       str(nt / "gen1" / "selection.yaml")]))  # fmt: skip
    assert f"selection  {nt / 'gen1' / 'selection.yaml'}  (4 tuning sizes, generation 1" in text
    assert str(nt / "gen0" / "selection.yaml") not in text
    # a library of another GPU's deck is compared with that deck's spoof (it said gfx900 for every GPU)
    deck_path = nn / "deck.yaml"
    deck = (yaml.safe_load(deck_path.read_text()) or {}) if deck_path.is_file() else {}
    deck["provenance"] = {**(deck.get("provenance") or {}), "deck_of": "gfx1100"}
    deck_path.write_text(yaml.safe_dump(deck))
    text = "\n".join(run_summary(res, 3, "4 s", built=built))
    assert "geomean 1.20× the gfx1100 spoof" in text and "gfx900" not in text
    # a forced ceilings.yaml: named, nothing more
    text = "\n".join(run_summary(res, 1, "1 s", built=[str(res / "ceilings.yaml")]))
    assert f"built      {res / 'ceilings.yaml'}" in text and "headline" not in text and "numbers" not in text
    # the report rebuilt: the whole run's headline again, but the library was not rebuilt
    text = "\n".join(run_summary(res, 1, "1 s", built=[str(res / "dashboard" / "index.html")]))
    assert "headline" in text and "library    not built by this run" in text
    # a final.yaml a later failure took away (Snakemake deletes a failed job's outputs) is not named
    (nn / "final.yaml").unlink()
    text = "\n".join(run_summary(res, 3, "4 s", ["finalize"], built=built))
    assert "final.yaml" not in text and "not built by this run" in text


@pytest.mark.slow
def test_a_run_prints_one_line_per_job_and_a_summary(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    work = make_workdir(tmp_path, {**FAST_CONFIG, "max_generations": 1})
    proc = snakemake(work, "--cores", "1", "results/gfx90c/TensileLibrary.dat")
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout + proc.stderr
    lines = [m.groups() for m in map(LINE.match, out.splitlines()) if m]
    total = int(lines[0][1])
    assert [int(done) for done, _, _ in lines] == list(range(1, total + 1))  # every job, in order
    assert out.count(" left\n") >= total - 1 and lines[-1][0] == lines[-1][1]
    # Snakemake's job blocks and shell commands are in the log, not on the terminal.
    assert "Shell command" not in out and "rule mutate:" not in out and "wildcards:" not in out
    assert out.count("ANTHROPIC_API_KEY") == 1  # the notice, once per run
    summary = out[out.index(f"oto: {total} jobs finished") :]
    for what in ("TensileLibrary.dat", "acceptance.html", "dashboard/index.html", "headline"):
        assert what in summary, what
    assert "simulated — not for installing" in summary and "install the result" not in summary
    log = re.search(r"full log\s+(\S+)", summary).group(1)
    full = (work / log).read_text()
    assert "rule mutate:" in full or "localrule mutate:" in full  # the log keeps Snakemake's full output
    # Asked for, the full output is on the terminal too; the notice is still said once.
    again = snakemake(work, "--cores", "1", "-f", "results/gfx90c/ceilings.yaml", "--logger-oto-full")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "rule ceilings:" in again.stderr or "localrule ceilings:" in again.stderr
    assert (again.stdout + again.stderr).count("ANTHROPIC_API_KEY") == 1
    # the summary speaks of what this run built: the ceilings, not the library of the run before
    closing = (again.stdout + again.stderr).split("oto: 1 jobs finished")[-1]
    assert "built      results/gfx90c/ceilings.yaml" in closing and "headline" not in closing


# ---- the logger: dry-runs and the workflow's own errors, driven with Snakemake's records -----------------


def _handler(dryrun: bool = False, full: bool = False, quiet=None):
    import io
    from types import SimpleNamespace

    import snakemake_logger_plugin_oto as plugin

    common = SimpleNamespace(
        printshellcmds=False,
        nocolor=True,
        quiet=quiet,
        debug_dag=False,
        verbose=False,
        show_failed_logs=False,
        stdout=True,
        dryrun=dryrun,
    )
    handler = plugin.LogHandler(common, plugin.LogHandlerSettings(full=full))
    out = io.StringIO()
    handler.stream = out
    handler.inner.setStream(out)
    return handler, out


def _record(msg: str, event=None, level: int = logging.INFO, **extra) -> logging.LogRecord:
    record = logging.LogRecord("snakemake", level, __file__, 1, msg, None, None)
    record.event = event
    record.__dict__.update(extra)
    return record


def _job_info(jobid: int, rule: str, **wildcards) -> logging.LogRecord:
    return _record(
        f" Rule: {rule}, Jobid: {jobid}",
        LogEvent.JOB_INFO,
        jobid=jobid,
        rule_name=rule,
        wildcards={"arch": "gfx90c", **wildcards},
        output=[],
    )


def test_a_dry_run_prints_otos_short_plan(monkeypatch, tmp_path):
    import oto.run.probe
    from oto.run import dry_run

    monkeypatch.chdir(tmp_path)  # no job durations recorded here
    monkeypatch.setattr(oto.run.probe, "job_probe", lambda **kw: Probe(0.5, [0.5], time.time()))
    monkeypatch.setattr(dry_run, "_REMEMBERED", {})
    dry_run.remember(None, lambda: (3, 16))  # no plan: no backend seconds; 3 of the target's jobs done
    handler, out = _handler(dryrun=True)
    handler.emit(_record("Building DAG of jobs..."))
    handler.emit(_record("Job stats:\n...", LogEvent.RUN_INFO, stats={"mutate": 4, "total": 13}))
    jobs = [("all", {})] + [("ceilings", {})]
    for lib in ("Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB"):
        jobs += [(r, {"library": lib, "gen": str(g)}) for g in (0, 1) for r in ("mutate", "select")]
        jobs += [("finalize", {"library": lib})]
    jobs += [("mutate", {"library": "Cijk_Ailk_Bljk_SB", "gen": "1"})]  # a library resumed at gen1
    for i, (rule, wc) in enumerate(jobs):
        handler.emit(_job_info(i, rule, **wc))
    handler.emit(_record("This was a dry-run (flag -n). The order of jobs does not reflect the order..."))
    handler.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "oto: dry-run, nothing was run: 12 jobs to run (3 of the target's 16 jobs already done in this "
        "folder); Snakemake's own listing: add --logger-oto-full"
    )
    assert plan_counts(out.getvalue()) == {"ceilings": 1, "mutate": 5, "select": 4, "finalize": 2}
    assert "  DB        NN NT         2 × 5   gen0-gen1, finalize" in lines
    assert "  SB        NN                1   gen1" in lines
    assert lines[-1] == f"  time           about {fmt_duration(12 * 0.5 * JOB_PROBE_RATIO)} (" + (
        f"a job's start-up here takes 0.50 s, measured just now; a mean job is ~{JOB_PROBE_RATIO:g}× that)"
    )
    assert "Building DAG" not in out.getvalue() and "This was a dry-run" not in out.getvalue()
    # Snakemake's own listing on request, or when asked for its quiet output
    assert _handler(dryrun=True, full=True)[0].passthrough
    assert _handler(dryrun=True, quiet=["all"])[0].passthrough
    assert not _handler(dryrun=True, quiet=["rules"])[0].passthrough
    assert not _handler(full=True)[0].passthrough  # a run: oto's lines, Snakemake's output beside them


# Snakemake 9's text of a WorkflowError raised in an input function (rules/common.smk) and at parse time.
INPUT_FUNCTION_TEXT = """InputFunctionException in rule family in file "/w/rules/package.smk", line 22:
Error:
  WorkflowError:
    family 'SB' is not selected in this run (families: DB, ZB_GB); add it with --config 'families=[DB,SB]'
Wildcards:
  arch=gfx90c
  family=SB
Traceback:
  File "/w/rules/common.smk", line 117, in family_inputs (rule family, line 44, /w/rules/package.smk)"""
PARSE_TEXT = """WorkflowError in file "/w/rules/common.smk", line 19:
--config familes=…: field 'familes': not a config field (did you mean 'families'?)
  File "/w/rules/common.smk", line 19, in <module>"""
BUG_TEXT = """KeyError in file "/w/rules/common.smk", line 30:
'library'
  File "/w/rules/common.smk", line 30, in <module>"""


@pytest.mark.parametrize(
    ("text", "exception", "line"),
    [
        (
            INPUT_FUNCTION_TEXT,
            "InputFunctionException",
            "oto: error: family 'SB' is not selected in this run (families: DB, ZB_GB); add it with "
            "--config 'families=[DB,SB]'",
        ),
        (
            PARSE_TEXT,
            "WorkflowError",
            "oto: error: --config familes=…: field 'familes': not a config field (did you mean 'families'?)",
        ),
    ],
)
def test_an_error_the_workflow_raises_is_one_line(text, exception, line):
    for dryrun in (True, False):
        handler, out = _handler(dryrun=dryrun)
        handler.emit(_record(text, LogEvent.ERROR, logging.ERROR, exception=exception))
        handler.close()
        assert out.getvalue() == line + "\n"
    handler, out = _handler(full=True)  # Snakemake's full text on request
    handler.emit(_record(text, LogEvent.ERROR, logging.ERROR, exception=exception))
    assert "Traceback" in out.getvalue() or 'File "' in out.getvalue()


def test_an_error_of_the_code_keeps_snakemakes_traceback():
    handler, out = _handler(dryrun=True)
    handler.emit(_record(BUG_TEXT, LogEvent.ERROR, logging.ERROR, exception="KeyError"))
    assert out.getvalue().strip() == BUG_TEXT


def test_a_target_in_another_gpus_folder_says_how_to_ask_for_it(tmp_path):
    """The README's target with another GPU's name and the config's arch left as it is: Snakemake alone says
    "No rule to produce results/gfx1103/TensileLibrary.dat"; the terminal names the config field to set.
    A folder no profile names keeps Snakemake's own message."""
    work = make_workdir(tmp_path)
    proc = snakemake(work, "-n", "--cores", "1", "results/gfx1103/TensileLibrary.dat")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "No rule to produce" not in said
    assert (
        "oto: error: no rule makes results/gfx1103/TensileLibrary.dat in this run: a run fills "
        "results/<arch>/ for the arch its config names (field 'arch', config/config.yaml); to tune gfx1103, "
        "add --config arch=gfx1103"
    ) in said
    proc = snakemake(work, "-n", "--cores", "1", "results/nogpu/TensileLibrary.dat")
    assert (
        proc.returncode != 0
        and "No rule to produce results/nogpu/TensileLibrary.dat" in proc.stdout + proc.stderr
    )


def test_ctrl_c_is_no_failure_to_fix(monkeypatch, tmp_path):
    """Ctrl+C (Snakemake: "Terminating processes on user request") stops the running job with an error.
    The summary said "1 job(s) failed (normalise) ... Fix the cause (the failed job's log is printed
    above)", where no log was printed and nothing is to be fixed; now it says the run was stopped and how to
    go on, and the stopped job's error block is left to the full log."""
    import oto.run.probe

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(oto.run.probe, "job_probe", lambda **kw: Probe(0.5, [0.5], time.time()))
    handler, out = _handler()
    handler.emit(_record("Job stats:\n...", LogEvent.RUN_INFO, stats={"normalise": 1, "total": 1}))
    handler.emit(_job_info(7, "normalise", library="Cijk_Ailk_Bljk_DB", gen="0"))
    handler.emit(_record("Terminating processes on user request, this might take some time."))
    handler.emit(_record("Error in rule normalise", LogEvent.JOB_ERROR, logging.ERROR, jobid=7,
                         rule_name="normalise"))  # fmt: skip
    handler.close()
    text = out.getvalue()
    assert "oto: stopped on your request (Ctrl+C); 0 jobs finished" in text
    assert "Run the same command again to go on: every finished job is kept." in text
    assert "job(s) failed" not in text and "Fix the cause" not in text and "Error in rule" not in text
