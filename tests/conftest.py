from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
VEGA10 = SHARED / "reference" / "rocblas-vega10"
NAVI21 = SHARED / "reference" / "rocblas-navi21"
NAVI31 = SHARED / "reference" / "rocblas-navi31"
GOLDEN = SHARED / "reference" / "tensile-golden"


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
