import json
import shutil
from pathlib import Path

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


def test_a_negative_size_in_a_logic_deck_fails_the_dry_run(vega10_dir, tmp_path):
    import yaml

    name = "vega10_Cijk_Ailk_Bljk_DB.yaml"
    for f in (name, "vega10_Cijk_Ailk_Bljk_SB.yaml"):
        shutil.copy(vega10_dir / f, tmp_path / f)
    data = yaml.load((tmp_path / name).read_text(), Loader=yaml.CSafeLoader)
    data[7][6][0][3] = -256
    (tmp_path / name).write_text(yaml.dump(data, Dumper=yaml.CSafeDumper))
    deck = {"source": "logic", "path": str(tmp_path)}
    with pytest.raises(PlanError, match=rf"field 'deck': {name}: element 7 \(exact logic\) row 6 .*K = -256"):
        plan_run({**BASE, "deck": deck, "patterns": ["NN"]}, ["c.yaml"])
    # A family not selected is not read: SB alone plans.
    assert plan_run({**BASE, "families": ["SB"], "deck": deck, "patterns": ["NN"]}).libraries == [
        "Cijk_Ailk_Bljk_SB"
    ]


def test_deck_inputs_are_relative_to_the_project():
    plan = plan_run(BASE)
    assert set(map(tuple, plan.deck_inputs.values())) == {("workflow/oto/deck/data/deck_vega10.json.gz",)}
    assert plan.profile_file == "arch_profiles/gfx90c.yaml" and plan.profile["clock_mhz"] == 1800
    from oto.run.plan import project_path

    assert project_path("/elsewhere/logic", Path("/work/project")) == "/elsewhere/logic"
    assert project_path("/work/project/decks/x.yaml", Path("/work/project")) == "decks/x.yaml"


def test_a_profile_change_invalidates_exactly_the_stages_that_read_it(tmp_path):
    from oto.run.profile_views import change_note, changed_fields, invalidated_stages, record_profile

    plan = plan_run({**BASE, "backend": "replay", "replay": {"cache": "x.json"}})
    p, cfg = plan.profile, plan.config
    assert changed_fields(p, dict(reversed(list(p.items())))) == []
    fp64 = {**p, "rates": {**p["rates"], "fp64": 0.125}}
    assert changed_fields(p, fp64) == [("rates.fp64", 0.0625, 0.125)]
    # The replay backend reads no figure: the FP64 rate changes DB's ceilings and scores, not SB's ...
    db, sb = ["Cijk_Ailk_Bljk_DB"], ["Cijk_Ailk_Bljk_SB"]
    assert invalidated_stages(["rates.fp64"], cfg, db) == [
        "ceilings",
        "benchmark",
        "normalise",
        "select",
        "finalize",
    ]
    # ... but finalize's shortlist of shipped kernels is chosen by the simulated GPU's model, which reads
    # every rate (oto.measurement.best_shipped): it runs again whatever the backend
    assert invalidated_stages(["rates.fp64"], cfg, sb) == ["ceilings", "finalize"]
    assert invalidated_stages(["name"], cfg, db) == []
    # legality's limits: the shipped kernels' verdicts the deck job keeps, proposals, configs, the references
    # finalize races and what logic/package validate
    assert invalidated_stages(["max_lds_per_workgroup"], cfg, db) == [
        "deck",
        "mutate",
        "emit",
        "finalize",
        "verify",
        "logic",
        "compare",
        "package",
    ]
    sim = plan_run(BASE).config  # the simulated GPU is the profile: every measuring stage reads it
    assert invalidated_stages(["l2_bytes"], sim, db) == [
        "compile",
        "benchmark",
        "finalize",
        "verify",
        "compare",
    ]

    arch_dir = tmp_path / "results" / "gfx90c"
    assert change_note(fp64, "arch_profiles/gfx90c.yaml", arch_dir, cfg, db) == ""  # no run recorded yet
    record_profile(p, "arch_profiles/gfx90c.yaml", arch_dir)
    assert change_note({**p, "name": "renamed"}, "a.yaml", arch_dir, cfg, db) == ""  # read by no stage
    note = change_note(fp64, "arch_profiles/gfx90c.yaml", arch_dir, cfg, db)
    assert note.startswith("oto: arch_profiles/gfx90c.yaml changed since the last run in")
    assert "rates.fp64 0.0625 -> 0.125" in note and "benchmark and finalize measure again" in note


def test_a_target_outside_the_selection_names_the_config_fix():
    plan = plan_run({**BASE, "families": ["DB"], "patterns": ["NN", "NT"]})
    assert plan.not_selected(family="DB") is None
    assert plan.not_selected(library="Cijk_Ailk_Bljk_DB") is None
    assert "--config 'families=[DB,SB]'" in plan.not_selected(family="SB")
    assert "not in the deck" in plan.not_selected(family="QQ")
    assert "--config 'families=[DB,SB]'" in plan.not_selected(library="Cijk_Ailk_Bljk_SB")
    why = plan.not_selected(library="Cijk_Alik_Bljk_DB")  # TN: the family is selected, the pattern is not
    assert "pattern TN" in why and "--config 'patterns=[NN,NT,TN]'" in why


def test_a_bad_command_line_value_names_the_command_line_not_the_file():
    # what Snakemake hands over for --config 'package={allow_simulated: true}': nested scalars stay text
    given = {"package": {"allow_simulated": "true"}}
    with pytest.raises(PlanError) as err:
        plan_run({**BASE, **given}, ["config/config.yaml"], command_line=given)
    msg = str(err.value)
    assert msg.startswith("--config package=…: field 'package.allow_simulated'") and "--configfile" in msg
    # the same value from the file names the file and gives no command-line advice, also where --config
    # set another key of the same block (Snakemake merges the two)
    merged = {**BASE, "package": {"label": "gfx900", "allow_simulated": "true"}}
    for other in ({"families": ["DB"]}, {"package": {"label": "gfx900"}}):
        with pytest.raises(PlanError, match=r"^config/config.yaml: field 'package.allow_simulated'") as err:
            plan_run(merged, ["config/config.yaml"], command_line=other)
        assert "--configfile" not in str(err.value)
    # a list given whole on the command line covers its items
    with pytest.raises(PlanError, match=r"^--config patterns=…: field 'patterns.0'") as err:
        plan_run({**BASE, "patterns": ["XX"]}, ["config/config.yaml"], command_line={"patterns": ["XX"]})
    assert "--configfile" not in str(err.value)  # a wrong value, not text where a number was meant
    # a valid value the plan refuses names where it came from too: the deck has no such family, no profile
    with pytest.raises(PlanError, match=r"^--config families=…: field 'families': ZB_GB not in the deck"):
        plan_run(
            {**BASE, "arch": "gfx1103", "families": ["ZB_GB"]},
            ["config/config.yaml"],
            {"families": ["ZB_GB"]},
        )
    with pytest.raises(PlanError, match=r"^config/config.yaml: field 'families': ZB_GB not in the deck"):
        plan_run(
            {**BASE, "arch": "gfx1103", "families": ["ZB_GB"]}, ["config/config.yaml"], {"arch": "gfx1103"}
        )
    with pytest.raises(PlanError, match=r"^--config arch=…: field 'arch': no arch profile"):
        plan_run({**BASE, "arch": "gfx9999"}, ["config/config.yaml"], {"arch": "gfx9999"})


def test_the_demo_plans_for_every_shipped_profile():
    """`--config arch=<arch>` runs the demo for every GPU oto ships a profile of: config/config.yaml names
    demo families for each profile's stock library (gfx906's vega20 had none: its dry-run failed)."""
    from oto.config import layered_config
    from workflow_helpers import REPO

    for path in sorted((REPO / "arch_profiles").glob("*.yaml")):
        plan = plan_run(layered_config([], {"arch": path.stem}), ["config/config.yaml"], {"arch": path.stem})
        assert plan.arch == path.stem and plan.libraries, path.stem


def test_the_rdna_apus_plan():
    for arch, prefix in (("gfx1035", "rembrandt"), ("gfx1103", "gfx1103"), ("gfx1150", "gfx1150")):
        plan = plan_run({**BASE, "arch": arch, "families": ["SB"]})  # navi21's or navi31's deck: no DB
        assert (
            plan.arch == arch and plan.logic_prefix == prefix and plan.profile["wavefront_sizes"] == [32, 64]
        )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["wmma"]["rates"].pop("int8"),
            r"^arch_profiles/gfx1103\.yaml: field 'wmma\.rates\.int8': missing: gfx1103 runs int8 on WMMA",
        ),
        (
            lambda d: d["tensile"].update(caps_from="gfx900"),
            r"^arch_profiles/gfx1103\.yaml: field 'tensile\.caps_from': gfx900: Tensile's assembler",
        ),
        (
            lambda d: d.update(isa=[12, 0, 1], arch="gfx1201"),
            r"^arch_profiles/gfx1201\.yaml: field 'isa': \[12, 0, 1\] \(gfx1201\): "
            r"oto\.tensile\.legality has no rules for this ISA",
        ),
    ],
)
def test_a_profile_its_isa_contradicts_fails_the_dry_run(tmp_path, monkeypatch, edit, message):
    """A profile missing a field its ISA needs, or naming an ISA the legality rules do not know, fails the
    plan (the dry-run) with one line naming the file and the field."""
    import yaml
    from workflow_helpers import REPO

    data = yaml.safe_load((REPO / "arch_profiles" / "gfx1103.yaml").read_text())
    edit(data)
    (tmp_path / "arch_profiles").mkdir()
    (tmp_path / "arch_profiles" / f"{data['arch']}.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PlanError, match=message) as err:
        plan_run({**BASE, "arch": data["arch"]}, ["config/config.yaml"])
    assert "\n" not in str(err.value)


def test_the_deck_rule_gets_its_source_floor_and_the_stock_librarys_arch(tmp_path):
    from test_deck_sources import MANIFEST, NN, write_logic

    plan = plan_run(BASE)
    manifest = "workflow/oto/deck/data/deck_vega10.json.gz"
    assert plan.deck == {
        "source": "manifest",
        "path": manifest,
        "arch": "gfx900",
        "floor": {"source": "deck", "path": None},
    }
    floor = tmp_path / "navi21"
    write_logic(floor, MANIFEST.libraries[NN], prefix="navi21", arch="gfx1030")
    plan = plan_run({**BASE, "patterns": ["NN"], "deck": {"floor": {"source": "logic", "path": str(floor)}}})
    assert plan.deck["floor"] == {"source": "logic", "path": str(floor)}
    assert plan.deck_inputs == {NN: [manifest, str(floor / f"navi21_{NN}.yaml")]}
    with pytest.raises(
        PlanError, match=rf"config field 'deck.floor': {floor} has no library Cijk_Ailk_Bjlk_DB"
    ):
        plan_run({**BASE, "deck": {"floor": {"source": "logic", "path": str(floor)}}})
    plan = plan_run({**BASE, "deck": {"floor": {"source": "none"}}})
    assert set(map(tuple, plan.deck_inputs.values())) == {(manifest,)}
    assert plan.deck["floor"]["source"] == "none"


def test_the_rocblas_deck_and_the_spoof_label_follow_the_profiles_stock_library(golden_dir):
    rocblas = {"source": "rocblas", "path": str(golden_dir / "tcl" / "gfx900-lazy-msgpack" / "DB_NN")}
    assert plan_run({**BASE, "deck": rocblas}).libraries == ["Cijk_Ailk_Bljk_DB"]  # gfx90c runs gfx900's
    with pytest.raises(PlanError, match="no TensileLibrary_lazy_gfx906.dat"):  # gfx906 runs its own
        plan_run({**BASE, "arch": "gfx906", "deck": rocblas})
    assert plan_run({**BASE, "package": {"label": "spoof"}}).logic_prefix == "vega10"
    assert plan_run({**BASE, "arch": "gfx906", "package": {"label": "spoof"}}).logic_prefix == "vega20"
    with pytest.raises(PlanError, match=r"field 'package.label': gfx900 .* gfx906's"):
        plan_run({**BASE, "arch": "gfx906", "package": {"label": "gfx900"}}, ["c.yaml"])


def test_a_warm_start_that_names_no_registry_fails_the_dry_run(tmp_path):
    """registry.warm_start names another GPU's results folder; one without a registry store is a typo that
    would warm-start nothing, so the plan fails naming the config file and field."""
    donor = tmp_path / "results" / "gfx90c"
    (donor / "registry").mkdir(parents=True)
    cfg = {**BASE, "arch": "gfx902", "registry": {"warm_start": [str(donor)]}}
    with pytest.raises(
        PlanError, match=r"c.yaml: field 'registry.warm_start\[0\]': .*gfx90c holds no registry"
    ):
        plan_run(cfg, ["c.yaml"])
    (donor / "registry" / "registry.sqlite").write_bytes(b"")
    assert plan_run(cfg, ["c.yaml"]).arch == "gfx902"


def test_oto_plan_says_which_families_a_donor_of_another_isa_generation_hands_on_mapped(
    tmp_path, capsys, monkeypatch
):
    """registry.warm_start: gfx1035 (RDNA2) has no WMMA, so its half and int8 kernels reach gfx1103's search
    mapped onto WMMA kernels; oto plan says so per folder and names the families (SB, whose kernels are legal
    on gfx1103 as they are, is not among them). A gfx1100 registry (the same instructions) gets no note."""
    from oto.run import probe
    from oto.run.estimate import main

    monkeypatch.setattr(probe, "job_probe", lambda: None)  # no probe file in the checkout
    donors = []
    for arch in ("gfx1035", "gfx1100"):
        (tmp_path / arch / "registry").mkdir(parents=True)
        (tmp_path / arch / "registry" / "registry.sqlite").write_bytes(b"")
        donors.append(str(tmp_path / arch))
    argv = ["--config", "arch=gfx1103", "families=[SB,HHS_BH,I8II_BH]", "max_generations=1"]
    assert main([*argv, f"registry={{warm_start: [{donors[0]}, {donors[1]}]}}"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warm start from")]
    assert notes == [
        f"warm start from {donors[0]}: gfx1035 ran HHS_BH, I8II_BH without the matrix instruction gfx1103 "
        "runs them on. Those kernels reach the search mapped onto gfx1103's own kernels and count only as "
        "far as their ranking holds on gfx1103; a registry of another gfx11 GPU hands on kernels legal here "
        "as they are."
    ]
    assert main([*argv, f"registry={{warm_start: [{donors[1]}]}}", "--json"]) == 0
    assert "warm_start" not in json.loads(capsys.readouterr().out)
    assert main([*argv, f"registry={{warm_start: [{donors[0]}]}}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warm_start"] == notes


def test_oto_plan_blames_a_bad_value_on_the_config_option_that_gave_it(capsys):
    """oto plan --config KEY=VALUE layers the value over the config file as Snakemake does; a bad one is
    blamed on --config, as the dry-run blames it, not on config/config.yaml, which never held it."""
    from oto.run.estimate import main

    assert main(["--config", "familes=all"]) == 2
    assert capsys.readouterr().err.strip() == (
        "oto plan: --config familes=…: field 'familes': not a config field (did you mean 'families'?)"
    )
    assert main(["--config", "benchmark.tuning_size=8"]) == 2
    assert capsys.readouterr().err.startswith("oto plan: --config benchmark=…: field 'benchmark.tuning_size'")


def test_a_misspelt_key_is_named_and_blamed_where_it_was_given():
    """A --config typo (familes=all) was blamed on config/config.yaml, as an unexpected property of the top
    level; it names the key, where it came from and the field that was meant."""
    typo = "field 'familes': not a config field (did you mean 'families'?)"
    with pytest.raises(PlanError) as err:
        plan_run({**BASE, "familes": "all"}, ["config/config.yaml"], command_line={"familes": "all"})
    assert str(err.value) == f"--config familes=…: {typo}"
    with pytest.raises(PlanError) as err:  # the same typo in the file
        plan_run({**BASE, "familes": "all"}, ["config/config.yaml"], command_line={"families": ["DB"]})
    assert str(err.value) == f"config/config.yaml: {typo}"
    nested = {**BASE, "benchmark": {"tuning_size": 8}}
    with pytest.raises(PlanError, match=r"^--config benchmark=…: field 'benchmark.tuning_size': not a "):
        plan_run(nested, ["config/config.yaml"], command_line={"benchmark": {"tuning_size": 8}})
    with pytest.raises(PlanError, match=r"\(did you mean 'benchmark.tuning_sizes'\?\)$"):
        plan_run(nested, ["config/config.yaml"])


def test_a_workload_is_an_input_of_the_deck_rule_and_a_bad_one_fails_the_dry_run(tmp_path):
    from oto.run.estimate import plan_estimate, workload_lines

    good = tmp_path / "profile.yaml"
    good.write_text(
        "- { rocblas_function: \"rocblas_dgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: 1024, "
        "N: 1024, K: 1024, alpha: 1.0, lda: 1024, ldb: 1024, beta: 0.0, ldc: 1024, call_count: 40 }\n"
        "- { rocblas_function: \"rocblas_sgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: 64, N: 64, "
        "K: 64, alpha: 1.0, lda: 64, ldb: 64, beta: 0.0, ldc: 64, call_count: 3 }\n"
    )
    deck = {"workload": [{"source": "rocblas-log", "path": str(good)}]}
    plan = plan_run({**BASE, "patterns": ["NN"], "deck": deck})
    assert plan.deck_inputs == {
        "Cijk_Ailk_Bljk_DB": ["workflow/oto/deck/data/deck_vega10.json.gz", str(good)]
    }
    assert plan.deck["workload"] == [{"source": "rocblas-log", "path": str(good)}]
    assert "workload" not in plan_run(BASE).deck  # no workload: the deck rule's parameters as before
    est = plan_estimate(plan, plan.profile)
    text = "\n".join(workload_lines(est.workload))
    assert "Workload: 40 calls in 1 of the 1 libraries; 3 calls not covered by this run:" in text
    assert (
        "profile.yaml:2: gemm NN f32_r/f32_r/f32_r M 64 N 64 K 64 (3 calls): library Cijk_Ailk_Bljk_SB"
        in text
    )
    bad = tmp_path / "cut.yaml"
    bad.write_text(good.read_text()[:-20])
    with pytest.raises(PlanError, match=r"field 'deck': .*cut.yaml: 1 line\(s\) .*cut.yaml:2: truncated"):
        plan_run({**BASE, "deck": {"workload": [{"source": "rocblas-log", "path": str(bad)}]}})


def _finished(root: Path, library: str, label: str = "native", backend: str = "sim") -> None:
    """What a run leaves for a finished library: final.yaml, the logic file and its provenance record."""
    arch_dir = root / "gfx90c"
    (arch_dir / library).mkdir(parents=True)
    (arch_dir / library / "final.yaml").write_text("library: x\n")
    (arch_dir / "logic").mkdir(exist_ok=True)
    (arch_dir / "logic" / f"gfx90c_{library}.yaml").write_text("[]\n")
    record = {"library": library, "label": label, "backend": backend, "numbers": "simulated"}
    (arch_dir / "logic" / f"gfx90c_{library}.provenance.json").write_text(json.dumps(record))


def test_libraries_earlier_runs_finished_are_delivered_and_never_planned(tmp_path):
    """Issue #26: a library another night finished in the folder (same backend and label) is kept in the
    deliverables and no rule matches it; one of another backend, or selected now, is not 'earlier'."""
    import re

    sb, db, other = "Cijk_Ailk_Bljk_SB", "Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_SB"
    _finished(tmp_path, sb)
    _finished(tmp_path, db)
    _finished(tmp_path, other, backend="tensile")
    plan = plan_run({**BASE, "backend": "sim"}, results_root=tmp_path)
    assert plan.finished == (sb,)
    assert sb in plan.delivered and set(plan.libraries) <= set(plan.delivered) and other not in plan.delivered
    pattern = re.compile(rf"results/gfx90c/(?P<library>{plan.library_pattern})/final\.yaml$")
    assert not pattern.match(f"results/gfx90c/{sb}/final.yaml")  # no job of the earlier night's library
    assert pattern.match(f"results/gfx90c/{db}/final.yaml") and pattern.match(
        f"results/gfx90c/{sb}c/final.yaml"
    )
    (tmp_path / "gfx90c" / "logic" / f"gfx90c_{sb}.provenance.json").write_text("{")
    with pytest.raises(PlanError, match=rf"gfx90c_{sb}.provenance.json: unreadable provenance record"):
        plan_run({**BASE, "backend": "sim"}, results_root=tmp_path)


def test_the_plan_counts_finalize_s_launches_for_a_workload_s_precision(tmp_path):
    from oto.run.estimate import plan_estimate

    good = tmp_path / "profile.yaml"
    good.write_text(
        "- { rocblas_function: \"rocblas_dgemm\", atomics_mode: 1, transA: 'N', transB: 'N', M: 1024, "
        "N: 1024, K: 1024, alpha: 1.0, lda: 1024, ldb: 1024, beta: 0.0, ldc: 1024, call_count: 40 }\n"
    )
    deck = {"workload": [{"source": "rocblas-log", "path": str(good)}]}

    def finalize(config):
        est = plan_estimate(plan_run(config), plan_run(config).profile)
        return {j.library: j for j in est.gpu_jobs if j.rule == "finalize"}

    on = finalize({**BASE, "patterns": ["NN", "TN"], "deck": deck})
    off = finalize(
        {**BASE, "patterns": ["NN", "TN"], "deck": deck, "benchmark": {"racing": {"workload_precision": 0}}}
    )
    called, uncalled = "Cijk_Ailk_Bljk_DB", "Cijk_Alik_Bljk_DB"
    assert on[uncalled] == off[uncalled]  # a library the workload does not call: as before
    extra = on[called].launches - off[called].launches
    assert 300 <= extra <= 3 * 120  # ~115 winner launches to +-1%, each with its two references
    # they go to the 1024^3 size, far slower than the library's mean size: the GPU time grows more
    gpu = lambda j: j.launches * j.kernel_us  # noqa: E731
    assert gpu(on[called]) - gpu(off[called]) > extra * off[called].kernel_us


def test_oto_plans_recorded_seconds_are_what_the_budget_sums_from_samples(tmp_path):
    """oto plan counts a benchmark job's GPU time as config budget will: the time_us samples.csv records."""
    from oto.measurement.budget import generation_gpu_seconds
    from oto.run.estimate import GpuJob

    job = GpuJob("benchmark", "Big", 0, 10, 8, 80, 1e3, 1e3, 1, 100.0)  # 1,000 launches of 100 µs
    path = tmp_path / "samples.csv"
    path.write_text("seq,time_us\n" + "".join(f"{i},100.0\n" for i in range(1000)))
    assert job.recorded_seconds == pytest.approx(generation_gpu_seconds(path)) == pytest.approx(0.1)


def test_the_plan_counts_the_selection_s_contenders_in_finalize_not_in_the_shortlist(monkeypatch):
    """finalize races the selection's contenders at their tuning size (an earlier generation's leader): the
    plan charges the demo's mean of them from the second generation on, and not to the shipped shortlist."""
    from oto.run import estimate

    def final(gens, contenders):
        monkeypatch.setattr(estimate, "CONTENDER_PAIRS_PER_SIZE", contenders)
        plan = plan_run({**BASE, "patterns": ["NN"], "max_generations": gens})
        est = estimate.plan_estimate(plan, plan.profile)
        (job,) = [j for j in est.gpu_jobs if j.rule == "finalize"]
        (plain,) = est.without_shortlist
        tuning = next(j.sizes for j in est.gpu_jobs if j.rule == "benchmark")
        return job, plain, tuning

    with_them, plain, sizes = final(4, 0.41)
    without, plain0, _ = final(4, 0.0)
    per_pair = estimate.CONTENDER_LAUNCHES_PER_PAIR * (1 + estimate.REFERENCE_SHARE)
    assert with_them.launches - without.launches == pytest.approx(0.41 * sizes * per_pair)
    # the shortlist's share is the same with or without them
    assert with_them.launches - plain.launches == pytest.approx(without.launches - plain0.launches)
    one_gen, _, _ = final(1, 0.41)  # one generation has no earlier leader
    assert one_gen.launches == pytest.approx(final(1, 0.0)[0].launches)


def test_a_workload_none_of_whose_calls_the_run_tunes_is_warned_of_at_dry_run():
    """A workload whose GEMMs are all outside the selected families passed the dry-run without a word; the
    only sign was the coverage job's warnings halfway through the night."""
    from oto.run.dry_run import plan_lines
    from oto.run.estimate import workload_lines, workload_warning

    none = {"calls_covered": 0, "calls_uncovered": 3, "calls_by_library": {"Cijk_Ailk_Bljk_DB": 0},
            "uncovered": [{"where": "sb.csv:1", "gemm": "gemm NN f32_r", "calls": 3,
                           "reason": "library Cijk_Ailk_Bljk_SB is not selected in this run"}]}  # fmt: skip
    note = workload_warning(none)
    assert note.startswith("none of the workload's 3 calls is in this run's libraries")
    assert workload_lines(none)[-1] == f"Warning: {note}"
    assert workload_warning({**none, "calls_covered": 1}) is None and workload_warning(None) is None
    lines = plan_lines([("ceilings", {"arch": "gfx90c"})], "about 1 s", None, None, note)
    assert lines[-1] == f"oto: warning: {note}"
