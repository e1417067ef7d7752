import numpy as np
from oto.deck.tuning_sizes import tuning_indices
from oto.gemm import Library
from oto.search.space import Space
from oto.search.strategies import Evidence, Observation, make_strategy
from oto.search.tensile_space import tensile_space
from oto.tensile.legality import Limits
from oto.tensile.params import candidate_id, canonical


def test_tuning_indices_spread_and_deterministic():
    sizes = [[m, n, 1, k] for m in (16, 64, 256, 1024, 4096) for n in (16, 256, 4096) for k in (64, 1024)]
    idx = tuning_indices(sizes, 6)
    assert idx == tuning_indices(sizes, 6) and len(set(idx)) == 6
    assert int(np.argmax([np.prod(s) for s in sizes])) in idx
    assert tuning_indices(sizes[:4], 10) == [0, 1, 2, 3]


def _evidence(gen, observations=(), seen=frozenset()):
    seeds = [canonical({"ThreadTile": [4, 4], "WorkGroup": [16, 16, 1], "DepthU": 8, "VectorWidth": 2})]
    space = tensile_space(Library.parse("Cijk_Ailk_Bljk_DB"), Limits())
    narrow = Space(
        "narrow",
        space.parameters,
        constraint=lambda p: space.valid(space.index(p)) and p["ThreadTile"][0] * p["WorkGroup"][0] <= 256,
        identify=space.identify,
    )
    return Evidence(narrow, gen, list(observations), seeds, seen)


def test_symbolic_is_seeded_legal_and_new():
    strat = make_strategy("symbolic", 7)
    first = strat.ask(_evidence(0), 10)
    assert [p.params for p in first] == [p.params for p in make_strategy("symbolic", 7).ask(_evidence(0), 10)]
    assert first[0].proposer == "seed"
    ids = [candidate_id(p.params) for p in first]
    assert len(set(ids)) == len(ids)
    assert all(p.params["ThreadTile"][0] * p.params["WorkGroup"][0] <= 256 for p in first)
    obs = [Observation(ids[1], first[1].params, 1.3, 4)]
    nxt = strat.ask(_evidence(1, obs, frozenset(ids)), 10)
    assert nxt and not ({candidate_id(p.params) for p in nxt} & set(ids))
    assert any(p.rationale.startswith("random") for p in nxt)
