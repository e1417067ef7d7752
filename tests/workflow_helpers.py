"""Run the real workflow in a scratch copy of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COPIED = ("Snakefile", "rules", "scripts", "config", "arch_profiles", "profiles", "workflow")

# Small enough to run in seconds, big enough to exercise every stage and the generation chain.
FAST_CONFIG = {
    "arch": "gfx90c",
    "families": ["DB"],
    "patterns": ["NN", "NT"],
    "max_generations": 2,
    "seed": 3,
    "search": {"candidates_per_generation": 6},
    "benchmark": {"tuning_sizes": 8, "repetitions": 3, "bootstrap": 100},
}


def make_workdir(tmp: Path, config: dict | None = None) -> Path:
    work = tmp / "oto"
    work.mkdir()
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, work / name)
    if config is not None:
        (work / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    return work


def snakemake(work: Path, *args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kw,
    )


def job_counts(stdout: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table."""
    counts: dict[str, int] = {}
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Job stats:"):
            for row in lines[i + 3 :]:
                parts = row.split()
                if len(parts) != 2 or not parts[1].isdigit():
                    break
                counts[parts[0]] = int(parts[1])
            break
    return counts


def plan_counts(text: str) -> dict[str, int]:
    """Parse the jobs per stage of oto's dry-run plan (oto.run.dry_run.plan_lines)."""
    counts: dict[str, int] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split() == ["stage", "jobs"]:
            for row in lines[i + 1 :]:
                parts = row.split()
                if len(parts) != 2 or not parts[1].isdigit():
                    break
                counts[parts[0]] = int(parts[1])
            break
    return counts
