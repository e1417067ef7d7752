"""config deck.max_sizes: a library with more sizes keeps a deterministic, representative sample (the sizes a
workload calls first, never dropped; then quantiles by flops within each batch count), applied where the deck
is built, with "N of M shipped sizes kept (deck.max_sizes: K)" in deck.yaml, the report, the summary and the
plan; a bad cap fails the dry-run naming the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from oto.config import ConfigError, night_record, validate_config
from oto.deck.model import Deck, DeckError, read_library_yaml, write_deck_yaml, write_library_yaml
from oto.deck.size_cap import SizeCap, cap_library, cap_summary, kept_text, quantiles
from oto.deck.sources import SHIPPED_MANIFESTS, deck_settings, load_run_deck, read_manifest
from oto.files import read_yaml
from oto.hardware.profile import load_profile
from oto.reporting.acceptance import size_cap_markdown
from oto.reporting.collect import _coverage
from oto.reporting.summary import run_summary

ROOT = Path(__file__).resolve().parents[1]
PROFILE = load_profile(ROOT / "arch_profiles" / "gfx90c.yaml")
NAVI21 = read_manifest(SHIPPED_MANIFESTS["gfx1030"])
NAVI31 = read_manifest(SHIPPED_MANIFESTS["gfx1100"])
MANY_BATCHES = "Cijk_Ailk_Bjlk_HHS_BH_GB"  # navi21: 1,241 sizes over 30-odd batch counts
DB = "Cijk_Ailk_Bljk_DB"  # vega10: 8 sizes


def flops(size) -> int:
    m, n, b, k = size[:4]
    return m * n * b * k


def test_the_sample_is_deterministic_and_spread_over_flops_and_batch_counts():
    lib = NAVI21.libraries[MANY_BATCHES]
    cap = SizeCap(64)
    first = cap.sample(lib.sizes)
    assert first == cap.sample([list(s) for s in lib.sizes]) == sorted(first)  # same deck, same sample
    assert len(first) == 64 and len(set(first)) == 64
    kept = [lib.sizes[i] for i in first]
    batches = {s[2] for s in lib.sizes}
    assert {s[2] for s in kept} == batches  # every batch count keeps a size (the cap allows it here)
    ones = [s for s in lib.sizes if s[2] == 1]  # the largest stratum: its smallest and largest sizes kept
    kept_ones = [s for s in kept if s[2] == 1]
    assert min(map(flops, ones)) == min(map(flops, kept_ones))
    assert max(map(flops, ones)) == max(map(flops, kept_ones))
    # past one size per batch count (44 of them) the slots follow the strata's sizes: batch 1 holds 60%
    wide = [lib.sizes[i][2] for i in SizeCap(256).sample(lib.sizes)]
    assert len(set(wide)) == 44 and wide.count(1) > 256 / 2
    # a cap at least the library's sizes keeps every size; fewer batch counts than slots: the largest first
    assert cap.sample(lib.sizes[:64]) == list(range(64)) and SizeCap(None).sample(lib.sizes) == list(
        range(len(lib.sizes))
    )
    few = SizeCap(2).sample(lib.sizes)
    assert sorted(lib.sizes[i][2] for i in few) == [1, 2]  # the two largest strata (batch 1: 750, 2: 166)


def test_quantiles_are_evenly_spaced_with_both_ends():
    assert quantiles(10, 1) == [4] and quantiles(10, 0) == []
    assert quantiles(512, 4) == [0, 170, 341, 511]
    assert quantiles(5, 9) == [0, 1, 2, 3, 4]
    for m, k in ((512, 128), (125, 124), (7, 2)):
        q = quantiles(m, k)
        assert len(q) == k and q[0] == 0 and q[-1] == m - 1 and q == sorted(set(q))


def test_a_workload_size_is_never_dropped():
    lib = NAVI31.libraries["Cijk_Ailk_Bljk_BBS_BH_GB"]
    calls = [0] * len(lib.sizes)
    for i, c in ((5, 7), (300, 100), (511, 1)):
        calls[i] = c
    keep = SizeCap(10).sample(lib.sizes, calls)
    assert {5, 300, 511} <= set(keep) and len(keep) == 10
    # the workload alone exceeds the cap: every size it calls is kept, nothing else, and the record says so
    assert SizeCap(2).sample(lib.sizes, calls) == [5, 300, 511]
    called = copy.deepcopy(lib)
    called.calls = calls
    record = cap_library(called, SizeCap(2))
    assert record["kept"] == 3 and record["workload_sizes"] == 3 and called.calls == [7, 100, 1]
    assert record["note"] == "the workload calls 3 sizes, more than the cap: every one is kept"
    md = "\n".join(size_cap_markdown(cap_summary({lib.name: called}, 2)))
    assert f"{lib.name} 3 of 512 (the workload calls 3 sizes, more than the cap: every one is kept)" in md


def test_a_workload_that_fills_the_cap_keeps_the_whole_shipped_file_as_its_floor(tmp_path):
    """A workload of more distinct sizes than deck.max_sizes in one library keeps only its own sizes, none
    of them a shipped row: the own floor had no row left and every job that asked for a size's reference
    failed with an IndexError (oto plan, and emit in the run). The floor keeps every shipped row (deck.yaml
    ``floor_rows``), so a workload size is served from the nearest row of the whole file, as by the spoof
    library, capped or not."""
    lib = read_library_yaml_from(NAVI31.libraries["Cijk_Ailk_Bljk_BBS_BH_GB"], tmp_path / "full.yaml")
    extra = [[1000 + 8 * i, 256, 1, 512] for i in range(3)]  # sizes the file has no row for
    lib.sizes += extra
    lib.shipped += [None] * 3
    lib.weights += [1.0] * 3
    lib.calls = [0] * (len(lib.sizes) - 3) + [5, 6, 7]
    whole = copy.deepcopy(lib)
    cap_library(lib, SizeCap(2))
    assert lib.sizes == extra and lib.shipped == [None] * 3 and len(lib.floor_rows["sizes"]) == 512
    limits = None
    capped = lib.references([0, 1, 2], limits)
    assert [capped[i]["id"] for i in range(3)] == [whole.references([512 + i], limits)[512 + i]["id"]
                                                    for i in range(3)]  # fmt: skip
    path = tmp_path / "deck.yaml"
    write_library_yaml(lib, path, {})
    again = read_library_yaml(path)
    assert again.floor_rows == lib.floor_rows and again.references([1], limits)[1]["id"] == capped[1]["id"]


def test_a_capped_library_carries_its_record_and_round_trips(tmp_path):
    lib = read_library_yaml_from(NAVI31.libraries["Cijk_Ailk_Bljk_I8II_BH_GB"], tmp_path / "full.yaml")
    record = cap_library(lib, SizeCap(128))
    assert record == {
        "max_sizes": 128,
        "kept": 128,
        "of": 512,
        "of_what": "shipped sizes",
        "workload_sizes": 0,
    }
    assert len(lib.sizes) == len(lib.shipped) == len(lib.weights) == 128 and lib.size_cap == record
    assert len(lib.solutions) == len(NAVI31.libraries[lib.name].solutions)  # all stay: the best shipped
    path = tmp_path / "deck.yaml"
    write_library_yaml(lib, path, {})
    assert read_library_yaml(path) == lib
    small = NAVI31.libraries["Cijk_Ailk_Bljk_I8II_BH_GB"]
    assert cap_library(read_library_yaml_from(small, tmp_path / "x.yaml"), SizeCap(512)) is None


def read_library_yaml_from(lib, path):
    write_library_yaml(lib, path, {})
    return read_library_yaml(path)


def test_the_run_deck_is_capped_where_it_is_built_and_says_so(tmp_path):
    """load_run_deck (the deck rule, oto plan): the selected libraries capped after the workload is layered
    on, the source's own stats untouched, the workload's weights again mean 1 over the kept sizes."""
    workload = tmp_path / "tunableop_untuned0.csv"  # DB NN: two sizes the deck lacks
    workload.write_text(
        "GemmTunableOp_double_NN,nn_512_512_2048_ld_512_2048_512\n" * 3
        + "GemmTunableOp_double_NN,nn_96_4096_64_ld_96_64_96\n"
    )
    deck = {"max_sizes": 3, "workload": [{"source": "tunableop", "path": str(workload)}]}
    config = validate_config({"arch": "gfx90c", "families": ["DB"], "deck": deck})
    settings = deck_settings(config["deck"], PROFILE)
    assert settings["max_sizes"] == 3
    full, selected, _ = load_run_deck(settings, [DB])
    lib = selected.libraries[DB]
    assert len(full.libraries[DB].sizes) == 8  # the source as read
    assert len(lib.sizes) == 3 and sorted(c for c in lib.calls if c) == [1, 3]
    assert sum(lib.weights) == pytest.approx(3)  # mean 1 over the kept sizes
    assert lib.size_cap["of"] == 10 and lib.size_cap["of_what"] == "deck sizes"  # 2 the workload added
    assert selected.size_cap["text"] == "3 of 10 deck sizes kept (deck.max_sizes: 3)"
    # without a cap: nothing in the settings (the deck rule's parameters as before), nothing capped
    plain = deck_settings(validate_config({"arch": "gfx90c", "families": ["DB"]})["deck"], PROFILE)
    assert "max_sizes" not in plain
    assert load_run_deck(plain, [DB])[1].size_cap is None


def test_deck_yaml_the_report_and_the_summary_state_the_cap(tmp_path):
    libs = {n: NAVI31.libraries[n] for n in ("Cijk_Ailk_Bljk_BBS_BH_GB", "Cijk_Ailk_Bljk_I8II_BH_GB")}
    libs = {n: read_library_yaml_from(lib, tmp_path / f"{n}.yaml") for n, lib in libs.items()}
    for lib in libs.values():
        cap_library(lib, SizeCap(128))
    summary = cap_summary(libs, 128)
    assert summary["text"] == "256 of 1,024 shipped sizes kept (deck.max_sizes: 128)"
    assert summary["libraries_capped"] == {n: {"kept": 128, "of": 512} for n in libs}
    deck = Deck({"kind": "manifest"}, "gfx1100", libs)
    deck.size_cap = summary
    write_deck_yaml(deck, tmp_path / "deck.yaml", {"deck_of": "gfx1100"})
    doc = read_yaml(tmp_path / "deck.yaml")
    assert doc["size_cap"]["text"] == summary["text"]
    assert all(doc["libraries"][n]["size_cap"]["kept"] == 128 for n in libs)
    cov = _coverage(doc, [])
    assert cov["size_cap"]["text"] == summary["text"]
    md = "\n".join(size_cap_markdown(cov["size_cap"]))
    assert "Capped deck: 256 of 1,024 shipped sizes kept (deck.max_sizes: 128)." in md
    assert "Cijk_Ailk_Bljk_BBS_BH_GB 128 of 512" in md
    # the closing summary repeats it
    (tmp_path / "results" / "dashboard").mkdir(parents=True)
    (tmp_path / "results" / "dashboard" / "data.json").write_text(json.dumps({"coverage": cov}))
    lines = run_summary(tmp_path / "results", 3, "1 s", built=None)
    assert any(line.strip().startswith("deck") and summary["text"] in line for line in lines)
    # a cap that kept every size: deck.yaml says so, the pages say nothing (the footprint is whole)
    whole = cap_summary({"x": NAVI31.libraries["Cijk_Ailk_Bljk_BBS_BH_GB"]}, 512)
    assert whole["text"].startswith("512 of 512 shipped sizes kept (deck.max_sizes: 512): every library")
    assert "size_cap" not in _coverage({"size_cap": whole}, []) and size_cap_markdown(None) == []
    assert cap_summary(libs | {}, None)["libraries_capped"] and cap_summary({}, None) is None
    assert kept_text(1, 2, [5, 5]) == "1 of 2 shipped sizes kept (deck.max_sizes: 5)"


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True])
def test_a_bad_cap_fails_naming_the_field(bad):
    with pytest.raises(ConfigError, match=r"field 'deck\.max_sizes'"):
        validate_config({"arch": "gfx90c", "families": ["DB"], "deck": {"max_sizes": bad}}, "config/x.yaml")
    with pytest.raises(DeckError, match=r"config field 'deck\.max_sizes'"):
        SizeCap(bad)


def test_the_schema_default_is_every_size_and_the_night_id_of_an_uncapped_run_is_unchanged():
    config = validate_config({"arch": "gfx90c", "families": ["DB"]})
    assert config["deck"]["max_sizes"] is None and SizeCap.from_config(config["deck"]).max_sizes is None
    without = json.loads(json.dumps(config))
    del without["deck"]["max_sizes"]  # a config of before the field existed
    assert night_record(config)["id"] == night_record(without)["id"]
    capped = validate_config({"arch": "gfx90c", "families": ["DB"], "deck": {"max_sizes": 128}})
    assert night_record(capped)["id"] != night_record(config)["id"]  # another deck, another night


def test_the_demo_cap_leaves_gfx90c_whole_and_oto_plan_counts_gfx1103s_capped_sizes():
    """config/config.yaml's cap: every vega10 demo library is within it (gfx90c's demo unchanged); navi31's
    demo libraries keep 128 of 512, and the plan (oto plan, the dry-run's estimate) counts those."""
    import yaml
    from oto.run.dry_run import plan_lines
    from oto.run.estimate import plan_estimate
    from oto.run.plan import plan_run

    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cap = demo["deck"]["max_sizes"]
    gfx90c = plan_run(demo, ["config/config.yaml"])
    vega10 = read_manifest(SHIPPED_MANIFESTS["gfx900"])
    assert max(len(vega10.libraries[n].sizes) for n in gfx90c.libraries) <= cap
    assert load_run_deck(gfx90c.deck, gfx90c.libraries)[1].size_cap["libraries_capped"] == {}
    rdna = plan_run({**demo, "arch": "gfx1103", "patterns": ["NN"]}, ["config/config.yaml"])
    est = plan_estimate(rdna, rdna.profile)
    finals = [j for j in est.gpu_jobs if j.rule == "finalize"]
    assert [j.sizes for j in finals] == [cap, cap] and est.size_cap["kept"] == 2 * cap
    assert est.size_cap["text"] == f"{2 * cap} of 1,024 shipped sizes kept (deck.max_sizes: {cap})"
    assert any(est.size_cap["text"] in line for line in plan_lines([], "1 s", None, est.size_cap))
