"""The workflow end to end, through the real snakemake command, in a scratch copy of the repository."""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pandas as pd
import pytest
import yaml
from oto.files import mirror_path, read_yaml_mirrored
from oto.registry.records import TOPUP
from oto.run.lock import LOCK_FILE, acquire_run_lock
from oto.tensile.params import candidate_id, canonical
from workflow_helpers import FAST_CONFIG, job_counts, make_workdir, plan_counts, snakemake

pytestmark = pytest.mark.slow
TARGET = "results/gfx90c/TensileLibrary.dat"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One complete fast run shared by the read-only checks below."""
    # Converges after gen1 (any progress is below epsilon), so gen2 must carry forward without work.
    cfg = {
        **FAST_CONFIG,
        "max_generations": 3,
        "search": {"candidates_per_generation": 6, "convergence": {"epsilon": 1.0, "patience": 1}},
    }
    work = make_workdir(tmp_path_factory.mktemp("run"), cfg)
    proc = snakemake(work, "--cores", "2", TARGET)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


def test_dry_run_prints_otos_short_plan_unless_asked_for_snakemakes(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    proc = snakemake(work, TARGET, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    libs, gens = 2, FAST_CONFIG["max_generations"]  # DB × {NN, NT}
    counts = plan_counts(out)
    for rule in ("mutate", "emit", "compile", "benchmark", "normalise", "select"):
        assert counts[rule] == libs * gens, (rule, counts)
    for rule in ("finalize", "logic"):
        assert counts[rule] == libs
    assert counts["deck"] == libs  # one per library: another selection leaves a library's deck alone
    assert counts["ceilings"] == counts["coverage"] == counts["report"] == counts["package"] == 1
    assert "  DB        NN NT        2 × 16   gen0-gen1, deck, finalize, verify, logic" in out.splitlines()
    assert re.search(r"^  time +about \d", out, re.M) and len(out.splitlines()) < 40
    assert "rule mutate:" not in out and "reason:" not in out and "Job stats" not in out
    # Snakemake's own listing, on request
    full = snakemake(work, TARGET, "-n", "--logger-oto-full")
    assert full.returncode == 0 and "reason:" in full.stdout
    assert job_counts(full.stdout) == {**counts, "total": sum(counts.values())}


def test_a_dry_run_of_the_whole_deck_is_short(tmp_path):
    """Snakemake's listing of families=all is 11,119 lines; oto's plan groups the libraries by family."""
    work = make_workdir(tmp_path, FAST_CONFIG)
    proc = snakemake(work, "-n", "--config", "families=all", "patterns=[NN,NT,TN,TT]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert len(out.splitlines()) < 45, out
    assert plan_counts(out)["finalize"] == 46 and "  SB        NN NT TN TT" in out


def test_lint_is_clean(tmp_path):
    # a copy of the workflow as the repository has it (config included): Snakemake writes its log beside it
    proc = snakemake(make_workdir(tmp_path), "--lint")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_parsing_takes_no_lock_and_a_second_run_is_refused(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    for args in (("-n", TARGET), ("--lint",)):
        proc = snakemake(work, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (work / LOCK_FILE).exists(), "a dry-run or lint took the run lock"
    fd = acquire_run_lock(work)  # a live run holds the folder
    try:
        assert snakemake(work, "-n", TARGET).returncode == 0  # dry-runs beside a live run are fine
        proc = snakemake(work, "--cores", "1", TARGET)
        assert proc.returncode != 0
        assert f"another oto run (pid {os.getpid()}) is running in" in proc.stderr
        assert not (work / "results").exists(), "the refused run wrote results"
    finally:
        os.close(fd)


def test_main_job_outputs(finished_run):
    work = finished_run
    res = work / "results" / "gfx90c"
    lib = msgpack.unpackb((res / "TensileLibrary.dat").read_bytes(), raw=False, strict_map_key=False)
    assert lib["library"]["type"] == "Hardware"
    assert lib["library"]["rows"][0]["predicate"]["value"]["value"] == "gfx90c"
    assert len(lib["solutions"]) >= 2
    logic = sorted(p.name for p in (res / "logic").glob("*.yaml"))
    assert logic == ["gfx90c_Cijk_Ailk_Bjlk_DB.yaml", "gfx90c_Cijk_Ailk_Bljk_DB.yaml"]
    report = (res / "acceptance.md").read_text()
    assert "simulated" in report and "| DB |" in report
    final = yaml.safe_load((res / "Cijk_Ailk_Bljk_DB" / "final.yaml").read_text())
    assert final["provenance"]["numbers"] == "simulated"
    # its JSON mirror (verify, compare, logic, family and the report read it) holds what the YAML holds
    assert mirror_path(res / "Cijk_Ailk_Bljk_DB" / "final.yaml").is_file()
    assert read_yaml_mirrored(res / "Cijk_Ailk_Bljk_DB" / "final.yaml") == final
    assert len(final["per_size"]) == 8 and all(r["winner"] for r in final["per_size"])
    assert {r["verdict"] for r in final["per_size"]} <= {"win", "tie", "loss"}
    samples = (res / "Cijk_Ailk_Bljk_DB" / "gen0" / "samples.csv").read_text().splitlines()
    assert samples[0].startswith("seq,kernel_id,role") and samples[1].split(",")[12] == "simulated"


def test_converged_library_carries_forward_without_work(finished_run):
    lib = finished_run / "results" / "gfx90c" / "Cijk_Ailk_Bljk_DB"
    gen1 = yaml.safe_load((lib / "gen1" / "selection.yaml").read_text())
    assert gen1["convergence"]["converged"]
    assert yaml.safe_load((lib / "gen2" / "proposals.yaml").read_text())["frozen"] is True
    assert yaml.safe_load((lib / "gen2" / "build.yaml").read_text())["kernels"] == []
    assert len((lib / "gen2" / "samples.csv").read_text().splitlines()) == 1  # header only
    gen2 = yaml.safe_load((lib / "gen2" / "selection.yaml").read_text())
    assert gen2["frozen"] and gen2["per_size"] == gen1["per_size"]
    final = yaml.safe_load((lib / "final.yaml").read_text())
    assert final["converged"] and final["generations"] == 3


def test_rerun_has_nothing_to_do(finished_run):
    proc = snakemake(finished_run, "-n", TARGET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_bad_config_fails_dry_run_naming_file_and_field(tmp_path):
    cfg = copy.deepcopy(FAST_CONFIG)
    cfg["max_generations"] = 0
    work = make_workdir(tmp_path, cfg)
    proc = snakemake(work, "-n", TARGET)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "config/config.yaml" in out and "max_generations" in out


def test_unknown_family_fails_dry_run(tmp_path):
    work = make_workdir(tmp_path, {**FAST_CONFIG, "families": ["DB", "QQ"]})
    proc = snakemake(work, "-n", TARGET)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "families" in out and "QQ" in out


def test_bad_arch_profile_fails_dry_run_naming_file_and_field(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    prof = work / "arch_profiles" / "gfx90c.yaml"
    data = yaml.safe_load(prof.read_text())
    data["memory"]["sustained_bandwidth_gbs"] = -3
    prof.write_text(yaml.safe_dump(data))
    proc = snakemake(work, "-n", TARGET)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "arch_profiles/gfx90c.yaml" in out and "sustained_bandwidth_gbs" in out


def _tuned_libraries(work: Path) -> set[str]:
    return {p.parent.parent.name for p in (work / "results" / "gfx90c").glob("Cijk_*/gen0/proposals.yaml")}


def test_family_target_builds_only_that_family(tmp_path):
    cfg = {
        **FAST_CONFIG,
        "families": ["DB", "ZB_GB"],
        "patterns": ["NN", "NT", "TN", "TT"],
        "max_generations": 1,
    }
    work = make_workdir(tmp_path, cfg)
    proc = snakemake(work, "--cores", "2", "results/gfx90c/family/DB.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _tuned_libraries(work) == {f"Cijk_{a}_{b}_DB" for a in ("Ailk", "Alik") for b in ("Bljk", "Bjlk")}
    fam = yaml.safe_load((work / "results/gfx90c/family/DB.yaml").read_text())
    assert sorted(v["pattern"] for v in fam["libraries"].values()) == ["NN", "NT", "TN", "TT"]


def test_a_target_of_an_unselected_family_says_how_to_add_it_in_one_line(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    for target in ("results/gfx90c/family/SB.yaml", "results/gfx90c/Cijk_Ailk_Bljk_SB/final.yaml"):
        proc = snakemake(work, "-n", target)
        assert proc.returncode != 0
        out = proc.stdout + proc.stderr
        said = [line for line in out.splitlines() if "SB" in line]
        assert len(said) == 1 and said[0].startswith("oto: error: "), out
        assert "--config 'families=[DB,SB]'" in said[0], target
        assert "InputFunctionException" not in out and "Traceback" not in out and 'File "' not in out
    # The fix as printed works.
    proc = snakemake(work, "-n", "results/gfx90c/family/SB.yaml", "--config", "families=[DB,SB]")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_command_line_typo_is_blamed_on_the_command_line(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    proc = snakemake(work, "-n", "--config", "familes=all")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    said = [line for line in out.splitlines() if "familes" in line]
    assert said == [
        "oto: error: --config familes=…: field 'familes': not a config field (did you mean 'families'?)"
    ]
    assert "config/config.yaml" not in said[0] and 'File "' not in out


def test_library_target_builds_only_that_library(tmp_path):
    work = make_workdir(tmp_path, {**FAST_CONFIG, "max_generations": 1})
    proc = snakemake(work, "--cores", "2", "results/gfx90c/logic/gfx90c_Cijk_Ailk_Bjlk_DB.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _tuned_libraries(work) == {"Cijk_Ailk_Bjlk_DB"}
    assert not (work / "results/gfx90c/TensileLibrary.dat").exists()


def _benchmarks_done(work: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (work / "results" / "gfx90c").glob("Cijk_*/gen*/samples.csv")}


def test_sigkill_mid_benchmark_then_same_command_resumes(tmp_path):
    # Pace the simulated GPU in wall time so a benchmark job lasts long enough to be killed inside it.
    cfg = {**FAST_CONFIG, "max_generations": 3, "sim": {"pace": 60.0}}
    work = make_workdir(tmp_path, cfg)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", TARGET]
    proc = subprocess.Popen(
        cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    incomplete = work / ".snakemake" / "incomplete"
    deadline = time.time() + 240
    killed_during = None
    try:
        while time.time() < deadline and proc.poll() is None:
            done = _benchmarks_done(work)
            running = [p for p in incomplete.glob("*")] if incomplete.is_dir() else []
            logs = sorted((work / "results/gfx90c/logs").glob("Cijk_*/gen*/benchmark.log"))
            # Kill once at least one benchmark has completed and another one is in flight.
            if done and len(logs) > len(done) and running:
                killed_during = logs[-1]
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed_during is None:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert killed_during is not None, "never caught a benchmark in flight"
    before = _benchmarks_done(work)
    assert before, "no benchmark had completed before the kill"

    again = snakemake(work, "--cores", "1", TARGET, timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    resumed = r"^oto: resuming: (\d+) of (\d+) jobs already done in this folder; (\d+) left"
    opening = re.search(resumed, again.stdout + again.stderr, re.M)
    assert opening, again.stdout[:2000]
    done, total, left = map(int, opening.groups())
    assert done >= len(before) * 4 and done + left == total  # mutate, emit, compile, benchmark per benchmark
    after = _benchmarks_done(work)
    for path, mtime in before.items():
        assert after[path] == mtime, f"completed benchmark {path} was redone"
    assert (work / TARGET).exists()


def test_a_fresh_run_in_the_same_results_folder_starts_from_the_registry(finished_run, tmp_path):
    """Delete a library's generations but keep the registry: the new run re-measures the registry's best
    kernels once (deliberate top-ups), starts its search from the earlier measurements and never benchmarks
    an earlier kernel again by accident."""
    work = tmp_path / "oto"
    shutil.copytree(finished_run, work, ignore=shutil.ignore_patterns(".snakemake"))
    lib = work / "results" / "gfx90c" / "Cijk_Ailk_Bljk_DB"
    before = {
        kid
        for gen in sorted(lib.glob("gen*"))
        for kid in pd.read_csv(gen / "samples.csv").query("role == 'candidate'")["kernel_id"]
    }
    assert before and (work / "results" / "gfx90c" / "registry" / "registry.sqlite").exists()
    shutil.rmtree(lib)
    proc = snakemake(work, "--cores", "2", "results/gfx90c/Cijk_Ailk_Bljk_DB/final.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    gen0 = yaml.safe_load((lib / "gen0" / "proposals.yaml").read_text())
    topped = [p for p in gen0["proposals"] if p["proposer"] == TOPUP]
    assert topped, gen0["proposals"]
    after = pd.read_csv(lib / "gen0" / "samples.csv").query("role == 'candidate'")
    topup_ids = {candidate_id(canonical(p["params"])) for p in topped}
    assert topup_ids <= set(after["kernel_id"])  # re-measured under this run's conditions
    assert not (set(after["kernel_id"]) - topup_ids) & before  # nothing else measured twice


def test_readme_flow_demo_then_a_tensile_run_in_the_same_results_folder(finished_run, tmp_path, monkeypatch):
    """The README's flow: the simulated demo, then Tensile found (here the stand-in Tensile and client, with
    a gpu_metrics table in a stand-in sysfs), one library re-tuned in the same results folder. The simulated
    records are never 'already measured', never knowledge nor top-ups of the measured run; opted in, they are
    labelled priors. Every deliverable says which numbers it holds, and no code objects come from them."""
    from gpu_metrics_blobs import renoir
    from oto.measurement.scoring import SWEEP_CLOCK
    from oto.registry.store import Store

    tests = Path(__file__).resolve().parent
    work = tmp_path / "oto"
    shutil.copytree(finished_run, work, ignore=shutil.ignore_patterns(".snakemake"))
    res = work / "results" / "gfx90c"
    lib = res / "Cijk_Ailk_Bljk_DB"
    dev = tmp_path / "sys" / "class" / "drm" / "card0" / "device"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "gpu_metrics").write_bytes(renoir(1750))
    client = tmp_path / "tensile_client"
    monkeypatch.setenv("STAND_IN_CLIENT_NO_FATES", "1")  # the strategies may propose any WorkGroupMapping
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {tests / "stand_in_client.py"} "$@"\n')
    client.chmod(0o755)
    cfg = yaml.safe_load((work / "config" / "config.yaml").read_text())
    cfg.update(
        backend="tensile",
        tensile={
            "command": [sys.executable, str(tests / "fake_tensile.py")],
            "prebuilt_client": str(client),
            "asm_cache": str(tmp_path / "asm" / "asmcache.yaml"),
            "telemetry": {"sysfs": str(tmp_path / "sys"), "rate_hz": 50},
        },
        registry={"simulated_priors": True},
    )
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    # The README's way to redo one library, then its one target: only that library is re-tuned.
    for args in (("results/gfx90c/Cijk_Ailk_Bljk_DB/final.yaml", "-R", "mutate"), (TARGET,)):
        proc = snakemake(work, "--cores", "2", *args, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-4000:]
    # the measured run found nothing of the simulated demo as measurements, only as labelled priors
    gen0 = yaml.safe_load((lib / "gen0" / "proposals.yaml").read_text())
    assert not [p for p in gen0["proposals"] if p["proposer"] == TOPUP]
    cands = yaml.safe_load((lib / "gen0" / "candidates.yaml").read_text())
    assert not [r for r in cands["rejected"] if "registry" in r.get("reason", "")]
    mutate_log = (res / "logs" / "Cijk_Ailk_Bljk_DB" / "gen0" / "mutate.log").read_text()
    assert (
        "registry knowledge (measured numbers only): 0 kernel(s) of this library, 0 of its family"
        in mutate_log
    )
    assert "labelled prior(s) of other numbers (simulated)" in mutate_log
    # measured in Tensile's order, one clock per sweep
    samples = pd.read_csv(lib / "gen0" / "samples.csv")
    assert set(samples["source"]) == {"measured"} and set(samples["launch_order"]) == {"reported"}
    assert set(samples["clock_telemetry"]) == {"per_sweep"} and (samples["sweep"] >= 0).all()
    assert set(samples.loc[samples["status"] == "ok", "clock_mhz"]) == {1750.0}
    assert set(pd.read_csv(lib / "gen0" / "scores.csv")["drift"]) == {SWEEP_CLOCK}
    final = yaml.safe_load((lib / "final.yaml").read_text())
    assert final["provenance"]["numbers"] == "measured" and final["measurement"]["drift"] == SWEEP_CLOCK
    # deliverables: which numbers each holds
    logic = res / "logic"
    assert (
        yaml.safe_load((logic / "gfx90c_Cijk_Ailk_Bljk_DB.provenance.json").read_text())["numbers"]
        == "measured"
    )
    assert (
        yaml.safe_load((logic / "gfx90c_Cijk_Ailk_Bjlk_DB.provenance.json").read_text())["numbers"]
        == "simulated"
    )
    manifest = yaml.safe_load((res / "library" / "manifest.yaml").read_text())
    assert manifest["provenance"]["numbers"] == ["measured", "simulated"]
    assert manifest["tensile_create_library"]["files"] == []
    assert "winners are simulated" in manifest["tensile_create_library"]["why"]
    acceptance = (res / "acceptance.md").read_text()
    assert "Numbers are **measured** on the GPU" in acceptance and "Numbers are **simulated**" in acceptance
    assert f"drift estimator `{SWEEP_CLOCK}`" in acceptance
    # the store keeps both kinds apart: different protocols, each record with its numbers
    db = Store(res / "registry" / "registry.sqlite")
    rows = db.query("SELECT DISTINCT numbers, protocol FROM records WHERE kind='benchmarked'")
    db.close()
    protocols = {r["numbers"]: r["protocol"] for r in rows}
    assert set(protocols) == {"simulated", "measured"} and len(set(protocols.values())) == 2
