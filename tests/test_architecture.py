"""The house rules of docs/architecture.md, checked on the source: the domain never imports the stages, a
stage never imports another stage, and every folder of the package says what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "oto"
# The concerns of docs/architecture.md's map; a new top-level folder belongs in the map first.
SUBPACKAGES = {
    "agent",
    "backends",
    "deck",
    "fleet",
    "hardware",
    "measurement",
    "registry",
    "reporting",
    "run",
    "search",
    "stages",
    "tensile",
}
TOP_LEVEL_MODULES = {"__init__", "cli", "config", "environment", "files", "gemm"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "oto" or m.startswith("oto.")}


def _module(path: Path) -> str:
    return ".".join(("oto", *path.relative_to(PACKAGE).with_suffix("").parts))


def test_the_package_is_grouped_by_concern():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == SUBPACKAGES
    assert {p.stem for p in PACKAGE.glob("*.py")} == TOP_LEVEL_MODULES
    for pkg in PACKAGE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(pkg.read_text())), f"{pkg.parent.name}/ does not say what it holds"


def test_the_domain_never_imports_stages_and_stages_never_import_each_other():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        mod, deps = _module(path), _imports(path)
        stage_deps = {d for d in deps if d == "oto.stages" or d.startswith("oto.stages.")}
        if not mod.startswith("oto.stages"):
            offenders += [f"{mod} imports {d} (the domain never imports a stage)" for d in stage_deps]
        else:
            offenders += [f"{mod} imports {d} (shared code belongs in the domain)" for d in stage_deps]
    assert not offenders, "\n".join(sorted(offenders))


# The oto commands that plan a run as Snakemake would; everything else below run/ is domain or stage.
RUN_IMPORTERS = {"oto.cli", "oto.fleet.tester"}


def test_only_the_snakemake_glue_and_the_planning_commands_import_run():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        mod = _module(path)
        if mod.startswith("oto.run") or mod in RUN_IMPORTERS:
            continue
        offenders += [
            f"{mod} imports {d}" for d in _imports(path) if d == "oto.run" or d.startswith("oto.run.")
        ]
    assert not offenders, "\n".join(sorted(offenders))


def test_scripts_only_unpack_the_snakemake_object():
    """Rule scripts call one stage (or a domain entry point) and hold no logic of their own."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    for path in scripts.glob("*.py"):
        if path.name == "_oto.py":
            continue
        tree = ast.parse(path.read_text())
        defs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        assert not defs, f"{path.name} defines {defs}: put it in the package"
