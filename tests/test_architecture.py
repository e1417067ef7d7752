"""The house rules of docs/architecture.md, checked on the source: the package's floors (a module imports only
its own folder and the floors below it), the domain never imports the stages, a stage never imports another
stage, stages stay short (a line budget), and every folder of the package says what it holds."""

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
    "rocblas",
    "run",
    "search",
    "stages",
    "tensile",
}
TOP_LEVEL_MODULES = {"__init__", "cli", "config", "environment", "files", "gemm", "numbers"}
# The floors, bottom first (docs/architecture.md, "What may import what"): a module imports its own folder
# and any floor below its own, never a floor above, and never another folder of its own floor. So no two
# concerns know each other both ways, and a newcomer can tell where a module belongs by what it needs.
FLOORS = (
    {"numbers", "files", "gemm"},  # plain helpers and the GEMM vocabulary
    {"config"},
    {"tensile"},  # Tensile interop: parameters, legality, logic files, the client
    {"hardware", "deck"},
    {"registry"},
    {"search"},
    {"backends"},
    {"measurement"},
    {"rocblas"},  # rocBLAS's own clients: runners, verify, the compare A/B (scoring's statistics)
    {"agent", "reporting"},
    {"stages"},
    {"run", "environment"},  # the Snakemake glue, `oto env`
    {"fleet"},  # testers and the merge plan runs as Snakemake would
    {"cli"},
)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import (the floors are checked on absolute names)")
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


def _floor(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    if top == "__init__":
        return -1  # the package's own __init__ (its version) is below everything
    return next(i for i, floor in enumerate(FLOORS) if top in floor)


def test_the_floors_cover_the_package():
    named = set().union(*FLOORS)
    assert named == SUBPACKAGES | TOP_LEVEL_MODULES - {"__init__"}


def test_every_import_goes_down_the_floors():
    """No upward import, and none across one floor: two concerns never know each other both ways."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        mod = _module(path)
        own = mod.split(".")[1]
        for dep in sorted(_imports(path)):
            if dep == "oto" or dep.split(".")[1] in (own, "__version__"):
                continue
            if _floor(dep) >= _floor(mod):
                offenders.append(f"{mod} imports {dep} (floor {_floor(dep)} is not below {_floor(mod)})")
    assert not offenders, "\n".join(offenders)


STAGES = PACKAGE / "stages"


def test_the_domain_never_imports_stages_and_stages_never_import_each_other():
    """The domain (every floor below the stages) never imports them. A stage imports its package (the Stage
    type it declares itself with), never a sibling stage; the Snakemake glue above reads the declarations
    (the package), and a stage module is imported by its rule's script only."""
    modules = {p.stem for p in STAGES.glob("*.py")} - {"__init__"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        mod, deps = _module(path), _imports(path)
        stage_deps = {d for d in deps if d == "oto.stages" or d.startswith("oto.stages.")}
        stage_modules = {d for d in stage_deps if d.split(".")[2:3] and d.split(".")[2] in modules}
        if _floor(mod) < _floor("oto.stages"):
            offenders += [f"{mod} imports {d} (the domain never imports a stage)" for d in stage_deps]
        elif mod.startswith("oto.stages"):
            offenders += [f"{mod} imports {d} (shared code belongs in the domain)" for d in stage_modules]
        else:
            offenders += [f"{mod} imports {d} (read the declarations: oto.stages)" for d in stage_modules]
    assert not offenders, "\n".join(sorted(offenders))


# Stages orchestrate (read the inputs, call the domain, write the outputs), so a stage module stays short; a
# function that outgrows a screen hides a second job. The budget of issue #25.
STAGE_MODULE_LINES = 60
FUNCTION_LINES = 100
FUNCTION_BUDGET_FOLDERS = ("stages", "measurement")
FUNCTION_BUDGET_MODULES = ("fleet/merge.py",)  # the merge: a transaction whose steps each stay readable


def test_stage_modules_stay_within_their_line_budget():
    over = {
        p.name: n
        for p in STAGES.glob("*.py")
        if p.name != "__init__.py" and (n := len(p.read_text().splitlines())) > STAGE_MODULE_LINES
    }
    assert not over, f"stage modules over {STAGE_MODULE_LINES} lines (move domain work to the domain): {over}"


def test_functions_of_stages_measurement_and_the_merge_stay_within_their_line_budget():
    paths = [p for folder in FUNCTION_BUDGET_FOLDERS for p in (PACKAGE / folder).rglob("*.py")]
    paths += [PACKAGE / module for module in FUNCTION_BUDGET_MODULES]
    over = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    over.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {lines} lines")
    assert not over, f"functions over {FUNCTION_LINES} lines:\n" + "\n".join(over)


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
