"""The Snakemake files are formatted as snakefmt formats them (pyproject.toml's [tool.snakefmt]), as the
Snakemake workflows oto follows check in their CI; `snakemake --lint` is tests/test_workflow.py's."""

from __future__ import annotations

import subprocess
import sys

import pytest
from workflow_helpers import REPO

pytest.importorskip("snakefmt", reason="snakefmt is in the test extras: pip install -e '.[test]'")
SNAKEMAKE_FILES = ("Snakefile", "rules", "workflow/oto/fleet/fetch.snakefile")


def test_the_snakemake_files_are_snakefmt_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "--diff", *SNAKEMAKE_FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (
        f"run `snakefmt {' '.join(SNAKEMAKE_FILES)}`:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
    )
