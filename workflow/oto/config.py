"""Run configuration: schema validation with defaults, and error messages that name the file and field."""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from oto.files import yaml_problem

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.json"


class ConfigError(ValueError):
    pass


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _fill_defaults(schema: Mapping[str, Any], data: dict[str, Any]) -> None:
    """Insert schema ``default`` values, recursing into nested objects (jsonschema does not)."""
    for key, sub in schema.get("properties", {}).items():
        if key not in data and "default" in sub:
            data[key] = copy.deepcopy(sub["default"])
        kinds = sub.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]  # a nullable block, ["object", "null"], too
        if isinstance(data.get(key), dict) and "object" in kinds:
            _fill_defaults(sub, data[key])


@functools.cache
def _schema_text() -> str:
    return SCHEMA_PATH.read_text()


def config_schema() -> dict[str, Any]:
    return json.loads(_schema_text())


def config_defaults(block: str) -> dict[str, Any]:
    """The schema's defaults of one config block (``sim``, ``tensile``, ``agent``…), nested blocks filled:
    the one place a default is stated. Code that takes settings without a validated config starts here."""
    schema = config_schema()
    sub = schema["properties"][block]
    data: dict[str, Any] = {}
    _fill_defaults(sub, data)
    return data


def config_default(field: str) -> Any:
    """The schema's default of one top-level field (``shard``, ``backend``…)."""
    return copy.deepcopy(config_schema()["properties"][field]["default"])


def config_with_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a (possibly partial, unvalidated) config with every schema default filled in."""
    data = copy.deepcopy(dict(config))
    _fill_defaults(config_schema(), data)
    return data


def config_block(config: Mapping[str, Any], block: str) -> dict[str, Any]:
    """``config[block]`` with the schema's defaults filled in (nested blocks too), for code handed a partial
    config (tests, benchmarks, tools); a validated config already carries them."""
    data = copy.deepcopy(dict(config.get(block) or {}))
    _fill_defaults(config_schema()["properties"][block], data)
    return data


def validate_config(
    config: Mapping[str, Any], source: str = "config", command_line: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return a validated copy of ``config`` with defaults filled in. ``command_line``: the entries given
    with Snakemake's ``--config``; an error in one of them names the command line, not the file."""
    schema = config_schema()
    data = copy.deepcopy(dict(config))
    import jsonschema  # here: the many jobs that only read config defaults never validate

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        path = list(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, Mapping):
            # A misspelt key: name it, not the mapping that holds it (a --config typo is not the file's)
            known = list(e.schema.get("properties", {}))
            unknown = [k for k in e.instance if k not in known]
            given = [k for k in unknown if _given_at(command_line or {}, [*path, k])]
            key = (given or unknown or ["?"])[0]
            path = [*path, key]
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean '{_field([*path[:-1], close[0]])}'?)" if close else ""
            if given:
                source = f"--config {path[0]}=…"
            raise ConfigError(f"{source}: field '{_field(path)}': not a config field{hint}")
        if path and _given_at(command_line or {}, path):
            source = f"--config {path[0]}=…"
            if len(path) > 1 and e.validator == "type" and isinstance(e.instance, str):
                # Snakemake reads a nested --config value as YAML's BaseLoader does: every scalar is text
                e.message += " (Snakemake reads values nested in --config as text: use a --configfile)"
        raise ConfigError(f"{source}: field '{_field(e.absolute_path)}': {e.message}")
    _fill_defaults(schema, data)
    return data


def _given_at(given: Any, path: Sequence[Any]) -> bool:
    """Whether the value at ``path`` comes from ``given`` (a nested --config value merged into the file's)."""
    for part in path:
        if not isinstance(given, Mapping) or part not in given:
            return not isinstance(given, Mapping)  # a list or scalar given whole covers what is below it
        given = given[part]
    return True


def checked_config_file(path: str | Path) -> str:
    """The workflow's config file, its YAML syntax checked first (Snakemake's own loader only says "not valid
    JSON or YAML"); a missing file is left for Snakemake to report."""
    p = Path(path)
    if p.is_file():
        try:
            yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: {yaml_problem(exc)}") from None
    return str(path)


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: field '<top level>': expected a mapping")
    return data


def load_config(path: str | Path) -> dict[str, Any]:
    return validate_config(_read_config_file(Path(path)), str(path))


WORKFLOW_CONFIG = Path("config/config.yaml")  # the Snakefile's `configfile:`, relative to the workflow folder


def _merge_into(base: dict[str, Any], top: Mapping[str, Any]) -> None:
    """Snakemake's ``update_config``: nested mappings merge key by key, anything else replaces."""
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge_into(base[key], value)
        else:
            base[key] = copy.deepcopy(value) if isinstance(value, Mapping | list) else value


def layered_config(
    configfiles: Sequence[str | Path], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The config ``snakemake --configfile F... --config K=V...`` runs with in this folder, not validated: the
    Snakefile's config/config.yaml (where it exists), then each file, then ``overrides``, each merged into
    the ones before it. A night config that leaves a field out runs with the workflow config's value (the
    demo's deck.max_sizes, say), so every command that reads a run's config reads it this way."""
    merged: dict[str, Any] = {}
    for path in [WORKFLOW_CONFIG, *map(Path, configfiles)]:
        if path == WORKFLOW_CONFIG and not path.is_file():
            continue
        _merge_into(merged, _read_config_file(path))
    _merge_into(merged, overrides or {})
    return merged


NIGHT_PROFILE_FIELDS = ("stock_library.logic_prefix",)  # what night_record reads (oto.run.profile_views)


def night_record(config: Mapping[str, Any], stock: str | None = None) -> dict[str, Any]:
    """Which run (night) tuned a library, as its final.yaml records it and the logic folder, the report, the
    dashboard and TensileLibrary.dat repeat it: the run's selection and the settings that shape the tuning,
    and an id, a digest of the run's whole config (the same config names the same night; no clock, so a
    repeated run writes the same files). Families given per stock library are recorded as this arch's entry
    (``stock``: the profile's ``stock_library.logic_prefix``), the selection this run made."""
    digested = dict(config)
    if isinstance(config.get("deck"), Mapping) and config["deck"].get("max_sizes") is None:
        # no size cap (the schema's default): digested as before the field existed, so an uncapped run
        # keeps the night id it had
        digested["deck"] = {k: v for k, v in config["deck"].items() if k != "max_sizes"}
    if isinstance(config.get("budget"), Mapping) and not config["budget"].get("sweep"):
        digested["budget"] = {k: v for k, v in config["budget"].items() if k != "sweep"}  # as before it
    text = json.dumps(digested, sort_keys=True, default=str)
    search = config.get("search") or {}
    warm = (config.get("registry") or {}).get("warm_start") or []
    families = config.get("families")
    if isinstance(families, Mapping) and stock in families:
        families = families[stock]
    return {
        "id": "night-" + hashlib.sha256(text.encode()).hexdigest()[:10],
        "families": families,
        "patterns": config.get("patterns"),
        "shard": config.get("shard"),
        "deck": (config.get("deck") or {}).get("source"),
        "backend": config.get("backend"),
        "seed": config.get("seed"),
        "strategy": search.get("strategy"),
        "max_generations": config.get("max_generations"),
        # other GPUs' registries whose kernels were the search's labelled priors (registry.warm_start); a cold
        # run's record is as it was before the field
        **({"warm_start": [str(f) for f in warm]} if warm else {}),
    }
