"""The emitted tensile_config.yaml (for people) and the tensile backend agree on the APU settings."""

import yaml
from oto.deck.sources import load_deck
from oto.hardware.profile import load_profile
from oto.tensile.benchmark_config import APU_GLOBAL_PARAMETERS, render_benchmark_yaml
from oto.tensile.params import candidate_id, canonical
from workflow_helpers import REPO


def test_template_global_parameters_match_the_backend():
    deck = load_deck("manifest").libraries["Cijk_Ailk_Bljk_DB"]
    profile = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
    params = canonical(deck.solutions[0]["params"])
    kernels = [{"id": candidate_id(params), "params": params, "roles": ["candidate"]}]
    doc = yaml.safe_load(render_benchmark_yaml(deck, profile, 0, kernels, [[64, 64, 1, 256]], 5))
    emitted = doc["GlobalParameters"]
    assert emitted["NumBenchmarks"] == 5 and emitted["Architecture"] == "gfx90c"
    for key, value in APU_GLOBAL_PARAMETERS.items():
        assert emitted[key] == value, key
    groups = doc["BenchmarkProblems"][0][1]["ForkParameters"][0]["Groups"][0]
    assert groups == [params]
    assert doc["BenchmarkProblems"][0][1]["BenchmarkFinalParameters"][0]["ProblemSizes"] == [
        {"Exact": [64, 64, 1, 256]}
    ]
