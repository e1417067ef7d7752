"""What a run prints: one line per finished job with done/total and the time left, errors in full, a closing
summary; Snakemake's job blocks and shell commands go to the log (oto's logger plugin, profiles/default)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dashboard_helpers import CONFIG, make_results
from oto.reporting.dashboard import write_dashboard
from oto.reporting.summary import library_note, results_folders, run_summary
from oto.run.estimate import JOB_SECONDS
from oto.run.progress import PRIOR_JOBS, RunProgress, job_key, job_label
from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

LINE = re.compile(r"^\s*(\d+)/(\d+)  (\w+)\s")


def test_time_left_uses_recorded_durations_and_the_backends_estimate():
    est = {"gpu_seconds": {"benchmark": {"L/gen0": 10.0, "L/gen1": 30.0, "M/gen0": 20.0}}}
    p = RunProgress(planned={"mutate": 3, "benchmark": 3}, recorded={"mutate": [2.0, 4.0]}, estimate=est)
    # Before any job: mutate from the earlier runs' record (3 s), benchmarks from the backend (60 s) plus
    # an overhead of the mean recorded job (3 s each).
    assert p.remaining_work() == pytest.approx(3 * 3.0 + 60.0 + 3 * 3.0)
    p.finish("mutate", "L/gen0", 1.0)
    p.finish("benchmark", "L/gen0", 12.0)  # 2 s beyond its estimate: that is the benchmark overhead
    assert p.expected("mutate") == 1.0 and p.expected("benchmark") == pytest.approx(2.0)
    # Left: 2 mutate × 1 s + 2 benchmarks × (2 s + the mean of the unfinished estimates, 25 s).
    assert p.remaining_work() == pytest.approx(2 * 1.0 + 2 * (2.0 + 25.0))
    # Wall time so far twice the summed job time (a slow scheduler): the time left doubles too.
    assert p.time_left(elapsed=26.0) == pytest.approx(2 * p.remaining_work())
    line = p.line("benchmark", "L gen0", 12.0, 26.0)
    assert LINE.match(line).groups() == ("2", "6", "benchmark") and "left" in line


def test_in_a_new_folder_one_slow_first_job_does_not_set_the_length_of_every_job():
    p = RunProgress(planned={"deck": 1, "mutate": 100})
    assert p.remaining_work() == pytest.approx(101 * JOB_SECONDS)
    assert "none recorded in this folder yet" in p.opening()
    p.finish("deck", "", 4.0)  # the deck: a slow first job, 8x the default
    # 100 mutate jobs at (4 s + PRIOR_JOBS x the default) / (1 + PRIOR_JOBS), not at 4 s each.
    expected = (4.0 + PRIOR_JOBS * JOB_SECONDS) / (1 + PRIOR_JOBS)
    assert p.remaining_work() == pytest.approx(100 * expected)
    assert p.remaining_work() < 100 * 4.0 / 3
    # The same holds for a benchmark's overhead beyond the backend's estimate before any benchmark finished.
    assert RunProgress(planned={"benchmark": 1}, done=p.done).expected("benchmark") == pytest.approx(expected)
    for i in range(40):  # as the run goes on, its own jobs outweigh the default
        p.finish("mutate", f"L/gen{i}", 1.0)
    assert p.expected("mutate") == 1.0
    # A folder with earlier runs draws towards their mean job instead, and says so.
    q = RunProgress(planned={"deck": 1, "emit": 10}, recorded={"mutate": [2.0, 2.0]})
    q.finish("deck", "", 11.0)
    assert q.expected("emit") == pytest.approx((11.0 + PRIOR_JOBS * 2.0) / (1 + PRIOR_JOBS))
    assert "recorded in this folder" in q.opening() and "none recorded" not in q.opening()


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
    # a forced ceilings.yaml: named, nothing more
    text = "\n".join(run_summary(res, 1, "1 s", built=[str(res / "ceilings.yaml")]))
    assert f"built      {res / 'ceilings.yaml'}" in text and "headline" not in text and "numbers" not in text
    # the report rebuilt: the whole run's headline again, but the library was not rebuilt
    text = "\n".join(run_summary(res, 1, "1 s", built=[str(res / "dashboard" / "index.html")]))
    assert "headline" in text and "library    not built by this run" in text


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
