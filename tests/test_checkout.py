"""The suite's check that tests leave the checkout as they found it (tests/conftest.py): what it sees."""

from __future__ import annotations

import subprocess

import pytest
from conftest import checkout_entries


def test_the_checkout_check_sees_new_files_ignored_or_not_and_skips_pythons_own(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available")
    (tmp_path / ".gitignore").write_text("results/\n__pycache__/\n")
    (tmp_path / "edited.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    (tmp_path / "edited.py").write_text("x = 2\n")  # a developer's own edit
    before = checkout_entries(tmp_path)
    assert before == {" M edited.py"}
    (tmp_path / "results" / "gfx90c" / "tensile").mkdir(parents=True)
    (tmp_path / "results" / "gfx90c" / "tensile" / "probe.lock").write_text("")  # ignored, still a leftover
    (tmp_path / "report.html").write_text("")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "edited.cpython-311.pyc").write_bytes(b"")  # Python's, not a test's
    assert checkout_entries(tmp_path) - before == {"!! results/gfx90c/tensile/probe.lock", "?? report.html"}
    assert checkout_entries(tmp_path / "nowhere") is None
