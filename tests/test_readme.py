"""Every command the README shows works after the README's install.

The README's commands are read from the README itself (code blocks and inline code), so a command added
there without a check here fails ``test_every_readme_command_is_checked``. The slow test runs them, in the
README's order, in one scratch copy of the repository — with a smaller config than the demo's (the demo
itself is timed by bench/workflow_bench.py) and the substitutions listed in ``SUBSTITUTE`` — and checks that
every module any of their Python processes imported comes from a distribution that ``pip install -e .``
installs: the README's install, without the test extra (pytest would bring pygments, which
``snakemake --report`` needs, and hide that the install lacks it).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import FAST_CONFIG, REPO, make_workdir

README = REPO / "README.md"
SHARED = REPO.parent / "shared"
COMMAND = re.compile(r"^(snakemake|oto|python3?|pip|export|unset|\.) ")  # a program and its arguments

# How each README command is checked: "run" (by the slow test, in the README's order), or why not here.
CHECKS: list[tuple[str, str]] = [
    (r"^python3 -m venv \.venv$|^\. \.venv/bin/activate$", "install: the tests run inside that install"),
    (r"^pip install -e \.$", "install: the import check below holds every command to it"),
    (r"^pip install -e '\.\[test\]'$", "install: the test extra, for the suite itself"),
    (r"^pip install -e \.\[bench\]$", "install: the bench extra (Kernel Tuner), for bench/search_bench.py"),
    (r"^python -m pytest( -m \"not slow\")?$", "the test suite itself"),
    (r"^export |^unset ", "environment settings for the real GPU (docs/tensile.md)"),
    (r"^python bench/search_bench\.py$", "needs the bench extra (Kernel Tuner), not part of the install"),
    (
        r"^python bench/agent_ab\.py$",
        "needs ANTHROPIC_API_KEY; tests/test_agent_ab.py drives it on a fake API",
    ),
    (r"^oto calibrate$", "named in prose; tests/test_calibration.py runs it on a folder of shipped files"),
    (r"^oto calibrate --chip$", "named in prose; tests/test_chip_calibration.py runs it on shipped files"),
    (r"^oto calibrate --joint$", "named in prose; tests/test_rdna_physics.py runs the joint fit"),
    (r"^oto calibrate --bundles", "needs bundles: tests/test_fleet_calibrate.py calibrates a simulated one"),
    (r"^python bench/sim_fidelity\.py --logic DIR", "a template for another chip's logic files (DIR, X)"),
    (r"^python bench/tensile_conformance\.py$", "needs real Tensile (docs/tensile.md); CI has none"),
    (
        r"^oto tester (run|check|bundle)\b",
        "a tester's night on a real APU; tests/test_fleet_bundle.py and test_fleet_preflight.py run them on "
        "simulated laptops",
    ),
    (r"^oto merge ", "merges testers' bundles: tests/test_fleet_merge.py and test_fleet_remote.py run it"),
    (
        r"^oto upstream ",
        "takes measured evidence only, so on the simulated demo it refuses (as it should): "
        "tests/test_upstream_kit.py runs it both ways",
    ),
    (
        r"^snakemake --workflow-profile profiles/slurm$",
        "needs SLURM: tests/test_cluster_profile.py, fake sbatch",
    ),
    (r"^pip install -e '\.\[fleet\]'$", "install: the fleet extra (S3 storage), for testers' uploads"),
    (
        r"^oto override ",
        "needs an installed rocBLAS library folder; tests/test_override.py runs it on the golden gfx900 .dat",
    ),
    (r"^python bench/workflow_bench\.py$", "run"),
    (r"^python bench/strategy_bench\.py$", "run"),
    (r"^snakemake ", "run"),
    (r"^oto ", "run"),
]
# Placeholders and budgets the slow test fills in: (pattern, replacement) on the command line.
SUBSTITUTE = [
    (r"\bSTORE\b", "results/gfx90c/registry/registry.sqlite"),
    (r"\bOUT\.json\b", "t4.json"),
    (r"\.\./shared/", f"{SHARED}/"),
    (r"--seeds 20\b", "--seeds 2"),  # 20 seeds take minutes: the same code on 2
    (
        r"^python bench/strategy_bench\.py$",
        "python bench/strategy_bench.py --seeds 1 --generations 1 --per-generation 2 --sizes 4 "
        "--libraries Cijk_Ailk_Bljk_DB --jobs 1",
    ),
    (r"^python bench/workflow_bench\.py$", "python bench/workflow_bench.py --skip-demo --repeat 1"),
]
# The demo's config, small: the README's targets (gen2 of a library) exist, every stage runs.
CONFIG = {**FAST_CONFIG, "max_generations": 3}


def readme_commands() -> list[str]:
    """Shell commands in the README, in order: code blocks line by line, inline code that starts like a
    command; `a && b` gives two, comments and a leading `$` are dropped, and inline code that is only the
    start of a command shown in full (`oto replay` in a sentence) is a mention, not a second command."""
    text = README.read_text()
    found: list[tuple[int, str, bool]] = []  # (position, line, inline)
    for m in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S):
        found += [(m.start(), line, False) for line in m.group(1).splitlines()]
    for m in re.finditer(r"(?m)^(?: {4}|\t)(\S.*)$", text):
        found.append((m.start(), m.group(1), False))
    outside = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), text, flags=re.S)
    for m in re.finditer(r"`([^`]+)`", outside):
        found.append((m.start(), " ".join(m.group(1).split()), True))
    commands: list[tuple[str, bool]] = []
    for _, line, inline in sorted(found):
        line = re.sub(r"\s+#.*$", "", line.strip()).removeprefix("$ ")
        for part in line.split("&&"):
            part = part.strip()
            if COMMAND.match(part) and part not in [c for c, _ in commands] and not part.endswith("..."):
                commands.append((part, inline))
    every = [c for c, _ in commands]
    return [c for c, inline in commands if not (inline and any(o.startswith(c + " ") for o in every))]


def check_of(command: str) -> str | None:
    return next((how for pattern, how in CHECKS if re.search(pattern, command)), None)


def test_every_readme_command_is_checked():
    commands = readme_commands()
    assert (
        "snakemake --cores 1 results/gfx90c/TensileLibrary.dat" in commands
    )  # the parser finds the main job
    assert "snakemake --report report.zip" in commands
    unchecked = [c for c in commands if check_of(c) is None]
    assert not unchecked, (
        f"README commands no test runs (add them to tests/test_readme.py CHECKS): {unchecked}"
    )


def test_the_readme_names_the_fast_and_the_full_test_commands():
    commands = readme_commands()
    assert 'python -m pytest -m "not slow"' in commands and "python -m pytest" in commands
    assert '"slow: ' in (REPO / "pyproject.toml").read_text()  # the marker the fast subset leaves out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_closure(roots: list[str]) -> set[str]:
    """The distributions ``roots`` name (``oto`` or ``oto[extra]``) and everything they require, recursively,
    with the extras each requirement asks for."""
    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset]] = set()
    todo = [(r.name, frozenset(r.extras)) for r in map(Requirement, roots)]
    while todo:
        name, extras = todo.pop()
        key = (_norm(name), extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in reqs:
            req = Requirement(text)
            wanted = any(req.marker is None or req.marker.evaluate({"extra": e}) for e in (extras or {""}))
            if wanted:
                todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen}


def _install_closure() -> set[str]:
    """Distributions `pip install -e .` installs: oto's requirements without extras, recursively."""
    return _requirement_closure(["oto"])


_SNAKEMAKE_PLUGIN = re.compile(r"^snakemake-(executor|storage|logger|report)-plugin-")
OPTIONAL_IMPORTS = {"jsonpointer", "rfc3339-validator"}  # jsonschema's format checkers, if installed


def _installed_closure(pattern: re.Pattern) -> set[str]:
    """Installed distributions whose name matches ``pattern``, and everything they require."""
    names = {_norm(d.metadata["Name"]) for d in md.distributions()}
    return _requirement_closure(sorted(n for n in names if pattern.match(n)))


SITECUSTOMIZE = """
import atexit, os, sys
def _oto_log_imports():
    with open(os.environ["OTO_IMPORT_LOG"], "a") as fh:
        fh.write("\\n".join(sorted({m.split(".")[0] for m in list(sys.modules)})) + "\\n")
atexit.register(_oto_log_imports)
"""


@pytest.mark.slow
def test_readme_commands_work_after_the_readme_install(tmp_path):
    if not (SHARED / "reference" / "replay").is_dir():
        pytest.skip(f"shared reference data not found at {SHARED}")
    work = make_workdir(tmp_path, CONFIG)
    shutil.copytree(REPO / "bench", work / "bench")
    shutil.copytree(REPO / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    imports = tmp_path / "imports.txt"
    env = {
        **os.environ,
        "PYTHONPATH": str(hook),
        "OTO_IMPORT_LOG": str(imports),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    ran = []
    for command in readme_commands():
        if check_of(command) != "run":
            continue
        line = command
        for pattern, repl in SUBSTITUTE:
            line = re.sub(pattern, repl, line)
        proc = subprocess.run(
            ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=900
        )
        assert proc.returncode == 0, (
            f"README command failed: {line}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
        ran.append(line)
    # The README's table of targets: each builds (or is up to date) after the commands above.
    for target in re.findall(r"^\| `(results/[^`]+)` \|", README.read_text(), re.M):
        proc = subprocess.run(
            ["bash", "-c", f"snakemake --cores 1 {shlex.quote(target)}"],
            cwd=work, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, f"README target failed: {target}\n{proc.stderr[-3000:]}"
        ran.append(target)
    assert any(c.startswith("snakemake --report") for c in ran) and any(
        c.startswith("oto replay") for c in ran
    )
    assert (work / "report.zip").is_file() and (work / "t4.json").is_file()

    closure = _install_closure()
    # Snakemake imports every installed plugin at start-up (the test extra installs the fleet's), and
    # jsonschema its format checkers when they happen to be installed: neither is a README command's need.
    closure |= {d for d in _installed_closure(_SNAKEMAKE_PLUGIN)} | OPTIONAL_IMPORTS
    providers = md.packages_distributions()
    local = {"oto", "snakemake_logger_plugin_oto", "_oto", "sitecustomize", "workflow_helpers"}
    outside = {}
    for module in set(imports.read_text().split()):
        if module in sys.stdlib_module_names or module in local or module.startswith("_"):
            continue
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
        if dists and not dists & closure:
            outside[module] = sorted(dists)
    assert not outside, f"imported by README commands but not installed by `pip install -e .`: {outside}"
