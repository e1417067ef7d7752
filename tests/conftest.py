from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VEGA10 = SHARED / "reference" / "rocblas-vega10"
NAVI21 = SHARED / "reference" / "rocblas-navi21"
NAVI31 = SHARED / "reference" / "rocblas-navi31"
GOLDEN = SHARED / "reference" / "tensile-golden"


# What Python and pytest themselves leave in a checkout: not the tests' doing.
BYPRODUCTS = ("__pycache__", ".pytest_cache", ".ruff_cache")


def checkout_entries(repo: Path = REPO) -> set[str] | None:
    """``git status --porcelain`` of the checkout, one entry per file, ignored files included (a lock file
    under the ignored ``results/`` is as much a leftover as a tracked file changed); None outside a git
    checkout or without git."""
    try:
        run = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "-z", "--ignored", "--untracked-files=all"],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if run.returncode != 0:
        return None
    entries = {e for e in run.stdout.decode("utf-8", "replace").split("\0") if len(e) > 3}
    return {e for e in entries if not set(Path(e[3:]).parts) & set(BYPRODUCTS)}


@pytest.fixture(scope="session", autouse=True)
def _checkout_left_as_found():
    """The suite leaves the checkout as it found it: every file a test writes goes under its tmp_path.
    Compares the checkout's status before and after the session, so a developer's own uncommitted edits
    (there before, and unchanged) never count; a demo run in the same checkout while the tests run would."""
    before = checkout_entries()
    yield
    after = checkout_entries() if before is not None else None
    if after is None:
        return
    left = sorted(after - before)
    assert not left, "the tests changed the checkout (git status --porcelain --ignored):\n" + "\n".join(left)


@pytest.fixture(scope="session")
def vega10_dir() -> Path:
    if not VEGA10.is_dir():
        pytest.skip(f"shared reference data not found at {VEGA10}")
    return VEGA10


@pytest.fixture(scope="session")
def navi21_dir() -> Path:
    if not NAVI21.is_dir():
        pytest.skip(f"shared reference data not found at {NAVI21}")
    return NAVI21


@pytest.fixture(scope="session")
def navi31_dir() -> Path:
    if not NAVI31.is_dir():
        pytest.skip(f"shared reference data not found at {NAVI31}")
    return NAVI31


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not GOLDEN.is_dir():
        pytest.skip(f"shared golden data not found at {GOLDEN}")
    return GOLDEN


@pytest.fixture(autouse=True)
def _no_paid_claude_calls(monkeypatch):
    """Tests never call the real API, even on a machine with a key: the agent tests start a local fake API
    and set a fake key themselves."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture
def api():
    """A local stand-in for the Anthropic API (tests/test_agent.py: FakeAPI), shut down after the test."""
    from test_agent import FakeAPI

    server = FakeAPI()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture(scope="session")
def fleet_runs(tmp_path_factory):
    """Three tester nights on two simulated laptops, with their bundles (tests/fleet_helpers.FleetRuns)."""
    from fleet_helpers import FleetRuns

    return FleetRuns(tmp_path_factory.mktemp("fleet"))
