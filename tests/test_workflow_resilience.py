"""A night's measurements survive what a user (or a hostile network) does to a finished project: moving or
copying the folder, editing the arch profile, forcing a re-run, a broken config or profile, an endpoint that
hangs, answers a proxy page or echoes the API key. Real Snakemake in scratch copies of the repository."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from oto.files import read_yaml
from test_agent import GOOD, KEY, message, tool_use
from workflow_helpers import FAST_CONFIG, job_counts, make_workdir, snakemake

pytestmark = pytest.mark.slow
NOTHING = "Nothing to be done"
DB_NN = "results/gfx90c/Cijk_Ailk_Bljk_DB"
LONG = 1800  # a full demo-sized run takes 1-2 minutes idle; the shared test machine is often far from idle


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One finished demo-sized project (every target built), copied by each test."""
    work = make_workdir(tmp_path_factory.mktemp("finished"), FAST_CONFIG)
    proc = snakemake(work, "--cores", "2", timeout=LONG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work


def copy_of(project: Path, where: Path, fresh_times: bool = False) -> Path:
    """A copy of the project; ``fresh_times``: like a plain ``cp -r`` (every file gets a new mtime)."""
    dst = where / "copy"
    shutil.copytree(project, dst, copy_function=shutil.copy if fresh_times else shutil.copy2)
    return dst


def measurements(work: Path) -> dict[str, tuple[str, int]]:
    """Every samples file: content hash and modification time."""
    files = [*work.glob("results/*/*/gen*/samples.csv"), *work.glob("results/*/*/final_samples.csv")]
    assert len(files) == 6
    return {
        str(f.relative_to(work)): (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime_ns)
        for f in files
    }


def edit_profile(work: Path, old: str, new: str) -> None:
    path = work / "arch_profiles" / "gfx90c.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_moved_project_plans_nothing_and_keeps_every_measurement(finished, tmp_path):
    work = copy_of(finished, tmp_path)
    before = measurements(work)
    moved = tmp_path / "somewhere" / "else"
    moved.parent.mkdir()
    os.rename(work, moved)  # mv
    dry = snakemake(moved, "-n")
    assert dry.returncode == 0 and NOTHING in dry.stdout + dry.stderr, dry.stdout[-2000:]
    run = snakemake(moved, "--cores", "1", timeout=LONG)
    assert run.returncode == 0 and NOTHING in run.stdout + run.stderr
    assert measurements(moved) == before


def test_a_copied_project_with_fresh_file_times_plans_nothing(finished, tmp_path):
    work = copy_of(finished, tmp_path, fresh_times=True)  # cp -r: every file newer, in copy order
    dry = snakemake(work, "-n")
    assert dry.returncode == 0 and NOTHING in dry.stdout + dry.stderr, dry.stdout[-2000:]


def test_a_profile_comment_or_key_order_re_runs_nothing(finished, tmp_path):
    work = copy_of(finished, tmp_path)
    edit_profile(work, "# Reference SKU", "# A new comment.\n# Reference SKU")
    edit_profile(work, "apu: true                  # [llvm] APU\n", "")
    edit_profile(work, "has_mfma: false", "apu: true\nhas_mfma: false")  # the key moved, same value
    dry = snakemake(work, "-n")
    assert dry.returncode == 0 and NOTHING in dry.stdout + dry.stderr, dry.stdout[-2000:]
    assert "changed since the last run" not in dry.stderr


def test_a_figure_change_says_which_stages_it_invalidates_and_redoes_only_those(finished, tmp_path):
    work = copy_of(finished, tmp_path)
    before = measurements(work)
    edit_profile(work, "peak_bandwidth_gbs: 51.2", "peak_bandwidth_gbs: 68.3")  # LPDDR4x: a ceiling, no more
    dry = snakemake(work, "-n", "--logger-oto-full")  # Snakemake's own listing: its job stats
    assert dry.returncode == 0
    note = dry.stderr[dry.stderr.index("oto: arch_profiles/gfx90c.yaml changed") :]
    assert "memory.peak_bandwidth_gbs 51.2 -> 68.3" in note
    assert "this invalidates the results of: ceilings (" in note and "measure again" not in note
    assert job_counts(dry.stdout) == {
        "ceilings": 1,
        "report": 1,
        "dashboard": 1,
        "package": 1,
        "all": 1,
        "total": 5,
    }
    run = snakemake(work, "--cores", "1", timeout=LONG)
    assert run.returncode == 0, run.stderr[-3000:]
    assert measurements(work) == before  # not one measurement touched
    assert read_yaml(work / "results/gfx90c/ceilings.yaml")["roofline"]["peak_bandwidth_gbs"] == 68.3
    again = snakemake(work, "-n")
    assert NOTHING in again.stdout and "changed since" not in again.stderr  # said before the run, once

    # up: the profile's sustained clocks (1800) may not exceed its peak clock
    edit_profile(work, "clock_mhz: 1800 ", "clock_mhz: 1900 ")
    dry = snakemake(work, "-n", "--logger-oto-full")  # and its reasons
    note = dry.stderr[dry.stderr.index("oto: arch_profiles/gfx90c.yaml changed") :]
    assert "clock_mhz 1800 -> 1900" in note
    invalidated = "ceilings, compile, benchmark, normalise, select, finalize, verify, compare"
    assert f"invalidates the results of: {invalidated}" in note
    assert "benchmark, finalize, verify and compare measure again" in note
    assert "read none of these figures: deck, mutate, emit, logic, package" in note
    assert "Params have changed" in dry.stdout and measurements(work) == before  # a dry-run deletes nothing


def test_a_change_that_redoes_benchmarks_of_the_same_experiment_re_measures_nothing(finished, tmp_path):
    """tensile.device_names reaches the Tensile config emit writes: emit and everything after it run again,
    and every benchmark and finalize takes the samples it kept (the registry's measurements of this run are
    not mistaken for an earlier run's: the candidates stay the same)."""
    work = copy_of(finished, tmp_path)
    before = {k: v[0] for k, v in measurements(work).items()}
    edit_profile(work, "device_names: [Device 1636,", "device_names: [Device 1637, Device 1636,")
    dry = snakemake(work, "-n")
    note = dry.stderr[dry.stderr.index("oto: arch_profiles/gfx90c.yaml changed") :]
    assert (
        '-> ["Device 1637", "Device 1636"' in note
        and "invalidates the results of: emit, verify, logic, compare, package" in note
    )
    run = snakemake(work, "--cores", "2", timeout=LONG)
    assert run.returncode == 0, run.stderr[-3000:]
    assert {k: v[0] for k, v in measurements(work).items()} == before  # same bytes: nothing re-measured
    logs = sorted((work / "results/gfx90c/logs").glob("*/*/benchmark.log"))
    logs += sorted((work / "results/gfx90c/logs").glob("*/finalize.log"))
    assert len(logs) == 6 and all("none re-measured" in p.read_text() for p in logs)
    assert read_yaml(work / "results/gfx90c/logic/gfx90c_Cijk_Ailk_Bljk_DB.yaml")[3][0] == "Device 1637"


def test_a_forced_benchmark_re_run_reuses_the_measurements_it_kept(finished, tmp_path):
    work = copy_of(finished, tmp_path)
    samples = f"{DB_NN}/gen0/samples.csv"
    before = (work / samples).read_bytes()
    run = snakemake(work, "--cores", "1", "--forcerun", samples, samples, timeout=LONG)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (work / samples).read_bytes() == before
    log = (work / "results/gfx90c/logs/Cijk_Ailk_Bljk_DB/gen0/benchmark.log").read_text()
    assert "measured earlier for this experiment" in log and "none re-measured" in log


def test_a_config_yaml_error_is_named_by_file_and_line(tmp_path):
    work = make_workdir(tmp_path)
    (work / "config" / "config.yaml").write_text("arch: gfx90c\nfamilies: [DB\nseed: 3\n")
    dry = snakemake(work, "-n")
    assert dry.returncode != 0
    assert "config/config.yaml: YAML syntax error at line 3, column 5" in dry.stdout + dry.stderr


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("clock_mhz: 1800 ", "clock_mhz: .nan ", "field 'clock_mhz': nan is not a finite number"),
        (
            "compute_units: 7 ",
            "compute_units: 1000000000 ",
            "field 'compute_units': 1000000000 is greater than the maximum of 1024",
        ),
        (
            "lds_bytes_per_cu: 65536",
            "lds_bytes_per_cu: 0",
            "field 'lds_bytes_per_cu': 0 is less than the minimum",
        ),
    ],
)
def test_an_unphysical_profile_fails_the_dry_run(tmp_path, old, new, message):
    work = make_workdir(tmp_path, FAST_CONFIG)
    edit_profile(work, old, new)
    dry = snakemake(work, "-n")
    assert dry.returncode != 0 and f"arch_profiles/gfx90c.yaml: {message}" in dry.stdout + dry.stderr


# ---- the agent's endpoint --------------------------------------------------------------------------------


def _agent_config(api_url: str, **agent) -> dict:
    return {
        **FAST_CONFIG,
        "agent": {"base_url": api_url, "proposals_per_generation": 2, "backoff_s": 0, **agent},
    }


def test_a_proxy_page_falls_back_to_the_strategy(tmp_path, api, monkeypatch):
    api.default = (
        200,
        b"<html>Please log in to the guest network</html>",
        {"content-type": "text/html"},
        0.0,
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    work = make_workdir(tmp_path, _agent_config(api.url))
    proc = snakemake(work, "--cores", "1", f"{DB_NN}/gen0/proposals.yaml", timeout=LONG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = read_yaml(work / DB_NN / "gen0" / "proposals.yaml")
    assert doc["agent"]["status"] == "failed" and "not JSON (text/html" in doc["agent"]["reason"]
    assert len(doc["proposals"]) == FAST_CONFIG["search"]["candidates_per_generation"]
    assert "Traceback" not in proc.stderr


def test_a_hung_endpoint_costs_the_run_two_timeouts_and_is_said_once(tmp_path, api, monkeypatch):
    reply = message([tool_use({"proposals": [{"params": GOOD, "rationale": "late"}]})])
    api.default = (200, reply, {}, 3.0)  # answers, but long after the timeout
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    work = make_workdir(tmp_path, _agent_config(api.url, timeout_s=0.5, max_retries=4, breaker_failures=2))
    targets = [
        f"results/gfx90c/{lib}/gen1/selection.yaml" for lib in ("Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB")
    ]
    proc = snakemake(work, "--cores", "2", *targets, timeout=LONG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(api.requests) == 2  # for four mutate jobs, not 4 x 5 attempts
    assert (proc.stdout + proc.stderr).count("no more agent calls in this run") == 1
    statuses = [
        read_yaml(p)["agent"]["status"]
        for p in sorted((work / "results" / "gfx90c").glob("*/gen*/proposals.yaml"))
    ]
    assert sorted(statuses) == ["failed", "skipped", "skipped", "skipped"]


def test_an_endpoint_echoing_the_key_leaves_it_in_no_file(tmp_path, api, monkeypatch):
    db = {**GOOD, "VectorWidth": 2, "ThreadTile": [4, 4]}
    echo = f"echo {KEY}"
    proposals = [
        {"params": db, "rationale": echo},
        {"params": {**db, "DepthU": 32}, "rationale": echo},
        {"params": {**db, "KernelLanguage": KEY}, "rationale": echo},
    ]
    reply = message([{"type": "text", "text": echo}, tool_use({"proposals": proposals})], stop_reason=KEY)
    reply["model"] = f"claude-{KEY}"
    api.default = (200, reply, {"request-id": KEY}, 0.0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    work = make_workdir(tmp_path, _agent_config(api.url))
    proc = snakemake(work, "--cores", "2", "results/gfx90c/registry/consolidated.yaml", timeout=LONG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = work / "results" / "gfx90c"
    gen0 = read_yaml(results / "Cijk_Ailk_Bljk_DB" / "gen0" / "proposals.yaml")
    assert gen0["agent"]["status"] == "used" and any(p["proposer"] == "agent" for p in gen0["proposals"])
    files = [p for p in work.rglob("*") if p.is_file() and "workflow" not in p.parts]
    names = {p.name for p in files}
    assert {"proposals.yaml", "candidates.yaml", "registry.jsonl", "registry.sqlite", "agent.jsonl"} <= names
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaked == [] and KEY not in proc.stdout + proc.stderr
    assert "[REDACTED]" in json.dumps(gen0)
