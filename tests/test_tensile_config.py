"""The emitted tensile_config.yaml (for people) and the tensile backend agree on the APU settings."""

import yaml
from oto.arch import load_profile
from oto.backends.tensile import APU_GLOBAL_PARAMETERS
from oto.deck import load_deck
from oto.stages.emit import render_tensile_config
from oto.tensile_params import candidate_id, canonical
from workflow_helpers import REPO


def test_template_global_parameters_match_the_backend():
    deck = load_deck("manifest").libraries["Cijk_Ailk_Bljk_DB"]
    profile = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
    params = canonical(deck.solutions[0]["params"])
    kernels = [{"id": candidate_id(params), "params": params, "roles": ["candidate"]}]
    doc = yaml.safe_load(render_tensile_config(deck, profile, 0, kernels, [[64, 64, 1, 256]], 5))
    emitted = doc["GlobalParameters"]
    assert emitted["NumBenchmarks"] == 5 and emitted["Architecture"] == "gfx90c"
    for key, value in APU_GLOBAL_PARAMETERS.items():
        assert emitted[key] == value, key
    groups = doc["BenchmarkProblems"][0][1]["ForkParameters"][0]["Groups"][0]
    assert groups == [params]
    assert doc["BenchmarkProblems"][0][1]["BenchmarkFinalParameters"][0]["ProblemSizes"] == [
        {"Exact": [64, 64, 1, 256]}
    ]
