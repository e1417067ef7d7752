import pytest
from oto.run.plan import PlanError, plan_run

BASE = {"arch": "gfx90c", "families": ["DB"]}


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    from workflow_helpers import REPO

    monkeypatch.chdir(REPO)  # arch_profiles/ is resolved from the working directory, as in Snakemake


def test_manifest_plan_selects_families_and_patterns():
    plan = plan_run({**BASE, "families": ["DB", "ZB_GB"], "patterns": ["NN"]}, ["c.yaml"])
    assert plan.libraries == ["Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bljk_ZB_GB"]
    assert plan.logic_prefix == "gfx90c" and plan.max_generations == 8
    everything = plan_run({**BASE, "families": "all"})
    assert len(everything.libraries) == 46 and len(everything.families) == 13


def test_gfx900_label_names_logic_like_vega10():
    assert plan_run({**BASE, "package": {"label": "gfx900"}}).logic_prefix == "vega10"


def test_logic_folder_and_installed_rocblas_sources(vega10_dir, golden_dir):
    plan = plan_run({**BASE, "families": "all", "deck": {"source": "logic", "path": str(vega10_dir)}})
    assert len(plan.libraries) == 46
    rocblas = golden_dir / "tcl" / "gfx900-lazy-msgpack" / "DB_NN"
    plan = plan_run({**BASE, "deck": {"source": "rocblas", "path": str(rocblas)}})
    assert plan.libraries == ["Cijk_Ailk_Bljk_DB"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**BASE, "families": ["NOPE"]}, "field 'families': NOPE"),
        ({**BASE, "arch": "gfx1234"}, "field 'arch'"),
        ({**BASE, "deck": {"source": "logic", "path": None}}, "field 'deck.path'"),
        ({**BASE, "deck": {"source": "rocblas", "path": "/nonexistent"}}, "field 'deck.path'"),
        ({**BASE, "max_generations": "eight"}, "field 'max_generations'"),
    ],
)
def test_bad_plans_name_the_field(config, message):
    with pytest.raises(PlanError, match=message):
        plan_run(config, ["config/x.yaml"])


def test_a_target_outside_the_selection_names_the_config_fix():
    plan = plan_run({**BASE, "families": ["DB"], "patterns": ["NN", "NT"]})
    assert plan.not_selected(family="DB") is None
    assert plan.not_selected(library="Cijk_Ailk_Bljk_DB") is None
    assert "--config 'families=[DB,SB]'" in plan.not_selected(family="SB")
    assert "not in the deck" in plan.not_selected(family="QQ")
    assert "--config 'families=[DB,SB]'" in plan.not_selected(library="Cijk_Ailk_Bljk_SB")
    why = plan.not_selected(library="Cijk_Alik_Bljk_DB")  # TN: the family is selected, the pattern is not
    assert "pattern TN" in why and "--config 'patterns=[NN,NT,TN]'" in why
