"""bench/agent_ab.py: its no-key path (says it cannot run here), its symbolic arm, and both arms at equal
budget against the local fake API."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from oto.agent.validate import coerce
from test_agent import GOOD, KEY, FakeAPI, message, tool_use

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "agent_ab.py"


def _load():
    spec = importlib.util.spec_from_file_location("agent_ab", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["agent_ab"] = mod  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_without_a_key_it_says_it_cannot_run_here():
    env = {k: v for k, v in __import__("os").environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0
    assert "cannot run here: ANTHROPIC_API_KEY is not set" in proc.stdout
    assert "final" not in proc.stdout  # nothing was measured


def test_symbolic_only_runs_the_harness_without_a_key(monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    ab = _load()
    assert ab.main(["--symbolic-only", "--seeds", "2", "--generations", "2", "--per-generation", "4",
                    "--sizes", "4", "--spaces", "sim", "--libraries", "Cijk_Ailk_Bljk_SB"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "cannot run here" in out
    sym = next(
        line for line in out.splitlines() if line.startswith("sim:Cijk_Ailk_Bljk_SB") and "symbolic " in line
    )
    final = float(sym.split()[2])
    assert final >= 1.0  # the search starts at the shipped kernels, so never below the spoof floor
    assert "agent+symbolic  n/a (no key)" in out


def test_both_arms_spend_the_same_benchmark_budget(monkeypatch, tmp_path):
    api = FakeAPI()
    api.default = (
        200,
        message([tool_use({"proposals": [{"params": GOOD, "rationale": "same each time"}]})]),
        {},
        0,
    )
    api.thread.start()
    try:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        ab = _load()
        problem = ab.SimProblem(
            "Cijk_Ailk_Bljk_SB", ab.load_profile(REPO / "arch_profiles" / "gfx90c.yaml"), 0, 4
        )
        settings = ab.AgentSettings(base_url=api.url, backoff_s=0, max_retries=0)
        agent = ab.make_agent(settings, KEY, tmp_path)
        base = ab.run_arm(problem, 0, 3, 5, None, 0)
        mixed = ab.run_arm(problem, 0, 3, 5, agent, 2)
    finally:
        api.server.shutdown()
        api.server.server_close()
    assert len(base.results) == len(mixed.results) == 15  # equal budget
    assert mixed.agent_accepted == 1 and mixed.agent_rejected == 2  # later replies repeat a measured kernel
    assert len(api.requests) == 3 and mixed.tokens > 0
    assert KEY not in "".join(p.read_text() for p in tmp_path.iterdir())


def test_replay_space_validates_against_the_recorded_configurations():
    path = REPO.parent / "shared" / "reference" / "replay" / "convolution_A4000.json.gz"
    if not path.exists():
        pytest.skip("shared replay data not found")
    ab = _load()
    problem = ab.ReplayProblem(path)
    arm = ab.run_arm(problem, 1, 2, 6, None, 0)
    assert len(arm.results) == 12 and 0 < arm.curve[-1] <= 1.0 and arm.curve[0] <= arm.curve[1]
    first = next(iter(problem.cache.values()))
    cfg = {k: first[k] for k in problem.keys}
    assert coerce(problem.space, cfg)[0] == cfg
    assert "out of range" in coerce(problem.space, {**cfg, "block_size_x": 17})[1]
    absent = next(
        c
        for c in (
            {**cfg, "block_size_x": x, "block_size_y": y}
            for x in range(16, 257, 16)
            for y in (1, 2, 4, 8, 16)
        )
        if problem.key(c) not in problem.cache
    )
    assert "restrictions" in coerce(problem.space, absent)[1]
