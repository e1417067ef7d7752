"""The one strategy contract, checked for every registered strategy: on a recorded Kernel Tuner space and on
the simulated Tensile space oto tunes. Options are declared and validated; ``oto replay`` runs every one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from oto.cli import main as cli
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
from oto.deck.tuning_sizes import shipped_seeds, tuning_indices
from oto.gemm import Library
from oto.hardware.simulated.performance import SimGPU
from oto.run.plan import PlanError, plan_run
from oto.search.space import Space
from oto.search.strategies import STRATEGIES, Evidence, Observation, StrategyError, make_strategy
from oto.search.tensile_space import tensile_space
from oto.search.tuning_cache import load_cache
from oto.tensile.legality import Limits
from test_replay import make_cache

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT.parent / "shared" / "reference" / "replay" / "gemm_RTX_2080_Ti.json.gz"
PROFILE = yaml.safe_load((ROOT / "arch_profiles" / "gfx90c.yaml").read_text())
LIBRARY = "Cijk_Ailk_Bljk_SB"


class RecordedSpace:
    """A Kernel Tuner cache: the recorded GEMM space when ../shared is present, else a small synthetic one."""

    def __init__(self, tmp: Path):
        path = REPLAY if REPLAY.is_file() else make_cache(tmp / "cache.json")
        self.cache = load_cache(path)
        self.space: Space = self.cache.space
        self.seeds: list = []

    def score(self, params) -> float | None:
        t = self.cache.times.get(self.space.index(params))  # the recorded mean: the same on every call
        return None if t is None else 1.0 / t


class TensileSpace:
    """One library of the shipped deck on the simulated gfx90c, scored noise-free against the spoof floor."""

    def __init__(self, tmp: Path):
        deck = read_manifest(SHIPPED_MANIFEST).libraries[LIBRARY]
        self.library = Library.parse(LIBRARY)
        self.space = tensile_space(self.library, Limits.from_profile(PROFILE))
        self.seeds = shipped_seeds(deck, 8)
        self.gpu = SimGPU(PROFILE, seed=1)
        sizes = np.asarray([deck.sizes[i][:4] for i in tuning_indices(deck.sizes, 8)], dtype=float).T
        self.sizes = sizes
        self.ref = self._times(deck.reference_params(tuning_indices(deck.sizes, 8)[0]))

    def _times(self, params) -> np.ndarray:
        f, pat = self.library.family, self.library.pattern
        return self.gpu.true_time_us(f, params, *self.sizes, pat)

    def score(self, params) -> float | None:
        status, _, _ = self.gpu.build_outcome(self.library.family, params, self.library.pattern)
        if status != "ok":
            return None
        return float(np.exp(np.mean(np.log(self.ref / self._times(params)))))


@pytest.fixture(params=["recorded", "tensile"])
def problem(request, tmp_path):
    return RecordedSpace(tmp_path) if request.param == "recorded" else TensileSpace(tmp_path)


def _loop(name: str, problem, generations: int, per_generation: int, seed: int = 0):
    """The workflow's loop in miniature: ask, measure, hand everything back as evidence."""
    strategy = make_strategy(name, seed)
    obs: list[Observation] = []
    seen: set[str] = set()
    asked = []
    for gen in range(generations):
        ev = Evidence(
            problem.space,
            gen,
            sorted(obs, key=lambda o: -(o.score or 0.0)),
            problem.seeds,
            frozenset(seen),
        )
        proposals = strategy.ask(ev, per_generation)
        asked.append(proposals)
        assert len(proposals) <= per_generation
        ids = []
        for p in proposals:
            idx = problem.space.index(p.params)
            assert idx is not None and problem.space.valid(idx), (name, p.params)
            kid = problem.space.key(idx)
            assert kid not in seen, f"{name} proposed an already measured configuration"
            assert isinstance(p.proposer, str) and p.proposer and isinstance(p.rationale, str) and p.rationale
            ids.append(kid)
        assert len(set(ids)) == len(ids), f"{name} proposed one configuration twice in a generation"
        for p, kid in zip(proposals, ids, strict=True):
            seen.add(kid)
            obs.append(Observation(kid, p.params, problem.score(p.params)))
    return asked, obs


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_proposes_valid_new_configurations_deterministically(name, problem):
    asked, obs = _loop(name, problem, generations=4, per_generation=6)
    assert sum(len(a) for a in asked) == 24, "a strategy must fill its slots while the space is not exhausted"
    again, _ = _loop(name, problem, generations=4, per_generation=6)
    assert [[p.params for p in a] for a in asked] == [[p.params for p in a] for a in again], "not seeded"
    other, _ = _loop(name, problem, generations=4, per_generation=6, seed=1)
    assert [[p.params for p in a] for a in asked] != [[p.params for p in a] for a in other]
    assert any(o.score is not None and math.isfinite(o.score) for o in obs)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_declares_its_options_and_validates_them(name):
    cls = STRATEGIES[name]
    assert not hasattr(cls, "tell"), "the contract is ask(evidence, n) alone"
    for o in cls.options:
        assert o.doc and o.name and o.check(o.default, "x") == o.default
    assert make_strategy(name, 0).settings == {o.name: o.default for o in cls.options}
    with pytest.raises(StrategyError, match=rf"field 'search.options.bogus': strategy '{name}' has no such"):
        make_strategy(name, 0, {"bogus": 1})
    for o in cls.options:
        wrong = "text" if not isinstance(o.default, str) else 3
        with pytest.raises(StrategyError, match=rf"field 'search.options.{o.name}'"):
            make_strategy(name, 0, {o.name: wrong})


def test_options_change_what_a_strategy_does():
    tensile = TensileSpace(Path("."))
    ev = Evidence(tensile.space, 0, (), tensile.seeds, frozenset())
    few = make_strategy("random", 0, {"seed_share": 0.0}).ask(ev, 6)
    many = make_strategy("random", 0, {"seed_share": 1.0}).ask(ev, 6)
    assert sum(p.proposer == "seed" for p in few) == 1 < sum(p.proposer == "seed" for p in many)
    with pytest.raises(StrategyError, match="rotation"):
        make_strategy("surrogate", 0, {"rotation": "lx"})


def test_bad_strategy_options_fail_the_dry_run_naming_the_field():
    cfg = {
        "arch": "gfx90c",
        "families": ["DB"],
        "search": {"strategy": "symbolic", "options": {"parents": 0}},
    }
    with pytest.raises(PlanError, match=r"c.yaml: field 'search.options.parents': 0 is below the minimum 1"):
        plan_run(cfg, ["c.yaml"])
    cfg["search"]["options"] = {"parents": 2}
    assert plan_run(cfg, ["c.yaml"]).config["search"]["options"] == {"parents": 2}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_oto_replay_runs_every_strategy(name, tmp_path, capsys):
    cache = make_cache(tmp_path / "c.json")
    out = tmp_path / "out.json"
    assert (
        cli(["replay", str(cache), "--budget", "12", "--seeds", "2", "--strategy", name, "--json", str(out)])
        == 0
    )
    doc = json.loads(out.read_text())
    assert doc["summary"]["strategy"] == name and len(doc["seeds"]) == 2
    assert all(len(s["best_fraction"]) == 12 for s in doc["seeds"])
    assert name in capsys.readouterr().out
