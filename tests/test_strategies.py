from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from oto.gemm import Library
from oto.search.space import Parameter, Space
from oto.search.strategies import STRATEGIES, Evidence, Observation, make_strategy
from oto.search.strategies.common import history, lines, pair_lines
from oto.search.strategies.surrogate import SurrogateStrategy, switch_flips
from oto.search.tensile_space import tensile_space
from oto.tensile.legality import Limits, check
from oto.tensile.params import candidate_id, canonical

GRID = tuple(range(12))


def bowl_space(members: bool) -> Space:
    """12 x 12 x 4 grid minus a forbidden band; cost is a bowl with its minimum at (8, 3, 2)."""
    params = (Parameter("x", GRID), Parameter("y", GRID), Parameter("z", (1, 2, 4, 8)))

    def ok(c):
        return not (c["x"] == 5 and c["y"] > 2)

    if not members:
        return Space("bowl", params, constraint=ok)
    valid = frozenset(
        (i, j, k) for i in range(12) for j in range(12) for k in range(4) if ok({"x": i, "y": j, "z": 0})
    )
    return Space("bowl", params, members=valid)


def bowl_time(c) -> float:
    return 1.0 + 0.05 * (c["x"] - 8) ** 2 + 0.08 * (c["y"] - 3) ** 2 + 0.3 * abs(math.log2(c["z"]) - 2)


def run(strategy: str, space: Space, budget: int, seed: int, batch: int = 1) -> list[float]:
    s = make_strategy(strategy, seed)
    obs, seen, best = [], set(), []
    while len(obs) < budget:
        ev = Evidence(space, len(obs), sorted(obs, key=lambda o: -o.score), (), frozenset(seen))
        props = s.ask(ev, batch)
        assert props, "a strategy must propose while unseen valid configurations remain"
        for p in props:
            idx = space.index(p.params)
            assert idx is not None and space.valid(idx), p.params
            key = space.key(idx)
            assert key not in seen, "never propose a seen configuration"
            seen.add(key)
            t = bowl_time(p.params)
            obs.append(Observation(key, p.params, 1.0 / t))
            best.append(min(best[-1], t) if best else t)
    return best


def test_registry_lists_the_baseline_the_strong_strategy_and_symbolic():
    assert {"random", "surrogate", "symbolic"} <= set(STRATEGIES)
    with pytest.raises(ValueError, match="search.strategy"):
        make_strategy("nope", 0)


@pytest.mark.parametrize("members", [True, False])
def test_space_neighbours_are_valid_one_step_moves(members):
    space = bowl_space(members)
    idx = space.index({"x": 4, "y": 3, "z": 2})
    nbs = space.neighbours(idx)
    assert nbs and all(space.valid(n) for n in nbs)
    for n in nbs:
        diff = [abs(a - b) for a, b in zip(n, idx, strict=True)]
        assert sum(d > 0 for d in diff) == 1 and max(diff) == 1
    # x=5 with y=3 is forbidden, so the +x neighbour is absent
    assert space.index({"x": 5, "y": 3, "z": 2}) not in nbs
    assert space.config(idx) == {"x": 4, "y": 3, "z": 2}
    assert space.key(idx) == bowl_space(members).key(idx)  # stable across instances


@pytest.mark.parametrize("name", ["random", "surrogate"])
def test_strategies_are_seeded_and_reproducible(name):
    space = bowl_space(True)
    a = run(name, space, 20, seed=3, batch=4)
    b = run(name, bowl_space(True), 20, seed=3, batch=4)
    c = run(name, bowl_space(True), 20, seed=4, batch=4)
    assert a == b
    assert a != c


def test_surrogate_beats_random_on_a_smooth_constrained_space():
    budget = 30
    gaps = {}
    for name in ("random", "surrogate"):
        finals = [
            run(name, bowl_space(members), budget, seed)[-1] for seed in range(4) for members in (True, False)
        ]
        gaps[name] = float(np.mean(finals)) - 1.0
    assert gaps["surrogate"] < 0.5 * gaps["random"], gaps
    assert gaps["surrogate"] < 0.05


def test_surrogate_uses_prior_knowledge_from_related_problems():
    space = bowl_space(True)
    prior = []
    for x, y, z in [(8, 3, 4), (7, 3, 4), (8, 4, 4), (2, 9, 1), (0, 0, 8), (10, 10, 2), (3, 1, 2), (6, 6, 4)]:
        c = {"x": x, "y": y, "z": z}
        prior.append(Observation(f"p{x}{y}{z}", c, 1.0 / bowl_time(c)))
    ev = Evidence(space, 0, [], (), frozenset(), prior=prior)
    props = make_strategy("surrogate", 0).ask(ev, 3)
    # With no own measurement yet, the model built on the family's evidence points at the bowl's bottom.
    assert min(bowl_time(p.params) for p in props) < 1.1


def test_surrogate_gen0_on_tensile_starts_from_shipped_solutions_and_legal_neighbours():
    lib = Library.build("SB", "NN")
    seed = canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 16, "VectorWidth": 4})
    assert check(lib, seed).valid
    space = tensile_space(lib, Limits())
    ev = Evidence(space, 0, [], [seed], frozenset())
    props = make_strategy("surrogate", 1).ask(ev, 8)
    assert props[0].proposer == "seed" and canonical(props[0].params) == seed
    ids = [candidate_id(p.params) for p in props]
    assert len(set(ids)) == len(ids) == 8
    assert all(check(lib, p.params).valid for p in props)
    # gen1: with observations it moves to the model and still proposes only legal, unseen kernels
    obs = [
        Observation(i, canonical(p.params), 1.0 + 0.01 * k)
        for k, (i, p) in enumerate(zip(ids, props, strict=True))
    ]
    ev1 = Evidence(space, 1, obs[::-1], [seed], frozenset(ids))
    more = make_strategy("surrogate", 1).ask(ev1, 6)
    assert more and all(check(lib, p.params).valid and candidate_id(p.params) not in ids for p in more)
    assert space.key(space.index(seed)) == ids[0] == space.id_of(seed)


def _changed(a, b) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("members", [True, False])
def test_lines_and_pair_lines_are_valid_one_and_two_parameter_changes(members):
    space = bowl_space(members)
    idx = space.index({"x": 4, "y": 3, "z": 2})
    one = lines(space, idx)
    assert one and all(space.valid(c) and _changed(c, idx) == 1 for c in one)
    # any value of one knob, not only the adjacent one; x=5 is forbidden at y=3
    assert space.index({"x": 11, "y": 3, "z": 2}) in one
    assert space.index({"x": 5, "y": 3, "z": 2}) not in one
    two = pair_lines(space, idx, np.random.default_rng(0), limit=400)
    assert two and all(space.valid(c) and _changed(c, idx) == 2 for c in two)
    assert len(set(two)) == len(two)
    if members:  # enumerated: complete (every valid two-parameter change)
        brute = {m for m in space.all_members() if _changed(m, idx) == 2}
        assert set(two) == brute
    else:  # constraint-only: sampled, reproducibly
        assert two == pair_lines(space, idx, np.random.default_rng(0), limit=400)


def _stalled_evidence(certified: bool):
    """The incumbent A sits at the bowl's bottom with (optionally) every one-knob change measured and
    worse; B, a far configuration in another basin, was measured once."""
    space = bowl_space(True)
    a = space.index({"x": 8, "y": 3, "z": 4})
    b = space.index({"x": 1, "y": 10, "z": 1})
    pts = [a, b] + lines(space, a)[: None if certified else 6]
    obs = [Observation(space.key(p), space.config(p), 1.0 / bowl_time(space.config(p))) for p in pts]
    obs[1] = Observation(space.key(b), space.config(b), 1.0 / 9.0)  # B is bad, but its own best
    obs.sort(key=lambda o: -o.score)
    ev = Evidence(space, 1, obs, (), frozenset(o.kernel_id for o in obs))
    return space, a, b, ev


def test_local_search_certifies_the_incumbent_then_restarts_in_another_basin():
    space, a, b, ev = _stalled_evidence(certified=False)
    hist = history(ev, space)
    first, cands, kind = SurrogateStrategy()._local(hist, np.random.default_rng(0))
    assert kind == "c"  # the bowl has no on/off parameter, so nothing to flip
    assert first and all(_changed(c, a) == 1 for c in first)  # still certifying the incumbent
    assert any(_changed(c, a) == 2 for c in cands)  # two-knob escapes are candidates too

    space, a, b, ev = _stalled_evidence(certified=True)
    hist = history(ev, space)
    first, cands, _ = SurrogateStrategy()._local(hist, np.random.default_rng(0))
    # A is a certified local optimum: the certify picks restart from B, the best open start
    assert first and all(_changed(c, b) == 1 for c in first)
    assert set(first) <= set(cands)
    props = make_strategy("surrogate", 5).ask(ev, 4)
    certify = [p for p in props if p.rationale.startswith("local: certifying")]
    assert len(certify) == 1 and _changed(space.index(certify[0].params), b) == 1
    again = make_strategy("surrogate", 5).ask(ev, 4)  # a fresh process proposes the same
    assert [p.params for p in again] == [p.params for p in props]


def test_surrogate_finds_a_needle_one_knob_away_from_a_broad_basin():
    """A broad basin around (2, 2) and the optimum at (11, 2): same row, but every configuration between
    is worse, so neither one-step moves nor a smooth model lead there (the convolution cache's block
    width 256 vs 128). Certifying the incumbent's one-knob changes finds it; the GP alone needed
    178 to 300+ evaluations on these seeds."""
    space = bowl_space(True)

    def t(c):
        z = 0.05 * abs(math.log2(c["z"]) - 1)
        return (
            1.0 if (c["x"], c["y"]) == (11, 2) else 1.3 + 0.02 * ((c["x"] - 2) ** 2 + (c["y"] - 2) ** 2)
        ) + z

    for seed in range(4):
        s = make_strategy("surrogate", seed)
        obs, seen, best = [], set(), math.inf
        while len(obs) < 80 and best > 1.0:
            ev = Evidence(space, len(obs), sorted(obs, key=lambda o: -o.score), (), frozenset(seen))
            for p in s.ask(ev, 1):
                key = space.key(space.index(p.params))
                seen.add(key)
                obs.append(Observation(key, p.params, 1.0 / t(p.params)))
                best = min(best, t(p.params))
        assert best == 1.0, (seed, len(obs))


def test_power_of_two_flag_is_a_model_feature_where_a_parameter_mixes_them():
    widths = tuple(range(16, 257, 16))
    space = Space(
        "pow2",
        (
            Parameter("bx", widths),
            Parameter("by", (1, 2, 4, 8)),  # all powers of two: the rank says it already
            Parameter("tile", ((2, 4), (3, 4), (4, 4))),  # per component: (2,3,4) mixes, (4,4,4) is constant
            Parameter("shmem", (0, 1)),  # binary: no flag
            Parameter("name", ("a", "b", "c")),  # not numbers: no flag
        ),
        constraint=lambda c: True,
    )
    idx = [(widths.index(w), 0, 1, 0, 0) for w in (32, 48, 256, 240)]
    x = space.encode(idx)
    # bx rank + flag, by rank, tile's two components + flag for the first, shmem, name
    assert x.shape == (4, 2 + 1 + 2 + 1 + 1 + 1)
    assert x[:, 1].tolist() == [1.0, 0.0, 1.0, 0.0]  # 32 and 256 are powers of two, 48 and 240 are not
    assert x[:, 5].tolist() == [0.0] * 4  # tile (3, 4): 3 is not a power of two
    assert space.encode([(0, 0, 0, 0, 0)])[0, 5] == 1.0
    # The flag is a model feature only: neighbours are still one rank step away
    nbs = {space.config(n)["bx"] for n in space.neighbours(idx[0]) if n[1:] == idx[0][1:]}
    assert nbs == {16, 48}


def switch_space() -> Space:
    """x in 0..11, two on/off switches; x=11 forbids shared memory off (a constraint to respect)."""
    params = (Parameter("x", GRID), Parameter("shmem", (0, 1)), Parameter("ro", (0, 1)))
    return Space(
        "switches",
        params,
        members=frozenset((x, s, r) for x in range(12) for s in (0, 1) for r in (0, 1) if (x, s) != (11, 0)),
    )


def test_switch_flips_try_every_switch_on_the_best_configuration_of_each_setting():
    space = switch_space()
    scores = {(2, 1, 1): 1.0, (9, 0, 1): 0.8, (11, 1, 0): 0.5, (3, 1, 0): 0.4}
    obs = [Observation(space.key(p), space.config(p), s) for p, s in scores.items()]
    ev = Evidence(space, 1, obs, (), frozenset(o.kernel_id for o in obs))
    flips = switch_flips(history(ev, space))
    # champions: shmem=1 and ro=1 -> (2,1,1); shmem=0 -> (9,0,1); ro=0 -> (11,1,0)
    assert set(flips) == {(2, 0, 1), (2, 1, 0), (9, 1, 1), (9, 0, 0), (11, 1, 1)}  # (11,0,0) is invalid
    assert all(space.key(f) not in ev.seen for f in flips)
    # Once measured they are gone, and the certify picks go back to the incumbent's lines
    more = [Observation(space.key(p), space.config(p), 0.1) for p in flips]
    ev2 = Evidence(space, 2, obs + more, (), frozenset(o.kernel_id for o in obs + more))
    assert switch_flips(history(ev2, space)) == []
    certify, _, kind = SurrogateStrategy()._local(history(ev2, space), np.random.default_rng(0))
    assert kind == "c" and all(_changed(c, (2, 1, 1)) == 1 for c in certify)


def test_certify_picks_flip_switches_on_each_settings_best_before_certifying():
    """The convolution cache's trap in miniature: the incumbent has shared memory on (where read-only
    loads do nothing); the best configuration without it has read-only loads on, and turning them off
    there is the optimum. The certify pick tries exactly such flips first, whatever the GP thinks."""
    space = switch_space()
    scores = {(2, 1, 1): 1.0, (2, 1, 0): 0.99, (3, 1, 1): 0.95, (1, 1, 1): 0.9, (5, 1, 1): 0.8}
    scores |= {(6, 1, 0): 0.7, (9, 0, 1): 0.7, (0, 1, 0): 0.6, (7, 0, 1): 0.5, (4, 0, 1): 0.3}
    obs = [Observation(space.key(p), space.config(p), v) for p, v in scores.items()]
    obs.sort(key=lambda o: -o.score)
    ev = Evidence(space, 1, obs, (), frozenset(o.kernel_id for o in obs))
    props = make_strategy("surrogate", 0).ask(ev, 4)
    flips = [space.index(p.params) for p in props if p.rationale.startswith("local: switch flip")]
    assert len(flips) == 1 and flips[0] in set(switch_flips(history(ev, space)))
    assert flips[0] in {(2, 0, 1), (2, 0, 0), (9, 1, 1), (9, 0, 0)}


def bowl_priors(distance: float) -> list[Observation]:
    """Eight priors near the bowl's bottom; ``distance`` > 0: moved from another GPU's space."""
    out = []
    for x, y, z in [(8, 3, 4), (7, 3, 4), (8, 4, 4), (9, 3, 4), (8, 2, 4), (7, 4, 4), (9, 4, 4), (7, 2, 4)]:
        c = {"x": x, "y": y, "z": z}
        out.append(Observation(f"p{x}{y}{z}", c, 1.0 / bowl_time(c), distance=distance))
    return out


def test_mapped_priors_are_relevelled_by_what_those_measured_here_scored():
    """Another GPU's labels are on its own scale: once some mapped priors are measured here, every mapped
    prior's cost moves by the mean gap; priors legal here as they are keep their labels."""
    from oto.search.strategies.surrogate import relevel_mapped_priors

    space = bowl_space(True)
    mapped, native = bowl_priors(1.0)[:2], bowl_priors(0.0)[2:3]
    # the first mapped prior measured here at half its label's score: cost + log 2
    measured = Observation(mapped[0].kernel_id, mapped[0].params, mapped[0].score / 2)
    ev = Evidence(space, 1, [measured], (), frozenset(), prior=mapped + native)
    hist = history(ev, space)
    before = list(hist.prior_costs)
    assert relevel_mapped_priors(hist, 0.0) == 0.0 and hist.prior_costs == before
    shift = relevel_mapped_priors(hist, 1.0)
    assert shift == pytest.approx(math.log(2))
    assert hist.prior_costs == pytest.approx([before[0] + shift, before[1] + shift, before[2]])
    # none measured yet: nothing to relevel by
    hist0 = history(Evidence(space, 0, [], (), frozenset(), prior=mapped), space)
    assert relevel_mapped_priors(hist0, 1.0) == 0.0


@pytest.mark.parametrize("distance", [0.0, 1.0])
def test_mapped_priors_leave_the_first_batch_its_random_design(distance):
    """Mapped priors (distance > 0) get no bet of the first batch (two with ``mapped_first_bets`` 2) and
    leave the rest to the random initial design: the first batch is the cold run's; priors legal here as
    they are keep four bets and the model's picks around them."""
    space = bowl_space(True)
    prior = bowl_priors(distance)
    at = {tuple(o.params.values()) for o in prior}
    props = make_strategy("surrogate", 3).ask(Evidence(space, 0, [], (), frozenset(), prior=prior), 12)
    bets = [p for p in props if "related problem" in p.rationale]
    assert all(tuple(p.params[k] for k in "xyz") in at for p in bets)
    if distance:
        cold = make_strategy("surrogate", 3).ask(Evidence(space, 0, [], (), frozenset()), 12)
        assert [p.params for p in props] == [p.params for p in cold]
        two = make_strategy("surrogate", 3, {"mapped_first_bets": 2})
        props = two.ask(Evidence(space, 0, [], (), frozenset(), prior=prior), 12)
        assert sum("related problem" in p.rationale for p in props) == 2
        assert sum("initial design" in p.rationale for p in props) == 10
    else:
        assert len(bets) == 4
        assert not any("initial design" in p.rationale for p in props)
    # the old behaviour for mapped priors, as options
    old = make_strategy("surrogate", 3, {"mapped_first_bets": 4, "mapped_priors_in_design": True})
    props = old.ask(Evidence(space, 0, [], (), frozenset(), prior=bowl_priors(1.0)), 12)
    assert sum("related problem" in p.rationale for p in props) == 4
    assert not any("initial design" in p.rationale for p in props)


def test_a_first_bet_on_another_gpus_prior_says_whose_it_is():
    """A warm start's priors are labelled (``Observation.source``, oto.search.evidence.prior_label), and a
    first bet on one carries the label into its proposal's why, so candidates.yaml says which GPU's registry
    a kernel came from; the family's own priors (no label) read as before."""
    space = bowl_space(True)
    label = "simulated prior from gfx90c's registry (another GPU)"
    foreign = [replace(o, source=label) for o in bowl_priors(0.0)]
    props = make_strategy("surrogate", 3).ask(Evidence(space, 0, [], (), frozenset(), prior=foreign), 12)
    bets = [p.rationale for p in props if "related problem" in p.rationale]
    assert bets == [f"best kernel of a related problem (transfer: {label})"] * 4
    props = make_strategy("surrogate", 3).ask(
        Evidence(space, 0, [], (), frozenset(), prior=bowl_priors(0)), 12
    )
    bets = [p.rationale for p in props if "related problem" in p.rationale]
    assert bets == ["best kernel of a related problem (transfer)"] * 4


def test_a_configuration_that_leaves_a_parameter_out_indexes_at_its_default():
    """As in a proposal, a parameter left out takes its default (Tensile's canonical form omits ISA knobs at
    their default); a value the space lacks still indexes nowhere."""
    space = Space("d", (Parameter("x", (1, 2, 4)), Parameter("y", (8, 16), default=16)))
    assert space.index({"x": 2}) == (1, 1)
    assert space.index({"y": 8}) == (0, 0)
    assert space.index({"x": 3}) is None


def test_mapped_priors_can_rank_the_shipped_seeds_neighbours():
    """mapped_rank_neighbours (an option, off by default): the first generation takes the shipped seed's
    one-knob neighbours in the order a model of the mapped priors gives them (the donor's ranking inside this
    GPU's own region), not the space's order; the priors themselves are not proposed. Off, the first
    generation is the cold run's."""
    space = bowl_space(True)
    seed = {"x": 6, "y": 2, "z": 4}
    # another GPU's kernels on both sides of the seed along x, better the larger x
    prior = [
        Observation(f"p{x}{y}", {"x": x, "y": y, "z": 4}, 0.1 * x, distance=1.0)
        for x in (2, 3, 9, 10)
        for y in (1, 2, 3)
    ]
    ev = Evidence(space, 0, [], [seed], frozenset(), prior=prior)
    on = {"mapped_first_bets": 0, "mapped_rank_neighbours": True}
    ranked = [p.params for p in make_strategy("surrogate", 0, on).ask(ev, 4)]
    plain = [p.params for p in make_strategy("surrogate", 0).ask(ev, 4)]  # the default: seed by seed, as cold
    cold = [
        p.params for p in make_strategy("surrogate", 0).ask(Evidence(space, 0, [], [seed], frozenset()), 4)
    ]
    assert plain == cold
    assert ranked[0] == plain[0] == seed
    assert ranked[1] == {**seed, "x": 7} != plain[1]
    assert all(sum(p[k] != seed[k] for k in seed) == 1 for p in ranked[1:])  # one-knob neighbours
    at = {tuple(o.params.values()) for o in prior}
    assert not any(tuple(p.values()) in at for p in ranked)


def test_mapped_priors_can_stay_out_of_the_model():
    """mapped_priors_in_model false: the mapped priors' labels do not shape the Gaussian process, so scaling
    them changes no proposal of a later generation; in the model it does."""
    space = bowl_space(True)
    measured = [{"x": x, "y": y, "z": 2} for x, y in [(2, 2), (4, 6), (6, 9), (10, 1), (1, 10), (3, 3)]]
    obs = sorted(
        (Observation(f"m{i}", c, 1.0 / bowl_time(c)) for i, c in enumerate(measured)), key=lambda o: -o.score
    )
    seen = frozenset(o.kernel_id for o in obs)
    scaled = [Observation(o.kernel_id, o.params, o.score * 10, distance=1.0) for o in bowl_priors(1.0)]

    def asked(options, prior):
        ev = Evidence(space, 1, obs, (), seen, prior=prior)
        return [p.params for p in make_strategy("surrogate", 2, options).ask(ev, 6)]

    out = {"mapped_priors_in_model": False, "initial_design": 1}
    assert asked(out, bowl_priors(1.0)) == asked(out, scaled)
    inside = {"initial_design": 1, "mapped_prior_trust": False}
    assert asked(inside, bowl_priors(1.0)) != asked(inside, scaled)


def test_spearman_ranks_ties_at_their_mean():
    from oto.search.strategies.surrogate import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1, 1], [1, 2, 3, 4]) == 0.0  # a constant side: no agreement
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)  # ties at their mean rank


def _bowl_measured(n: int) -> list[Observation]:
    """``n`` kernels of the bowl measured on this GPU, best first."""
    rng = np.random.default_rng(5)
    space = bowl_space(True)
    members = sorted(space.all_members())
    picks = [space.config(members[int(i)]) for i in rng.choice(len(members), size=n, replace=False)]
    obs = [Observation(f"m{i}", c, 1.0 / bowl_time(c)) for i, c in enumerate(picks)]
    return sorted(obs, key=lambda o: -o.score)


def _donor(agrees: bool) -> list[Observation]:
    """Another GPU's kernels spread over the bowl, moved onto this space (distance 1), labelled by the bowl
    (its ranking agrees with this GPU's) or by the bowl upside down (it does not)."""
    grid = [{"x": x, "y": y, "z": z} for x in (0, 3, 6, 9, 11) for y in (0, 3, 6, 9, 11) for z in (1, 4)]
    return [
        Observation(f"d{i}", c, (1.0 / bowl_time(c)) if agrees else bowl_time(c), distance=1.0)
        for i, c in enumerate(grid)
    ]


def test_mapped_prior_trust_is_the_rank_agreement_with_this_gpus_measurements():
    """Unknown before six measurements; near 1 for a donor whose ranking is this GPU's; 0 for one whose
    ranking is the opposite, and for an agreement no better than chance (the z threshold)."""
    from oto.search.strategies.surrogate import mapped_prior_trust

    space = bowl_space(True)

    def trust(prior, n, z=0.0):
        return mapped_prior_trust(
            history(Evidence(space, 1, _bowl_measured(n), (), frozenset(), prior=prior), space), z
        )

    assert trust(_donor(True), 5) is None
    assert trust(_donor(True)[:1], 12) is None  # one mapped prior ranks nothing
    assert trust(_donor(True), 12) > 0.7
    assert trust(_donor(False), 12) == 0.0
    assert trust(_donor(True), 12, z=40.0) == 0.0  # 40 standard errors: no agreement is that sure
    native = [Observation(o.kernel_id, o.params, o.score) for o in _donor(False)]  # legal here as they are
    assert trust(native, 12) is None  # trust weighs mapped priors only


def test_mapped_priors_that_earn_no_trust_leave_the_run_as_cold():
    """A donor whose ranking disagrees with this GPU's measurements changes no proposal: the run asks what a
    cold run would from the same evidence. One whose ranking agrees stays in the model and moves the
    proposals; with the trust off, the disagreeing donor moves them too."""
    space = bowl_space(True)
    obs = _bowl_measured(12)
    seen = frozenset(o.kernel_id for o in obs)

    def asked(prior, options=None):
        ev = Evidence(space, 1, obs, (), seen, prior=prior)
        return [p.params for p in make_strategy("surrogate", 4, options).ask(ev, 8)]

    cold = asked([])
    assert asked(_donor(False)) == cold
    assert asked(_donor(True)) != cold
    assert asked(_donor(False), {"mapped_prior_trust": False}) != cold
