"""Shards: the deck splits by library name (a hash, not a position), so n testers cover it once each and a
library never moves when the deck changes; the plan tunes only the configured shard."""

from __future__ import annotations

import pytest
from oto.config import ConfigError, validate_config
from oto.deck.shards import Shard, ShardError, shard_index
from oto.deck.sources import SHIPPED_MANIFEST, read_manifest
from oto.run.plan import PlanError, plan_run
from workflow_helpers import FAST_CONFIG, REPO, make_workdir, snakemake

DECK = sorted(read_manifest(SHIPPED_MANIFEST).libraries)


def test_parse_and_refuse():
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard.parse(" 3 / 5 ")) == "3/5"
    for bad in ("0/4", "5/4", "a/b", "2/0", "2", "-1/3"):
        with pytest.raises(ShardError):
            Shard.parse(bad)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 8])
def test_n_shards_cover_the_deck_once(n):
    shards = [Shard(i, n).select(DECK) for i in range(1, n + 1)]
    assert sorted(lib for s in shards for lib in s) == DECK  # every library once, none twice
    if n <= 4:
        assert all(shards)  # 46 libraries: no empty shard up to 4 testers


def test_a_library_keeps_its_shard_when_the_deck_changes():
    n = 4
    before = {lib: shard_index(lib, n) for lib in DECK}
    changed = DECK[5:] + ["Cijk_Ailk_Bljk_XYZ_NEW", "Cijk_Alik_Bljk_HB_NEW"]  # some gone, some added
    after = {lib: i for i in range(1, n + 1) for lib in Shard(i, n).select(changed)}
    assert all(after[lib] == before[lib] for lib in DECK[5:])


def test_the_plan_tunes_only_its_shard(monkeypatch):
    monkeypatch.chdir(REPO)
    full = plan_run({"arch": "gfx90c", "families": "all"})
    parts = [plan_run({"arch": "gfx90c", "families": "all", "shard": f"{i}/3"}) for i in (1, 2, 3)]
    assert sorted(lib for p in parts for lib in p.libraries) == full.libraries
    assert all(p.shard.count == 3 for p in parts) and parts[1].shard.index == 2
    for p in parts:  # a family keeps only its libraries of the shard; empty families drop out
        assert all(
            libs and all(Shard(p.shard.index, 3).holds(x) for x in libs) for libs in p.families.values()
        )


def test_an_empty_or_malformed_shard_fails_naming_the_field(monkeypatch):
    monkeypatch.chdir(REPO)
    one = {"arch": "gfx90c", "families": ["DB"], "patterns": ["NN"]}
    owner = shard_index("Cijk_Ailk_Bljk_DB", 3)
    empty = next(i for i in (1, 2, 3) if i != owner)
    with pytest.raises(PlanError, match=rf"field 'shard': shard {empty}/3 holds none of the 1 selected"):
        plan_run({**one, "shard": f"{empty}/3"})
    with pytest.raises(ConfigError, match="field 'shard'"):
        validate_config({**one, "shard": "half"})
    with pytest.raises(PlanError, match="field 'shard'.*between 1 and n"):
        plan_run({**one, "shard": "4/3"})


def test_a_dry_run_of_a_shard_plans_only_its_library(tmp_path):
    work = make_workdir(tmp_path, FAST_CONFIG)
    mine = Shard(1, 2).select(["Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB"])
    other = Shard(2, 2).select(["Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB"])
    proc = snakemake(work, "-n", "--logger-oto-full", "--config", "shard=1/2")  # Snakemake's listing
    assert proc.returncode == 0, proc.stderr
    assert all(f"results/gfx90c/{lib}/final.yaml" in proc.stdout for lib in mine)
    assert not any(f"results/gfx90c/{lib}/" in proc.stdout for lib in other)


def test_the_testers_config_and_oto_shards(monkeypatch, capsys):
    import yaml
    from oto.fleet.tester import shards_main

    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config" / "tester.yaml").read_text())
    plan = plan_run({**config, "shard": "2/4"}, ["config/tester.yaml"])
    assert plan.libraries == Shard(2, 4).select(DECK)
    assert shards_main(["4"]) == 0
    out = capsys.readouterr().out
    counts = [int(line.split(": ")[1].split()[0]) for line in out.splitlines() if line.startswith("shard ")]
    assert len(counts) == 4 and sum(counts) == len(DECK)
    assert f"shard 2/4: {len(plan.libraries)} libraries" in out


def test_oto_shards_splits_another_gpus_deck_with_arch(monkeypatch, capsys):
    """A 780M's testers split navi31's deck (the library gfx1103's owners run), not the config's vega10's."""
    from oto.deck.sources import shipped_manifest
    from oto.fleet.tester import shards_main

    monkeypatch.chdir(REPO)
    navi31 = sorted(read_manifest(shipped_manifest("gfx1100")).libraries)
    assert shards_main(["3", "--arch", "gfx1103"]) == 0
    out = capsys.readouterr().out
    listed = sorted(line.split()[0] for line in out.splitlines() if line.startswith("  "))
    assert listed == navi31 and set(navi31) != set(DECK)
    assert f"shard 2/3: {len(Shard(2, 3).select(navi31))} libraries" in out
    with pytest.raises(
        SystemExit, match=r"--arch gfx1999: no arch_profiles/gfx1999.yaml here \(profiles here: .*gfx1103"
    ):
        shards_main(["3", "--arch", "gfx1999"])


def test_bundles_of_another_gpu_are_judged_against_its_stock_deck_capped_as_the_nights(monkeypatch):
    """The tester's merge check read vega10's deck for every arch (a 780M's SB bundle: "128 sizes differ
    from this merge's deck (1908 sizes)"); both it and oto merge read the arch's stock deck, capped."""
    from oto.deck.sources import shipped_manifest
    from oto.fleet.merge import merge_deck
    from oto.hardware.profile import load_profile

    monkeypatch.chdir(REPO)
    navi31 = read_manifest(shipped_manifest("gfx1100"))
    profile = load_profile(REPO / "arch_profiles" / "gfx1103.yaml")
    cfg = validate_config({"arch": "gfx1103", "families": "all", "deck": {"max_sizes": 16}})
    deck = merge_deck(cfg, profile)
    assert sorted(deck.libraries) == sorted(navi31.libraries)
    assert {len(lib.sizes) for lib in deck.libraries.values()} == {16}  # every navi31 library has more
    whole = merge_deck(validate_config({"arch": "gfx1103", "families": "all"}), profile)
    assert len(whole.libraries["Cijk_Ailk_Bljk_SB"].sizes) == len(navi31.libraries["Cijk_Ailk_Bljk_SB"].sizes)
