"""Bundles from remote storage, through Snakemake's storage plugins: ``oto merge s3://bucket/prefix`` runs
the small workflow ``fetch.snakefile`` (the plugin retrieves the folder; the rule keeps its bundles) into a
staging folder, and the merge reads the fetched files like a local folder. Any storage plugin whose URL scheme
Snakemake recognises works (S3 and S3-compatible servers with snakemake-storage-plugin-s3); credentials and
endpoints go to the plugin (``--storage-s3-endpoint-url`` … after ``--``, or ``SNAKEMAKE_STORAGE_S3_*``
variables), never to oto."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

FETCH_WORKFLOW = Path(__file__).with_name("fetch.snakefile")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://")


class FetchError(RuntimeError):
    pass


def is_remote(source: str) -> bool:
    return bool(_URL.match(source)) and not source.startswith("file://")


def fetch(
    source: str, staging: Path, snakemake_args: Sequence[str] = (), timeout: float | None = None
) -> Path:
    """Fetch every ``*.oto.tar.gz`` under the storage URL ``source`` into ``staging/bundles``; return it."""
    staging.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(FETCH_WORKFLOW),
        "--directory",
        str(staging),
        "--cores",
        "1",
        "--config",
        f"source={source}",
        "--nolock",
        "--quiet",
        "rules",
        *snakemake_args,
    ]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-15:])
        raise FetchError(f"fetching bundles from {source} failed (snakemake exit {out.returncode}):\n{tail}")
    (staging / "bundles").mkdir(exist_ok=True)
    return staging / "bundles"
