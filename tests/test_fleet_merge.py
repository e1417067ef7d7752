"""oto merge: bundles of many devices → one results/<arch>/ (libraries, logic, TensileLibrary.dat, the merged
report) that says how many devices contributed to each library and how well replicated measurements agree.
Scores (ratios to the reference on the same device) combine across devices; GFLOPS and % of the ceiling stay
per device; a later bundle adds evidence and never replaces."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml
from fleet_helpers import LIBRARY, make_root, oto, rebuild, synthetic_bundle
from oto.config import validate_config
from oto.fleet.bundle import file_sha256
from oto.fleet.merge import MergeError, MergeSettings, merge
from oto.hardware.profile import load_profile
from oto.hardware.simulated.checks import model_check_line
from workflow_helpers import REPO

ARCH = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
CONFIG = validate_config({"arch": "gfx90c", "families": "all"})


def settings(numbers: str = "simulated", **kw) -> MergeSettings:
    return MergeSettings("gfx90c", ARCH, CONFIG, numbers=numbers, **kw)


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The same library on an 8-CU and a 6-CU laptop: the same kernel wins every size, at score 1.2 on one
    and 1.1 on the other, at different GFLOPS."""
    tmp = tmp_path_factory.mktemp("two")
    fast = make_root(tmp, name="fast")
    slow = make_root(tmp, name="slow", cus=6, clock_mhz=1500, machine_id="e" * 32)
    a = synthetic_bundle(tmp, name="a", machine=fast, score=1.2, gflops=40.0, spread=0.01)
    b = synthetic_bundle(tmp, name="b", machine=slow, score=1.1, gflops=25.0, spread=0.01)
    return a, b


def test_scores_combine_as_ratios_and_gflops_stay_per_device(tmp_path, two_devices):
    doc = merge(list(two_devices), tmp_path, settings())
    final = yaml.safe_load((tmp_path / "gfx90c" / LIBRARY / "final.yaml").read_text())
    row = final["per_size"][0]
    devices = row["devices"]
    fast, slow = sorted(devices.values(), key=lambda v: -v["score"])
    assert fast["score"] == pytest.approx(1.2, rel=0.02) and slow["score"] == pytest.approx(1.1, rel=0.02)
    assert row["score"] == pytest.approx(math.sqrt(fast["score"] * slow["score"]), rel=1e-5)
    assert row["n_devices"] == 2 and fast["source"] == slow["source"] == "final race"
    assert (
        row["ci_low"] == slow["ci_low"] < slow["score"] and row["ci_high"] == fast["ci_high"] > fast["score"]
    )
    assert sorted(v["gflops"] for v in devices.values()) == pytest.approx([25.0, 40.0], rel=0.02)
    # % of each device's own roofline (this size is memory-bound: both have DDR4-3200, the same ceiling)
    for v in devices.values():
        assert v["pct_ceiling"] == pytest.approx(100 * v["gflops"] / v["ceiling_gflops"], rel=1e-4)
    # the logic row: the median over devices
    assert row["pct_ceiling"] is None and row["gflops"] == pytest.approx(
        (fast["gflops"] + slow["gflops"]) / 2
    )
    lib = doc["libraries"][LIBRARY]
    # every kernel of the finalize race (the winner and each size's reference) at every size, on both
    assert len(lib["devices"]) == 2 and lib["replicated"] >= len(final["sizes"])
    assert lib["median_difference"] > 0 and lib["same_winner"] == 1.0
    assert fast["ci_low"] > slow["ci_high"]  # their intervals do not overlap
    assert [s["devices"] == {d: {k: devices[d][k] for k in ("score", "ci_low", "ci_high", "source",
            "picked_it")} for d in devices} for s in lib["per_size"][:1]] == [True]  # fmt: skip
    theoretical = sorted(v["theoretical_gflops"] for v in lib["devices"].values())
    assert theoretical == pytest.approx([6 * 64 * 2 * 1.5 / 16, 8 * 64 * 2 * 1.9 / 16])


def test_a_single_bundle_merges_to_its_own_final(tmp_path, two_devices):
    merge([two_devices[0]], tmp_path, settings())
    final = yaml.safe_load((tmp_path / "gfx90c" / LIBRARY / "final.yaml").read_text())
    own = own_final(two_devices[0])
    for mine, merged in zip(own["per_size"], final["per_size"], strict=True):
        assert (merged["winner"], merged["score"], merged["gflops"]) == (
            mine["winner"],
            mine["score"],
            mine["gflops"],
        )


def test_a_later_bundle_adds_evidence_and_a_copy_counts_once(tmp_path, two_devices):
    a, _ = two_devices
    tmp = tmp_path / "later"
    again = synthetic_bundle(
        tmp,
        name="a2",
        machine=make_root(tmp, name="fast"),
        score=1.3,
        gflops=44.0,
        created=1.8e9,
        spread=0.01,
    )
    first = merge([a], tmp_path / "out", settings())
    assert len(first["bundles"]["accepted"]) == 1
    copy = tmp_path / "copy.oto.tar.gz"
    shutil.copy(a, copy)
    doc = merge([again, copy], tmp_path / "out", settings())  # the first bundle is remembered
    assert len(doc["bundles"]["accepted"]) == 2 and [d["file"] for d in doc["bundles"]["duplicates"]] == [
        "copy.oto.tar.gz"
    ]
    assert len(doc["devices"]) == 1 and next(iter(doc["devices"].values()))["bundles"] == 2
    final = yaml.safe_load((tmp_path / "out/gfx90c" / LIBRARY / "final.yaml").read_text())
    nights = [own_final(b)["per_size"][0]["score"] for b in (a, again)]
    assert final["per_size"][0]["score"] == pytest.approx(math.sqrt(nights[0] * nights[1]), rel=1e-5)  # both
    kept = sorted(p.name for p in (tmp_path / "out/gfx90c/fleet/bundles").iterdir())
    assert len(kept) == 2
    # the first bundle packed again (a new created_at: `oto tester bundle` run twice) is the same evidence
    repacked = rebuild(a, _created_at("2031-01-01T00:00:00Z"), tmp_path / "repacked.oto.tar.gz")
    doc = merge([repacked], tmp_path / "out", settings())
    assert len(doc["bundles"]["accepted"]) == 2 and doc["bundles"]["duplicates"] == [
        {"file": "repacked.oto.tar.gz", "same_as": a.name, "sha256": file_sha256(repacked),
         "why": "its samples are that bundle's (packed again, or copied)"}
    ]  # fmt: skip
    redo = merge([], tmp_path / "out", settings())  # nothing new: the same result from the kept bundles
    assert len(redo["bundles"]["accepted"]) == 2
    assert (
        yaml.safe_load((tmp_path / "out/gfx90c" / LIBRARY / "final.yaml").read_text())["per_size"]
        == final["per_size"]
    )


def _created_at(when: str):
    def change(m):
        d = yaml.safe_load(m["bundle.yaml"])
        d["created_at"] = when
        m["bundle.yaml"] = yaml.safe_dump(d).encode()

    return change


def test_the_first_tensile_version_pins_later_merges(tmp_path):
    import yaml as y
    from fleet_helpers import rebuild

    tmp = tmp_path / "b"

    def tensile(v):
        def change(m):
            d = y.safe_load(m["bundle.yaml"])
            d["provenance"]["tensile_version"] = v
            m["bundle.yaml"] = y.safe_dump(d).encode()

        return change

    b1 = rebuild(synthetic_bundle(tmp, name="one"), tensile("4.40.0"))
    b2 = rebuild(
        synthetic_bundle(tmp, name="two", machine=make_root(tmp, name="m2", machine_id="c" * 32)),
        tensile("4.41.0"),
    )
    merge([b1], tmp_path / "out", settings())
    doc = merge([b2], tmp_path / "out", settings())
    assert doc["tensile_version"] == "4.40.0"
    assert "'4.41.0' does not match this merge's Tensile 4.40.0" in doc["bundles"]["rejected"][0]["reason"]


def test_a_merge_never_writes_over_a_tuning_run(tmp_path, two_devices):
    (tmp_path / "gfx90c" / LIBRARY / "gen0").mkdir(parents=True)
    with pytest.raises(MergeError, match="holds a tuning run"):
        merge(list(two_devices), tmp_path, settings())


def test_measured_only_by_default(tmp_path, two_devices):
    doc = merge(list(two_devices), tmp_path, settings("measured"))
    assert not doc["bundles"]["accepted"] and len(doc["bundles"]["rejected"]) == 2
    assert doc["bundles"]["new"] == {"given": 2, "accepted": 0}
    assert all("takes measured numbers only" in r["reason"] for r in doc["bundles"]["rejected"])
    assert (tmp_path / "gfx90c/acceptance.md").is_file() and not (
        tmp_path / "gfx90c/TensileLibrary.dat"
    ).exists()


def test_a_merge_under_other_settings_is_refused_before_it_drops_the_kept_bundles(tmp_path, two_devices):
    """The README's merge without the testers' --numbers or --configfile re-judged the kept bundles, refused
    every one and left the folder without its final.yaml files, logic and TensileLibrary.dat. Such a merge is
    refused and the folder is as it was; the same settings merge as before."""
    merge(list(two_devices), tmp_path, settings())
    dat = (tmp_path / "gfx90c/TensileLibrary.dat").read_bytes()
    with pytest.raises(MergeError, match=r"numbers 'simulated' then, 'measured' now.*--numbers"):
        merge([], tmp_path, settings("measured"))
    capped = validate_config({"arch": "gfx90c", "families": "all", "deck": {"max_sizes": 4}})
    with pytest.raises(MergeError, match=r"deck_sha256 '[0-9a-f]{64}' then, '[0-9a-f]{64}' now"):
        merge([], tmp_path, MergeSettings("gfx90c", ARCH, capped, numbers="simulated"))
    assert (tmp_path / "gfx90c/TensileLibrary.dat").read_bytes() == dat
    assert len(merge([], tmp_path, settings())["bundles"]["accepted"]) == 2


def test_a_merge_of_nothing_names_no_library_and_says_its_numbers(tmp_path):
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "night.tgz").write_bytes(b"a bundle renamed on its way")
    proc = oto(REPO, "merge", str(tmp_path / "inbox"), "--numbers", "simulated", "--out", str(tmp_path / "r"))
    assert proc.returncode == 1 and "merged 0 bundle(s)" in proc.stdout
    assert "TensileLibrary.dat" not in proc.stdout
    assert "no library (no bundle finished a library)" in proc.stdout
    assert "numbers: simulated — not for installing" in proc.stdout
    assert "1 file(s) in the folders given not opened (not named *.oto.tar.gz): 'night.tgz'" in proc.stdout


# -- real tester bundles (three simulated nights on two laptops) -------------------------------------------


@pytest.mark.slow
def test_merging_the_fleet(fleet_runs, tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for b in fleet_runs.bundles:
        shutil.copy(b, inbox / b.name)
    proc = oto(REPO, "merge", str(inbox), "--numbers", "simulated", "--out", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stderr
    assert "merged 3 bundle(s) from 2 device(s)" in proc.stdout and "0 rejected" in proc.stdout
    assert "numbers: simulated — not for installing" in proc.stdout  # as the tuning run and the tester say
    out = tmp_path / "results" / "gfx90c"
    doc = yaml.safe_load((out / "fleet/merge.yaml").read_text())
    nn, nt = "Cijk_Ailk_Bljk_DB", "Cijk_Ailk_Bjlk_DB"
    assert set(doc["libraries"]) == {nn, nt}
    assert sorted(r["compute_units"] for r in doc["devices"].values()) == [6, 8]
    assert len(doc["libraries"][nn]["devices"]) == 2 and len(doc["libraries"][nt]["devices"]) == 1
    # the replicated shard: gen0 proposes the same seeds on both laptops, so kernels overlap
    nn_doc = doc["libraries"][nn]
    assert (
        nn_doc["replicated"] > 0
        and nn_doc["median_difference"] is not None
        and nn_doc["same_winner"] is not None
    )
    assert doc["shards"]["2"] == {
        "received": {
            "1": sorted({fleet_runs_device(fleet_runs.bundle_a), fleet_runs_device(fleet_runs.bundle_b1)}),
            "2": [fleet_runs_device(fleet_runs.bundle_b2)],
        },
        "missing": [],
        "replicated": [1],
    }
    for lib in (nn, nt):
        assert (out / lib / "final.yaml").is_file() and (out / "logic" / f"gfx90c_{lib}.yaml").is_file()
    assert (out / "TensileLibrary.dat").stat().st_size > 0 and (out / "registry/registry.sqlite").is_file()
    md = (out / "acceptance.md").read_text()
    assert "## Devices" in md and "Ryzen 3 5300U" in md and "Ryzen 7 5700U" in md
    assert "2 shards: received 1/2 \\(2 device\\(s\\)\\), 2/2 \\(1 device\\(s\\)\\); missing none" in md
    html = (out / "acceptance.html").read_text()
    assert 'data-library="Cijk_Ailk_Bljk_DB"' in html and "Merged acceptance report" in html
    store = yaml.safe_load((out / "registry/consolidated.yaml").read_text())
    assert store["bundles"] == 3 and store["records"]["benchmarked"] > 0


@pytest.mark.slow
def test_one_testers_bundle_merges_to_the_testers_own_logic(fleet_runs, tmp_path):
    merge([fleet_runs.bundle_b2], tmp_path, settings())
    lib = "Cijk_Ailk_Bjlk_DB"
    mine = yaml.safe_load((fleet_runs.work_b / "results/gfx90c/logic" / f"gfx90c_{lib}.yaml").read_text())
    merged = yaml.safe_load((tmp_path / "gfx90c/logic" / f"gfx90c_{lib}.yaml").read_text())
    assert merged == mine
    # the device's median % of roofline is the tester's own report's (the merge left the launch overhead out:
    # 62.4 against 71.7 on a 780M's night)
    from oto.reporting.collect import collect

    own = collect(fleet_runs.work_b / "results/gfx90c", write_cache=False)["final"]["libraries"]
    own = next(r for r in own if r["library"] == lib)["pct_ceiling_median"]
    final = yaml.safe_load((tmp_path / "gfx90c" / lib / "final.yaml").read_text())
    (device,) = final["fleet"]["devices"].values()
    assert device["median_pct_roofline"] == pytest.approx(own, rel=0.02)


def own_final(bundle) -> dict:
    """The final.yaml a bundle carries (what its tester's oto computed from its samples)."""
    import tarfile

    with tarfile.open(bundle, "r:gz") as tar:
        return yaml.safe_load(tar.extractfile(f"results/{LIBRARY}/final.yaml").read())


def fleet_runs_device(bundle) -> str:
    import tarfile

    with tarfile.open(bundle, "r:gz") as tar:
        return yaml.safe_load(tar.extractfile("bundle.yaml").read())["device"]["id"]


def test_merged_deliverables_say_where_their_numbers_came_from(tmp_path, two_devices):
    """As the package stage does: a provenance record beside each merged logic file, the manifest's
    provenance block, and no code objects from winners that were not measured (unless allowed)."""
    doc = merge(list(two_devices), tmp_path, settings())
    arch = tmp_path / "gfx90c"
    record = json.loads((arch / "logic" / f"gfx90c_{LIBRARY}.provenance.json").read_text())
    assert record["numbers"] == "simulated" and record["library"] == LIBRARY
    assert sorted(record["provenance"]["merged_from"]) == sorted(
        b["sha256"][:16] for b in doc["bundles"]["accepted"]
    )
    manifest = yaml.safe_load((arch / "library" / "manifest.yaml").read_text())
    assert manifest["provenance"]["numbers"] == ["simulated"]
    # the manifest names the library relative to itself: the merged folder can be moved or shipped
    assert manifest["native_dat"] == "../TensileLibrary.dat"
    assert (arch / "library" / manifest["native_dat"]).is_file()
    assert manifest["provenance"]["libraries"][LIBRARY]["logic_file"] == f"gfx90c_{LIBRARY}.yaml"
    assert "simulated, not measured on the GPU" in manifest["tensile_create_library"]["why"]
    assert doc["package"]["native_dat"] == "TensileLibrary.dat" and doc["package"]["solutions"] > 0
    # simulated numbers say how well the model behind them was checked on real data, as a run's do: in the
    # logic file itself, its record, the package's provenance and the merged report
    check = model_check_line("gfx90c", None, "gfx900")
    assert check.startswith("Model check") and doc["model_check"] == check
    assert f"# oto provenance: {check}" in (arch / "logic" / f"gfx90c_{LIBRARY}.yaml").read_text()
    assert record["model_check"] == check and manifest["provenance"]["model_check"] == [check]
    assert f"- {check}" in (arch / "acceptance.md").read_text()
    assert 'data-test="model-check"' in (arch / "acceptance.html").read_text()


def test_without_a_config_file_the_merge_needs_the_arch(tmp_path):
    """No config file: the arch comes from --arch (the rest from the schema's defaults), never from a
    default written in the code."""
    from oto.config import ConfigError
    from oto.fleet.merge import _parser, _settings

    given = ["inbox", "--configfile", str(tmp_path / "none.yaml"), "--profiles", str(REPO / "arch_profiles")]
    with pytest.raises(ConfigError, match=r"none.yaml: no such config file; .* --arch"):
        _settings(_parser().parse_args(given))
    settings = _settings(_parser().parse_args([*given, "--arch", "gfx1035"]))
    assert settings.arch == settings.arch_profile["arch"] == "gfx1035"
    assert settings.config["package"] == {
        "label": "native",
        "create_library": "auto",
        "allow_simulated": False,
    }
