"""One dependency list: pyproject.toml states oto's dependencies. environment.yml installs the package from it
(pip, so nothing is listed twice), and workflow/envs/oto.yaml, the rules' conda env, names the same run-time
packages at pins pyproject.toml allows."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# conda-forge's names of PyPI packages, where they differ (matplotlib-base: matplotlib without a Qt backend)
PYPI_NAME = {"msgpack-python": "msgpack", "matplotlib-base": "matplotlib"}
# Run-time dependencies the rules' env does without: Snakemake runs the rules (it is not inside their env),
# and pygments serves `snakemake --report` only.
NOT_IN_RULE_ENV = {"snakemake", "pygments"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _conda(spec: str) -> tuple[str, SpecifierSet, Version]:
    """A conda match spec (``numpy=2``, ``jsonschema>=4.20,<5``) as (PyPI name, the versions it allows, the
    lowest of them)."""
    name, rest = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", spec).groups()
    if re.fullmatch(r"=[0-9.]+", rest):  # conda's "=2.2" is 2.2.*
        allowed, lowest = SpecifierSet(f"=={rest[1:]}.*"), Version(rest[1:])
    else:
        allowed = SpecifierSet(rest)
        lowest = Version(next(s.version for s in allowed if s.operator in (">=", "==")))
    return PYPI_NAME.get(name, name), allowed, lowest


def _requirements() -> dict[str, Requirement]:
    return {(r := Requirement(line)).name.lower(): r for line in _project()["dependencies"]}


def test_the_rule_env_has_pyprojects_runtime_packages_at_pins_it_allows():
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "oto.yaml").read_text())
    pinned = dict((name, (allowed, lowest)) for name, allowed, lowest in map(_conda, env["dependencies"]))
    python_allowed, python_lowest = pinned.pop("python")
    assert python_lowest in SpecifierSet(_project()["requires-python"])
    required = _requirements()
    assert set(pinned) == set(required) - NOT_IN_RULE_ENV
    for name, (allowed, lowest) in pinned.items():
        assert lowest in allowed, (name, str(allowed))
        assert required[name].specifier.contains(lowest), (
            f"workflow/envs/oto.yaml allows {name} {lowest}, pyproject.toml asks {required[name].specifier}"
        )


def test_environment_yml_installs_the_package_from_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = [d for d in env["dependencies"] if isinstance(d, dict)]
    assert sorted(re.match(r"[a-z]+", d).group() for d in conda) == ["pip", "python"]  # the rest: pip
    assert _conda(next(d for d in conda if d.startswith("python")))[2] in SpecifierSet(
        _project()["requires-python"]
    )
    assert pip == [{"pip": ["-e .[test]"]}]
    assert "test" in _project()["optional-dependencies"]
