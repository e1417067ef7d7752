"""``oto tester`` and ``oto shards``: commands (like oto.cli they drive Snakemake and read the run plan,
oto.run.plan; nothing in the domain imports this module).

``oto tester``, one command for a tester: ``check`` runs the preflight; ``run`` runs the preflight, writes
the device profile, runs the workflow on this device's shard with ``snakemake`` and packs the bundle;
``bundle`` packs (again) the bundle of the last run, after a resumed or interrupted night. Both run the
maintainer's intake on the bundle they wrote (:func:`merge_check`) and say what the merge would reject or
quarantine before the tester sends it. ``oto shards N`` prints what each of N shards holds.

The tester's own files live under ``results/<arch>/tester/``: ``device/<arch>.yaml`` (the device profile,
rewritten only when a fact changed, so a resumed run redoes nothing), ``preflight.yaml`` and ``run.yaml``
(the settings of the last run, which ``bundle`` reuses). Bundles go to ``bundles/``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from oto.config import ConfigError, config_default, layered_config
from oto.deck.shards import Shard, ShardError
from oto.files import atomic_write_text, dump_yaml, read_yaml
from oto.fleet import split_passthrough
from oto.fleet.bundle import BundleError, BundleSpec, Scrubber, file_sha256, write_bundle
from oto.fleet.calibrate import calibrated_path, carry_calibration
from oto.fleet.device import DeviceFacts, device_profile, read_facts, run_command
from oto.fleet.preflight import (
    Check,
    RunChoices,
    as_records,
    blocking,
    checks,
    current_tty,
    format_checks,
    power_facts,
    session_facts,
)
from oto.hardware.device_profile import DeviceProfileError
from oto.hardware.profile import ProfileError, arch_profile_file, load_profile, profile_path

DEFAULT_CONFIGS = ("config/tester.yaml", "config/config.yaml")
MEMORY_INFO = "dmidecode-memory.txt"


def captured_runner(root: Path):
    """With ``--root``, commands answer from captured outputs: ``<root>/captured/<cmd words joined by _>.txt``
    (``rocminfo.txt``, ``dmidecode_-t_17.txt``, ``systemctl_is-active_display-manager.txt``); None if
    absent."""

    def run(cmd: list[str]) -> str | None:
        f = root / "captured" / ("_".join(cmd) + ".txt")
        return f.read_text() if f.is_file() else None

    return run


def _last_run() -> dict[str, Any]:
    """The settings of the last ``oto tester run`` in this folder (its config file and shard), if one."""
    runs = sorted(Path("results").glob("*/tester/run.yaml"), key=lambda p: p.stat().st_mtime)
    return (read_yaml(runs[-1]) or {}) if runs else {}


def _config(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """The config file: --configfile, else the last run's (the same command every night), else the first of
    DEFAULT_CONFIGS; its arch replaced by --arch, else by the last run's --arch when the file is the last
    run's (``args.arch`` is set to the arch that replaced the file's, or None)."""
    last_run = _last_run()
    last = last_run.get("configfile")
    if args.configfile:
        path = Path(args.configfile)
    elif last and Path(last).is_file():
        path = Path(last)
        args.arch = getattr(args, "arch", None) or (last_run.get("overrides") or {}).get("arch")
    else:
        path = next((Path(c) for c in DEFAULT_CONFIGS if Path(c).is_file()), Path(DEFAULT_CONFIGS[-1]))
    if not path.is_file():
        raise SystemExit(f"oto tester: no configuration {path} (run the command in the oto folder)")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"oto tester: {path}: field '<top level>': expected a mapping")
    if not isinstance(data.get("arch"), str):
        raise SystemExit(f"oto tester: {path}: field 'arch': missing (the GPU to tune, as arch: gfx90c)")
    try:  # what Snakemake will run with: the file over config/config.yaml (its deck cap, say)
        config = layered_config([path])
    except ConfigError as exc:
        raise SystemExit(f"oto tester: {exc}") from None
    arch = getattr(args, "arch", None)
    if arch:
        config["arch"] = _known_arch(arch, "oto tester")
    return config, path


def _known_arch(arch: str, prog: str) -> str:
    """``--arch``: an arch oto has a profile of in this folder, else a message saying which it has."""
    try:
        arch_profile_file(arch, "--arch")
    except ProfileError as exc:
        raise SystemExit(f"{prog}: {exc}") from None
    return arch


def _preflight(
    args: argparse.Namespace, config: dict[str, Any]
) -> tuple[list[Check], DeviceFacts, dict | None]:
    from oto.config import validate_config
    from oto.environment import report

    cfg = validate_config({**config, "shard": args.shard}, "config")
    arch = cfg["arch"]
    arch_file = profile_path(arch)
    arch_profile = load_profile(arch_file)
    root = Path(args.root) if args.root else Path("/")
    run = captured_runner(root) if args.root else run_command
    info = Path(args.memory_info) if args.memory_info else Path(MEMORY_INFO)
    try:
        facts = read_facts(root, run, memory=args.memory, memory_info=info if info.is_file() else None)
    except ValueError as exc:
        raise SystemExit(f"oto tester: --memory: {exc}") from None
    device = None
    problem = None
    try:
        device = device_profile(arch_profile, facts, str(arch_file))
    except (DeviceProfileError, ValueError) as exc:
        problem = Check(
            "device_profile",
            "stop",
            f"the device facts do not fit {arch}: {exc}",
            "check the values read above; pass --memory if the memory was misread",
        )
    env_report = report(arch_profile, cfg["tensile"])
    env_report["hip_version"] = env_report.get("hip_version") or facts.rocm
    environ = dict(os.environ)
    found = checks(
        arch=arch,
        env_report=env_report,
        facts=facts,
        arch_profile=arch_profile,
        device=device,
        session=session_facts(environ, run, tty=None if args.root else current_tty()),
        power=power_facts(root, run),
        environ=environ,
        choices=RunChoices.from_config(cfg),
        simulate=args.simulate,
    )
    if problem is not None:
        found = [c for c in found if c.name != "device_profile"] + [problem]
    return found, facts, device


def _tester_dir(arch: str) -> Path:
    return Path("results") / arch / "tester"


def _write_if_changed(path: Path, text: str) -> None:
    """Keep the file (and its mtime) when nothing changed: Snakemake reruns every job of a changed input."""
    if path.is_file() and path.read_text() == text:
        return
    atomic_write_text(path, text)


def merge_check(
    path: Path, config: dict[str, Any], arch: str, numbers: str, configfile: str = "config/tester.yaml"
) -> str | None:
    """Run the maintainer's intake (:func:`oto.fleet.intake.open_bundle`, the checks ``oto merge`` runs) on
    the bundle just written and say what it finds: None when the merge would accept it, else the reason it
    would be rejected. Quarantined text fields are listed (they merge, neutralised). It says which merge
    command accepts it: the merge takes measured numbers and config/tester.yaml's deck unless told."""
    from oto.fleet.intake import Expect, Rejected, open_bundle
    from oto.fleet.merge import merge_deck, shipped_kernels

    arch_profile = load_profile(profile_path(arch))
    deck = merge_deck(config, arch_profile)
    sizes = {name: lib.sizes for name, lib in deck.libraries.items()}
    expect = Expect(arch, arch_profile, numbers, None, sizes, config, shipped_kernels(deck, arch_profile))
    try:
        accepted = open_bundle(path, expect)
    except Rejected as exc:
        print(
            f"\nMerge check: the maintainer's merge would REJECT this bundle: {exc}\n"
            "  Nothing of it would be merged. Fix what it names (or report it as an oto bug) before "
            "sending it.",
            file=sys.stderr,
        )
        return str(exc)
    flags = [f"--arch {arch}"] + ([] if numbers == "measured" else [f"--numbers {numbers}"])
    flags += [] if configfile == "config/tester.yaml" else [f"--configfile {configfile}"]
    print(
        "\nMerge check (the checks `oto merge` runs): this bundle would be accepted by `oto merge "
        f"{path.parent} {' '.join(flags)}`",
        end="",
    )
    flags = accepted.quarantine
    print(f"; {len(flags)} text field(s) would be quarantined (merged, neutralised):" if flags else ".")
    for f in flags[:10]:
        print(f"  {f['field']}: {f['problem']}")
    return None


def _bundle(run_settings: dict[str, Any], bundles: Path, preflight: list[dict] | None) -> tuple[Path, dict]:
    from oto.run.plan import PlanError, plan_run

    cfg_path = run_settings["configfile"]
    try:  # the config the night ran with (Snakemake's layering), which the bundle records
        config = layered_config([cfg_path], run_settings["overrides"])
        plan = plan_run(config, [cfg_path])
    except (ConfigError, PlanError) as exc:
        raise SystemExit(f"oto tester: {exc}") from None
    results = Path("results") / plan.arch
    logs_root = results / "logs"
    logs = sorted(p for p in logs_root.glob("*") if p.is_file())
    for lib in plan.libraries:
        logs += sorted(p for p in (logs_root / lib).rglob("*") if p.is_file())
    extra = []
    smk_logs = sorted(Path(".snakemake/log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if smk_logs:
        extra.append(("snakemake.log", smk_logs[-1]))
    spec = BundleSpec(
        arch=plan.arch,
        shard=str(plan.shard),
        libraries=plan.libraries,
        config=plan.config,
        profile=load_profile(plan.profile_file),
        arch_profile=load_profile(profile_path(plan.arch)),
        arch_profile_file=profile_path(plan.arch),
        results=results,
        logs=logs,
        preflight=preflight,
        extra_logs=extra,
    )
    path, descriptor = write_bundle(spec, bundles, Scrubber(os.environ, Path.cwd()))
    return path, {**descriptor, "config": plan.config, "configfile": str(cfg_path)}


def _say_bundle(path: Path, descriptor: dict[str, Any]) -> bool:
    """Say what was written and what the merge would make of it; False when it would reject it."""
    done, total = len(descriptor["finished"]), len(descriptor["libraries"])
    print(f"\nBundle written: {path}")
    print(f"  size {path.stat().st_size} bytes, sha256 {file_sha256(path)}")
    print(
        f"  numbers: {descriptor['numbers']}; {done} of {total} libraries of shard "
        f"{descriptor['shard']} finished"
        + ("; run the same command again to resume the rest" if done < total else "")
    )
    print("  Send this file to the maintainer (e-mail, shared folder, or the upload link they gave you).")
    library = f"results/{descriptor['arch']}/TensileLibrary.dat"
    if descriptor["numbers"] == "measured":
        print(f"  Your own tuned library for this machine: {library}")
    elif descriptor["numbers"] != "none":  # a simulated (or replayed) night tunes nothing for this machine
        numbers = descriptor["numbers"]
        print(f"  The library of this run ({library}) holds {numbers} numbers — not for installing.")
    else:  # interrupted before anything was measured
        print("  Nothing was measured yet: this night built no library.")
    numbers, config = str(descriptor["numbers"]), descriptor["config"]
    return merge_check(path, config, descriptor["arch"], numbers, descriptor["configfile"]) is None


def main(argv: Sequence[str]) -> int:
    argv, extra = split_passthrough(argv)
    ap = argparse.ArgumentParser(
        prog="oto tester",
        description="One command for a tester: check this machine, tune your shard of the deck overnight, "
        "and pack the results into one bundle for the maintainer (README, 'For testers').",
        epilog="Arguments after -- go to snakemake (e.g. oto tester run --shard 2/4 -- --keep-going).",
    )
    ap.add_argument(
        "action",
        choices=("check", "run", "bundle"),
        nargs="?",
        default="run",
        help="check: preflight only; run (default): preflight, tuning, bundle; bundle: pack the last run",
    )
    ap.add_argument("--shard", default=None, help="i/n: your shard, as the maintainer gave it (default 1/1)")
    ap.add_argument(
        "--arch",
        help="the GPU to tune when it is not the configuration's (e.g. gfx1103 on a Radeon 780M, gfx1035 on "
        "a 680M; a resumed night keeps the last run's)",
    )
    ap.add_argument(
        "--configfile",
        help=f"run configuration (default: the last run's, else the first of {', '.join(DEFAULT_CONFIGS)})",
    )
    ap.add_argument(
        "--memory",
        help="your memory as TYPE-SPEED, e.g. ddr4-3200 or lpddr4x-4266 (when the check cannot read it)",
    )
    ap.add_argument(
        "--memory-info", help=f"saved output of 'sudo dmidecode -t memory' (default {MEMORY_INFO})"
    )
    ap.add_argument("--simulate", action="store_true", help="use the simulated GPU even where a GPU is found")
    ap.add_argument("--cores", help="CPU cores for compiles (default: all)")
    ap.add_argument("--bundles", default="bundles", help="folder for the bundle (default bundles/)")
    ap.add_argument(
        "--root",
        help="read the device's facts (sysfs, /proc, dmidecode output) under this folder instead of / "
        "(to check a machine's copied files, and for tests)",
    )
    args = ap.parse_args(argv)
    config, cfg_path = _config(args)
    arch = config["arch"]
    tdir = _tester_dir(arch)
    settings_path = tdir / "run.yaml"
    if args.action == "bundle":
        if not settings_path.is_file():
            print(
                f"oto tester: no run to bundle ({settings_path} not found); run `oto tester run` first",
                file=sys.stderr,
            )
            return 2
        settings = read_yaml(settings_path)
        pre = read_yaml(tdir / "preflight.yaml") if (tdir / "preflight.yaml").is_file() else None
        try:
            path, descriptor = _bundle(settings, Path(args.bundles), pre)
        except BundleError as exc:
            print(f"oto tester: {exc}", file=sys.stderr)
            return 1
        return 0 if _say_bundle(path, descriptor) else 1
    if args.shard is None:
        previous = read_yaml(settings_path) if settings_path.is_file() else {}
        args.shard = ((previous or {}).get("overrides") or {}).get("shard") or config_default("shard")
    try:
        args.shard = str(Shard.parse(args.shard))  # " 2/4", "02/4" and "2 / 4" as the config's "2/4"
    except ShardError as exc:
        print(f"oto tester: --shard: {exc}", file=sys.stderr)
        return 2
    print(f"oto tester: {cfg_path}, shard {args.shard}\n")
    found, facts, device = _preflight(args, config)
    print(format_checks(found))
    if args.action == "check":
        return 1 if blocking(found) else 0
    if blocking(found):
        return 2
    dev_path = tdir / "device" / f"{arch}.yaml"
    numbers = "simulated" if args.simulate or config.get("backend") == "sim" else "measured"
    device, note = carry_calibration(
        device, calibrated_path(Path("results"), arch, device["device"]["id"]), numbers
    )
    if note:
        print(f"oto tester: {note}")
    _write_if_changed(dev_path, dump_yaml(device))
    _write_if_changed(tdir / "preflight.yaml", dump_yaml(as_records(found)))
    overrides = {"shard": args.shard, "device_profile": str(dev_path)}
    if args.arch:
        overrides["arch"] = arch
    if args.simulate:
        overrides["backend"] = "sim"
    settings = {"configfile": str(cfg_path), "overrides": overrides}
    _write_if_changed(settings_path, dump_yaml(settings))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--configfile",
        str(cfg_path),
        "--config",
        *(f"{k}={v}" for k, v in overrides.items()),
    ]
    if args.cores:
        cmd += ["--cores", str(args.cores)]
    cmd += extra
    print(
        f"\nRunning: snakemake {' '.join(cmd[3:])}\n(interrupted? run the same command again: finished work "
        "is kept)\n",
        flush=True,
    )
    rc = run_night(cmd)
    if rc != 0:
        print(
            f"\nThe run stopped with errors (snakemake exit {rc}); bundling what finished.", file=sys.stderr
        )
    try:
        path, descriptor = _bundle(settings, Path(args.bundles), as_records(found))
    except BundleError as exc:
        print(f"oto tester: {exc}", file=sys.stderr)
        return 1
    accepted = _say_bundle(path, descriptor)
    return rc or (0 if accepted else 1)


def run_night(cmd: list[str]) -> int:
    """Run the night's Snakemake and return its exit code; Ctrl+C (which the terminal sends to Snakemake too)
    waits for Snakemake to stop its jobs and returns 130, so the caller still bundles what finished (a
    second Ctrl+C stops Snakemake at once)."""
    proc = subprocess.Popen(cmd)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        print("\noto tester: interrupted; waiting for Snakemake to stop, then bundling what finished",
              file=sys.stderr, flush=True)  # fmt: skip
        try:
            proc.wait()
        except KeyboardInterrupt:
            proc.kill()
            proc.wait()
        return 130


def shards_main(argv: list[str]) -> int:
    """``oto shards N``: what each of N shards holds, for the maintainer choosing N (one night per shard)."""
    import argparse

    from oto.config import validate_config
    from oto.deck.model import DeckError
    from oto.deck.size_cap import SizeCap
    from oto.deck.sources import cap_deck, deck_settings, run_source
    from oto.hardware.profile import ProfileError
    from oto.run.plan import PlanError, select_libraries

    ap = argparse.ArgumentParser(
        prog="oto shards",
        description="Print the libraries and deck sizes of each of N shards of the selected deck (a "
        "library's shard is a hash of its name: the split never changes when the deck does).",
    )
    ap.add_argument("count", type=int, help="number of shards (testers)")
    ap.add_argument(
        "--configfile", default="config/tester.yaml", help="config whose families and deck to split"
    )
    ap.add_argument("--arch", help="the GPU whose deck to split when it is not the configuration's (gfx1103)")
    args = ap.parse_args(argv)
    if args.count < 1:
        ap.error("count must be at least 1")
    try:
        raw = layered_config([args.configfile])  # as Snakemake layers it over config/config.yaml
        if args.arch:
            raw["arch"] = _known_arch(args.arch, "oto shards")
        cfg = validate_config(raw, args.configfile)
        profile = load_profile(profile_path(cfg["arch"]))
        settings = deck_settings(cfg["deck"], profile)
        source = run_source(settings)
        stock = profile["stock_library"]["logic_prefix"]
        selected = select_libraries(
            source.plan().libraries, cfg["families"], cfg["patterns"], args.configfile, stock
        )
        libs = sorted(x for v in selected.values() for x in v)
    except (OSError, ValueError, PlanError, DeckError, ProfileError) as exc:
        print(f"oto shards: {exc}")
        return 2
    deck = source.load(libs)
    cap_deck(deck, SizeCap.from_settings(settings))  # config deck.max_sizes: the sizes a shard tunes
    for i in range(1, args.count + 1):
        mine = Shard(i, args.count).select(libs)
        sizes = sum(len(deck.libraries[x].sizes) for x in mine)
        print(f"shard {i}/{args.count}: {len(mine)} libraries, {sizes} deck sizes")
        for x in mine:
            print(f"  {x} ({len(deck.libraries[x].sizes)} sizes)")
    return 0
