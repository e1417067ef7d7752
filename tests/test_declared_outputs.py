"""Every job of a small simulated run writes its declared outputs and log, and nothing else but the side
files docs/architecture.md names for its rule (the live page, the measurements, the registry store) and the
hidden JSON mirror of a declared YAML output (a cache its readers check against the YAML's sha256)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from workflow_helpers import FAST_CONFIG, make_workdir, snakemake

pytestmark = pytest.mark.slow
AUDIT_HOOK = Path(__file__).resolve().parent / "data" / "write_audit"
TARGET = "results/gfx90c/TensileLibrary.dat"
RESULTS = "results/gfx90c/"
# What a rule may write beyond its declared outputs (docs/architecture.md, "Outputs", "Measurements outlive
# their jobs", the registry rule's row): prefixes under results/<arch>/.
SIDE_FILES = {
    "coverage": ("live/",),  # the live dashboard, refreshed best effort
    "select": ("live/",),
    "dashboard": ("live/", "dashboard/.lock"),  # the final page is written under the pages' shared lock
    "benchmark": ("measurements/",),  # every launch's samples, kept for reruns
    "finalize": ("measurements/",),
    "registry": ("registry/registry.sqlite",),  # the persistent store, deliberately no output
}


def mirror_of(path: str) -> str | None:
    """The declared YAML file a hidden JSON mirror ``.<name>.json`` stands beside (docs/architecture.md,
    "Earlier libraries are no job"), else None."""
    folder, name = os.path.split(path)
    if name.startswith(".") and name.endswith((".yaml.json", ".yml.json")):
        return os.path.join(folder, name[1 : -len(".json")])
    return None


def undeclared_writes(audit: Path, work: Path) -> dict[str, set[str]]:
    """Per rule, the files its jobs left in the work folder that are neither a declared output or log of the
    job nor a side file of its rule (temporary files renamed away are gone by the end and not counted)."""
    found: dict[str, set[str]] = {}
    for record_file in audit.glob("*.json"):
        job = json.loads(record_file.read_text())
        cwd = Path(job["cwd"])
        declared = {os.path.normpath(cwd / p) for p in job["outputs"] + job["log"]}
        allowed = tuple(RESULTS + side for side in SIDE_FILES.get(job["rule"], ()))
        for path in job["written"]:
            full = os.path.normpath(cwd / path)
            rel = os.path.relpath(full, work)
            if full in declared or rel.startswith("..") or not os.path.exists(full):
                continue  # declared, outside the project (the temp folder's GPU lock), or a temp file
            if mirror_of(full) in declared:
                continue  # a declared YAML output's JSON mirror (oto.files.write_yaml_mirrored)
            if not rel.startswith(allowed):
                found.setdefault(job["rule"], set()).add(rel)
    return found


def test_no_job_writes_outside_its_declared_outputs(tmp_path, monkeypatch):
    work = make_workdir(tmp_path, FAST_CONFIG)
    audit = tmp_path / "audit"
    audit.mkdir()
    monkeypatch.setenv("OTO_WRITE_AUDIT", str(audit))
    monkeypatch.setenv("PYTHONPATH", str(AUDIT_HOOK))
    # In two steps, the live page's cache emptied between them: the live refreshes are paced and best
    # effort, so the run-wide jobs (report, dashboard) may find none of the generation digests cached.
    proc = snakemake(work, "--cores", "2", "--omit-from", "report", TARGET)
    assert proc.returncode == 0, proc.stderr[-4000:]
    shutil.rmtree(work / RESULTS / "live" / "cache", ignore_errors=True)
    proc = snakemake(work, "--cores", "2", TARGET)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rules = {json.loads(f.read_text())["rule"] for f in audit.glob("*.json")}
    assert {"benchmark", "select", "finalize", "report", "dashboard", "package"} <= rules  # the hook ran
    assert undeclared_writes(audit, work) == {}
