import os
import subprocess
import time
from pathlib import Path

import pytest
from oto.config import ConfigError, validate_config
from oto.runlock import clear_stale_locks


def test_defaults_filled_and_errors_name_field():
    cfg = validate_config({"arch": "gfx90c", "families": ["DB"]}, "c.yaml")
    assert cfg["max_generations"] == 8 and cfg["search"]["convergence"]["patience"] == 2
    with pytest.raises(ConfigError, match=r"c.yaml: field 'benchmark.repetitions'"):
        validate_config({"arch": "gfx90c", "families": ["DB"], "benchmark": {"repetitions": 0}}, "c.yaml")
    with pytest.raises(ConfigError, match=r"field '<top level>'"):
        validate_config({"arch": "gfx90c", "families": ["DB"], "typo": 1}, "c.yaml")


def test_stale_locks_removed_only_when_no_run_is_alive(tmp_path):
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / ".snakemake" / "oto-runs").mkdir()
    (tmp_path / ".snakemake" / "oto-runs" / str(dead.pid)).touch()
    assert clear_stale_locks(tmp_path, pid=os.getpid()) == [locks / "0.input.lock"]
    # A live snakemake process keeps its locks.
    (locks / "1.input.lock").write_text("x")
    live = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 30"])
    try:
        deadline = time.time() + 5
        while b"snakemake" not in Path(f"/proc/{live.pid}/cmdline").read_bytes() and time.time() < deadline:
            time.sleep(0.01)  # until bash has exec'd
        (tmp_path / ".snakemake" / "oto-runs" / str(live.pid)).touch()
        assert clear_stale_locks(tmp_path, pid=os.getpid() + 100000) == []
        assert (locks / "1.input.lock").exists()
    finally:
        live.kill()
