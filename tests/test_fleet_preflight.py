"""The tester's preflight says in plain words what is there and what is missing: GPU and arch, ROCm/HIP,
Tensile, HSA_OVERRIDE_GFX_VERSION, desktop or text console, carve-out, power, memory, the device profile and
the API key; STOP items keep the run from starting. Facts come from captured outputs (tests/data/fleet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import FAKE_KEY, make_root, oto, runner
from oto.fleet.device import device_profile, read_facts
from oto.fleet.intake import text_problem
from oto.fleet.preflight import RunChoices, blocking, checks, format_checks, power_facts, session_facts
from oto.hardware.profile import load_profile
from workflow_helpers import REPO

ARCH = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
NO_GPU_REPORT = {
    "gpu": {"agents": [], "physical": None, "effective": None, "override": None, "source": None},
    "hip_version": None,
    "tensile": {"found": False, "why": "no tensile.python, $OTO_TENSILE_PYTHON or `Tensile` on PATH"},
    "auto_backend": "sim",
    "auto_backend_reason": "no AMD GPU visible",
}
TENSILE_REPORT = {
    "gpu": {
        "agents": ["gfx90c"],
        "physical": "gfx90c",
        "effective": "gfx90c",
        "override": None,
        "source": "x",
    },
    "hip_version": "6.1.2",
    "tensile": {"found": True, "version": "4.40.0", "native": {"gfx90c": False}},
    "auto_backend": "tensile",
    "auto_backend_reason": "GPU gfx90c and Tensile found",
}
TTY = {}  # a text console: no DISPLAY, no XDG_SESSION_TYPE


def run_checks(root, environ=TTY, report=NO_GPU_REPORT, config=None, simulate=False, facts=None):
    run = runner(root)
    facts = facts or read_facts(root, run)
    device = device_profile(ARCH, facts, "arch_profiles/gfx90c.yaml") if facts.arch == "gfx90c" else None
    found = checks(
        arch="gfx90c",
        env_report=report,
        facts=facts,
        arch_profile=ARCH,
        device=device,
        session=session_facts(environ, run, tty="/dev/tty3"),
        power=power_facts(root, run),
        environ=environ,
        choices=RunChoices.from_config(config or {}),
        simulate=simulate,
    )
    for c in found:  # the tester's own bundle carries these texts: they must pass the merge's text check
        assert text_problem(c.found) is None and text_problem(c.advice) is None, c
    return {c.name: c for c in found}, found


def test_the_volunteers_laptop_on_a_text_console(tmp_path):
    by, found = run_checks(make_root(tmp_path))
    assert (
        by["gpu"].status == "ok"
        and "gfx90c" in by["gpu"].found
        and "8 CUs at up to 1900 MHz" in by["gpu"].found
    )
    assert by["session"].status == "ok" and "text console /dev/tty3" in by["session"].found
    assert by["carve_out"].status == "ok" and "2.0 GiB" in by["carve_out"].found
    assert by["power"].status == "ok" and by["power_profile"].status == "ok"
    assert by["memory"].status == "ok" and "ddr4-3200, dual channel: 51.2 GB/s" in by["memory"].found
    assert "FP32 ceiling 1946 GFLOPS" in by["device_profile"].found and "1613" in by["device_profile"].found
    assert by["hsa_override"].status == "ok"
    assert by["numbers"].status == "note" and "SIMULATED" in by["numbers"].found
    assert by["tensile"].status == "warn" and "OTO_TENSILE_PYTHON" in by["tensile"].advice
    assert not blocking(found)
    text = format_checks(found)
    assert "Ready." in text and "[WARN] tensile" in text


def test_without_an_api_key_the_run_says_it_uses_the_search_strategy_alone(tmp_path):
    by, _ = run_checks(make_root(tmp_path), config={"search": {"strategy": "symbolic"}})
    assert by["api_key"].status == "note"
    assert "no ANTHROPIC_API_KEY: the run uses the symbolic search strategy alone" in by["api_key"].found


def test_with_a_key_it_says_so_and_never_shows_the_key(tmp_path):
    by, found = run_checks(make_root(tmp_path), environ={"ANTHROPIC_API_KEY": FAKE_KEY})
    assert by["api_key"].status == "ok" and "never written" in by["api_key"].found
    assert FAKE_KEY not in format_checks(found) and FAKE_KEY[-8:] not in format_checks(found)


@pytest.mark.parametrize(
    "environ, kind", [({"DISPLAY": ":0"}, "graphical"), ({"XDG_SESSION_TYPE": "wayland"}, "wayland")]
)
def test_a_desktop_session_is_warned_about_gpu_resets(tmp_path, environ, kind):
    by, found = run_checks(make_root(tmp_path), environ=environ)
    assert by["session"].status == "warn" and kind in by["session"].found
    assert "GPU reset" in by["session"].advice and "Ctrl+Alt+F3" in by["session"].advice
    assert not blocking(found)


def test_a_running_login_screen_on_a_text_console_is_a_note(tmp_path):
    by, _ = run_checks(make_root(tmp_path, display_manager="active"))
    assert by["session"].status == "note" and "systemctl stop display-manager" in by["session"].advice


def test_a_small_carve_out_battery_and_power_saving_are_warned(tmp_path):
    by, found = run_checks(make_root(tmp_path, vram_bytes=512 << 20, on_ac=False, power_profile="Battery"))
    assert by["carve_out"].status == "warn" and "512 MiB" in by["carve_out"].found
    assert "UMA Frame Buffer Size" in by["carve_out"].advice
    assert by["power"].status == "warn" and "charger" in by["power"].advice
    assert (
        by["power_profile"].status == "warn"
        and "system76-power profile performance" in by["power_profile"].advice
    )
    assert not blocking(found)


def test_the_acpi_platform_profile_is_read_when_no_daemon_answers(tmp_path):
    root = make_root(tmp_path, power_profile=None)
    (root / "sys/firmware/acpi").mkdir(parents=True)
    (root / "sys/firmware/acpi/platform_profile").write_text("low-power\n")
    power = power_facts(root, runner(root))
    assert power["profile"] == "low-power" and power["profile_source"] == "platform_profile"


def test_unknown_memory_says_how_to_provide_it(tmp_path):
    by, _ = run_checks(make_root(tmp_path, dmidecode=None))
    assert (
        by["memory"].status == "warn"
        and "sudo dmidecode -t memory > dmidecode-memory.txt" in by["memory"].advice
    )
    assert "--memory lpddr4x-4266" in by["memory"].advice


def test_single_channel_memory_is_warned(tmp_path):
    by, _ = run_checks(make_root(tmp_path, dmidecode="dmidecode_ddr4_single.txt"))
    assert by["memory"].status == "warn" and "single channel" in by["memory"].found


def test_an_override_that_hides_the_isa_from_tensile_stops_a_measured_run(tmp_path):
    root = make_root(tmp_path)
    env = {"HSA_OVERRIDE_GFX_VERSION": "9.0.0"}
    by, found = run_checks(root, environ=env, report=TENSILE_REPORT)
    assert by["hsa_override"].status == "stop" and "HIP see gfx900" in by["hsa_override"].found
    assert "unset HSA_OVERRIDE_GFX_VERSION" in by["hsa_override"].advice and blocking(found)
    assert "tensile: {isa: gfx900}" in by["hsa_override"].advice  # the way to tune under it, and its risk
    assert "rocm-libraries#6320" in by["hsa_override"].advice
    assert "Cannot start" in format_checks(found)
    ok, _ = run_checks(root, environ=env, report=TENSILE_REPORT, config={"tensile": {"isa": "gfx900"}})
    assert ok["hsa_override"].status == "note"
    sim, _ = run_checks(root, environ=env)  # simulated: the override does not matter
    assert sim["hsa_override"].status == "note"
    bad, _ = run_checks(root, environ={"HSA_OVERRIDE_GFX_VERSION": "nine"})
    assert bad["hsa_override"].status == "warn"
    measured, _ = run_checks(root, report=TENSILE_REPORT)
    assert measured["numbers"].status == "ok" and "MEASURES" in measured["numbers"].found
    assert "not known, oto registers it at run time" in measured["tensile"].found


def test_another_gpu_stops_unless_simulated(tmp_path):
    root = make_root(tmp_path)
    facts = read_facts(root, runner(root))
    facts.arch = "gfx1035"
    by, found = run_checks(root, facts=facts)
    assert by["gpu"].status == "stop" and "your GPU is gfx1035" in by["gpu"].found and blocking(found)
    sim, found = run_checks(root, facts=facts, simulate=True)
    assert sim["gpu"].status != "stop" and not blocking(found)


def test_no_gpu_at_all_runs_simulated_and_says_so(tmp_path):
    by, found = run_checks(tmp_path, facts=read_facts(tmp_path, lambda cmd: None))
    assert by["gpu"].status == "warn" and "simulated GPU" in by["gpu"].advice
    assert by["device_profile"].status == "note" and not blocking(found)


def test_oto_tester_check_prints_the_preflight_and_exits_by_it(tmp_path):
    from workflow_helpers import FAST_CONFIG, make_workdir

    work = make_workdir(tmp_path, FAST_CONFIG)
    root = make_root(tmp_path)
    proc = oto(work, "tester", "check", "--shard", "2/2", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "shard 2/2" in proc.stdout and "[ok  ] gpu" in proc.stdout and "Ready." in proc.stdout
    assert not (work / "results").exists()  # a check writes nothing
    bad = oto(work, "tester", "check", "--shard", "3/2", "--root", str(root))
    assert bad.returncode == 2 and "--shard" in bad.stderr and "between 1 and n" in bad.stderr
    bad = oto(work, "tester", "check", "--shard", "1/0", "--root", str(root))
    assert bad.returncode == 2 and "n must be at least 1" in bad.stderr
    # a shard as typed, spaces and leading zeros included, is the shard it names (it was a traceback)
    typed = oto(work, "tester", "check", "--shard", " 02 / 2 ", "--root", str(root))
    assert typed.returncode == 0 and "shard 2/2" in typed.stdout and "Traceback" not in typed.stderr


def test_the_tester_names_a_config_without_an_arch(tmp_path):
    import argparse

    from oto.fleet.tester import _config

    config = tmp_path / "tester.yaml"
    config.write_text("families: all\n")
    with pytest.raises(SystemExit, match=r"tester.yaml: field 'arch': missing"):
        _config(argparse.Namespace(configfile=str(config)))


def test_another_gpu_is_told_the_arch_to_run_with(tmp_path, monkeypatch):
    """A 780M owner given the gfx90c configuration is told the flag that tunes their GPU, not to write a
    configuration; a GPU oto has no profile of is told so."""
    monkeypatch.chdir(REPO)
    root = make_root(tmp_path)
    facts = read_facts(root, runner(root))
    facts.arch = "gfx1103"
    by, _ = run_checks(root, facts=facts)
    assert by["gpu"].status == "stop" and "run again with --arch gfx1103" in by["gpu"].advice
    facts.arch = "gfx1036"
    by, _ = run_checks(root, facts=facts)
    assert "oto has no profile of gfx1036" in by["gpu"].advice and "--arch" not in by["gpu"].advice


def test_the_testers_arch_replaces_the_configs_and_a_resumed_night_keeps_it(tmp_path, monkeypatch):
    import argparse
    import shutil

    from oto.files import write_yaml
    from oto.fleet.tester import _config

    shutil.copytree(REPO / "arch_profiles", tmp_path / "arch_profiles")
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "tester.yaml", tmp_path / "config" / "tester.yaml")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(configfile=None, arch="gfx1103")
    config, path = _config(args)
    assert config["arch"] == "gfx1103" and path == Path("config/tester.yaml") and args.arch == "gfx1103"
    with pytest.raises(SystemExit, match=r"oto tester: --arch gfx1999: no arch_profiles/gfx1999.yaml"):
        _config(argparse.Namespace(configfile=None, arch="gfx1999"))
    with pytest.raises(SystemExit, match=r"oto tester: --arch: not an AMDGPU arch name: '780m'"):
        _config(argparse.Namespace(configfile=None, arch="780m"))
    # the next night, the same command without --arch: the last run's arch, with its config file
    write_yaml(
        Path("results/gfx1103/tester/run.yaml"),
        {"configfile": "config/tester.yaml", "overrides": {"shard": "2/4", "arch": "gfx1103"}},
    )
    resumed = argparse.Namespace(configfile=None, arch=None)
    assert _config(resumed)[0]["arch"] == "gfx1103" and resumed.arch == "gfx1103"
    # another config file named on the command line is taken as it is
    assert _config(argparse.Namespace(configfile="config/tester.yaml", arch=None))[0]["arch"] == "gfx90c"


def test_ctrl_c_during_the_night_still_leads_to_the_bundle():
    """Ctrl+C reaches the tester and its Snakemake alike (one process group). The tester waited in
    subprocess.run, died with a KeyboardInterrupt traceback and wrote no bundle, though docs/fleet.md says
    an interrupted night is bundled. Now it waits for the night to stop and returns 130 to the bundling."""
    import os
    import signal
    import subprocess
    import sys
    import time

    night = "import signal, sys, time; signal.signal(signal.SIGINT, lambda *a: sys.exit(3)); time.sleep(60)"
    code = "from oto.fleet.tester import run_night; import sys; "
    code += f"print('rc', run_night([sys.executable, '-c', {night!r}]))"
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    time.sleep(3)  # the night is running
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == "rc 130", err
    assert "waiting for Snakemake to stop, then bundling what finished" in err and "Traceback" not in err


def test_a_bundle_of_a_night_stopped_before_any_measurement_says_so(tmp_path, monkeypatch, capsys):
    """It said "The library of this run (...) holds none numbers — not for installing"."""
    from oto.fleet import tester

    monkeypatch.setattr(tester, "merge_check", lambda *a, **k: None)
    path = tmp_path / "b.oto.tar.gz"
    path.write_bytes(b"x")
    desc = {"finished": [], "libraries": ["L"], "numbers": "none", "shard": "1/1", "arch": "gfx1103",
            "config": {}, "configfile": "config/tester.yaml"}  # fmt: skip
    assert tester._say_bundle(path, desc)
    out = capsys.readouterr().out
    assert "Nothing was measured yet: this night built no library." in out and "none numbers" not in out
