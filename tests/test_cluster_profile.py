"""More than one machine of your own: the SLURM workflow profile (profiles/slurm) sends compiles and every CPU
stage to the CPU partition and the gpu=1 stages (benchmark, finalize) to the GPU partition with one GPU each.
Checked by a dry-run with the slurm executor plugin installed, and by a real run of the same profile through
the cluster-generic executor plugin whose submit command is a fake sbatch (tests/fake_sbatch.py) that records
each job's partition and GPUs and runs the job on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from oto.stages import gpu_stages
from workflow_helpers import FAST_CONFIG, REPO, make_workdir, snakemake

pytest.importorskip("snakemake_executor_plugin_slurm")
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
GPU_RULES = set(gpu_stages())  # the stages declared gpu=True (oto.stages)


def test_the_slurm_profile_routes_gpu_jobs_to_the_gpu_partition(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    proc = snakemake(work, "--workflow-profile", "profiles/slurm", "-n")
    assert proc.returncode == 0, proc.stderr
    jobs = re.findall(r"^rule (\w+):.*?resources: ([^\n]*)", proc.stdout, re.S | re.M)
    by_rule = defaultdict(set)
    for rule, resources in jobs:
        by_rule[rule].add(resources)
    assert set(by_rule) >= GPU_RULES and "compile" in by_rule
    for rule, seen in by_rule.items():
        for resources in seen:
            if rule in GPU_RULES:
                assert "slurm_partition=gpu" in resources and "gpu=1" in resources, (rule, resources)
            else:
                assert "slurm_partition=cpu" in resources and "gpu=" not in resources, (rule, resources)
    assert all("cpus_per_task=4" in r for r in by_rule["compile"])
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm" and profile["resources"]["gpu"] >= 1


@pytest.mark.slow
def test_the_profile_runs_the_workflow_through_a_cluster_executor(tmp_path, monkeypatch):
    config = {**FAST_CONFIG, "max_generations": 1}
    work = make_workdir(tmp_path, config)
    profile = yaml.safe_load(PROFILE.read_text())  # the SLURM profile, executor swapped for the test
    profile["executor"] = "cluster-generic"
    profile["cluster-generic-submit-cmd"] = f"{sys.executable} {REPO / 'tests' / 'fake_sbatch.py'}"
    profile["latency-wait"] = 5
    profile["jobs"] = 4
    (work / "profiles" / "cluster-test").mkdir()
    (work / "profiles" / "cluster-test" / "config.yaml").write_text(yaml.safe_dump(profile))
    ledger, logs = work / "ledger.jsonl", work / "job-logs"
    logs.mkdir()
    monkeypatch.setenv("FAKE_SBATCH_LEDGER", str(ledger))
    monkeypatch.setenv("FAKE_SBATCH_LOGS", str(logs))
    # The GPU mutex lives in the temp folder: a private one keeps other test runs on this machine out.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    try:
        proc = snakemake(work, "--workflow-profile", "profiles/cluster-test", timeout=1500)
    finally:
        for line in ledger.read_text().splitlines() if ledger.is_file() else []:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(json.loads(line)["pid"], signal.SIGTERM)  # jobs still running after a failure
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work / "results/gfx90c/TensileLibrary.dat").is_file()
    jobs = [json.loads(line) for line in ledger.read_text().splitlines()]
    compiles = [j for j in jobs if j["rule"] == "compile"]
    assert len(compiles) == 2 and all(
        j["partition"] == "cpu" and j["gpus"] == 0 and j["cpus"] == 4 for j in compiles
    )
    gpu_jobs = [j for j in jobs if j["rule"] in GPU_RULES]
    # per library (2) benchmark, finalize and verify, and the run's compare (rocBLAS's client on the GPU)
    assert len(gpu_jobs) == 7 and all(j["partition"] == "gpu" and j["gpus"] == 1 for j in gpu_jobs)
    assert {j["rule"] for j in gpu_jobs} == {"benchmark", "finalize", "verify", "compare"}
    assert {j["rule"] for j in jobs} >= {
        "deck",
        "mutate",
        "emit",
        "compile",
        "benchmark",
        "select",
        "package",
    }
    assert all(j["partition"] == "cpu" for j in jobs if j["rule"] not in GPU_RULES)
    assert Path(work / "results/gfx90c/acceptance.md").is_file()
