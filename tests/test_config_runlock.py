import copy
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from oto.config import ConfigError, night_record, validate_config
from oto.run.lock import RunLockError, acquire_run_lock
from workflow_helpers import REPO


def test_defaults_filled_and_errors_name_field():
    cfg = validate_config({"arch": "gfx90c", "families": ["DB"]}, "c.yaml")
    assert cfg["max_generations"] == 8 and cfg["search"]["convergence"]["patience"] == 2
    with pytest.raises(ConfigError, match=r"c.yaml: field 'benchmark.repetitions'"):
        validate_config({"arch": "gfx90c", "families": ["DB"], "benchmark": {"repetitions": 0}}, "c.yaml")
    with pytest.raises(ConfigError, match=r"^c.yaml: field 'typo': not a config field$"):  # the key, named
        validate_config({"arch": "gfx90c", "families": ["DB"], "typo": 1}, "c.yaml")


def test_run_lock_refuses_a_second_run_and_dies_with_its_holder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockError, match=rf"another oto run \(pid {holder.pid}\) is running in"):
            acquire_run_lock(tmp_path)
        os.kill(holder.pid, signal.SIGKILL)  # power cut: no cleanup runs, no lock file is removed
        holder.wait(timeout=10)
        fd = acquire_run_lock(tmp_path)  # the kernel released the dead run's lock
        assert (tmp_path / ".snakemake" / "oto-run.lock").read_text().strip() == str(os.getpid())
        os.close(fd)
    finally:
        if holder.poll() is None:
            holder.kill()


HOLD = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "workflow")!r})
from oto.run.lock import acquire_run_lock
acquire_run_lock(sys.argv[1])
print("locked", flush=True)
time.sleep(60)
"""


def test_a_config_file_with_a_yaml_error_is_named_by_file_and_line(tmp_path):
    from oto.config import checked_config_file, load_config

    path = tmp_path / "config.yaml"
    path.write_text("arch: gfx90c\nfamilies: [DB\nseed: 3\n")
    for check in (checked_config_file, load_config):
        with pytest.raises(
            ConfigError, match=rf"^{path}: YAML syntax error at line 3, column 5: expected ','"
        ):
            check(path)
    path.write_text("arch: gfx90c\n")
    assert checked_config_file(path) == str(path)
    assert checked_config_file(tmp_path / "absent.yaml") == str(tmp_path / "absent.yaml")  # Snakemake says


def test_a_night_records_the_families_its_arch_selected_not_the_whole_per_library_mapping():
    config = validate_config({"arch": "gfx90c", "families": {"vega10": ["DB"], "navi31": ["HB", "SB"]}})
    assert night_record(config, "navi31")["families"] == ["HB", "SB"]
    assert night_record(config, "vega10")["families"] == ["DB"]
    # the id is the whole config's: the same config names the same night on every arch
    assert night_record(config, "navi31")["id"] == night_record(config, "vega10")["id"]
    assert night_record(validate_config({"arch": "gfx90c", "families": ["DB"]}))["families"] == ["DB"]


def test_a_night_records_the_registries_it_warm_started_from():
    """registry.warm_start is part of the night record (final.yaml, the logic provenance, the report): which
    other GPUs' kernels were the search's priors. A cold night's record has no such field."""
    cold = validate_config({"arch": "gfx902", "families": ["DB"]})
    warm = validate_config(
        {"arch": "gfx902", "families": ["DB"], "registry": {"warm_start": ["results/gfx90c"]}}
    )
    assert "warm_start" not in night_record(cold)
    assert night_record(warm)["warm_start"] == ["results/gfx90c"]
    assert night_record(warm)["id"] != night_record(cold)["id"]
    from oto.reporting.acceptance import nights_markdown

    nights = {n["id"]: {**n, "libraries": ["Cijk_Ailk_Bjlk_DB"]} for n in (night_record(warm),)}
    (line,) = nights_markdown(nights, ["Cijk_Ailk_Bjlk_DB"])
    assert line.endswith(
        "backend auto; warm start from results/gfx90c (other GPUs' registries: their kernels were labelled "
        "priors of the search, never measurements here)."
    )
    (line,) = nights_markdown({n["id"]: {**n, "libraries": []} for n in (night_record(cold),)}, [])
    assert line.endswith("backend auto.")
    from oto.reporting.dashboard import environment  # the HTML pages' line (acceptance.html, the dashboard)

    note = environment().get_template("_macros.html.j2").module.nights_note
    assert '<span data-test="warm-start">results/gfx90c</span>' in str(note(nights))
    assert "warm start" not in str(note({n["id"]: {**n, "libraries": []} for n in (night_record(cold),)}))


def test_a_night_config_is_read_as_snakemake_layers_it(monkeypatch, tmp_path):
    """Snakemake runs `--configfile night.yaml` over the Snakefile's config/config.yaml, key by key: every oto
    command that reads a run's config (the tester's bundle and merge check, oto merge, plan, shards) reads
    the same layers, and the testers' night is not capped by the demo's deck.max_sizes."""
    from oto.config import layered_config
    from snakemake.utils import update_config

    monkeypatch.chdir(REPO)
    demo = yaml.safe_load((REPO / "config/config.yaml").read_text())
    night = yaml.safe_load((REPO / "config/tester.yaml").read_text())
    overrides = {"shard": "2/4", "arch": "gfx1103", "benchmark": {"repetitions": 7}}
    expected = copy.deepcopy(demo)
    update_config(expected, night)
    update_config(expected, overrides)
    assert layered_config(["config/tester.yaml"], overrides) == expected
    assert demo["deck"]["max_sizes"] == 128 and expected["deck"]["max_sizes"] is None
    assert expected["benchmark"]["tuning_sizes"] == night["benchmark"]["tuning_sizes"]  # nested: merged
    assert layered_config(["config/config.yaml"]) == demo  # the workflow's own file once or twice: the same
    # a broken layer is named by file
    bad = tmp_path / "night.yaml"
    bad.write_text("deck: [1, 2\n")
    with pytest.raises(ConfigError, match=r"night.yaml: YAML syntax error"):
        layered_config([bad])
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match=r"night.yaml: field '<top level>': expected a mapping"):
        layered_config([bad])
