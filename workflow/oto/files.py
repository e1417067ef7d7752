"""Reading and writing stage files: fast YAML, atomic writes, and errors that name the file."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class NoAliasDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """No anchors or aliases: a file's text follows from its content alone, not from which of its lists
    happen to be one object in memory (a selection read from its JSON mirror shares none)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class StageFileError(ValueError):
    """A stage input is missing a field or has the wrong shape."""


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temporary file and rename, so an interrupted job never leaves a half file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked_json(path: Path, read: Callable[[], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A read-modify-write of a small JSON state file shared by parallel jobs: holds an exclusive lock on a
    sibling .lock file, yields ``read()``'s state, and writes it back (atomically) only if it changed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read()
        before = json.dumps(state, sort_keys=True)
        yield state
        if json.dumps(state, sort_keys=True) != before:
            atomic_write_text(path, json.dumps(state, indent=1, sort_keys=True))


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=NoAliasDumper, sort_keys=False, default_flow_style=None, width=120)


def write_yaml(path: str | Path, data: Any) -> None:
    atomic_write_text(path, dump_yaml(data))


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line saying where a YAML document is broken: ``YAML syntax error at line 3, column 9: ...``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"YAML syntax error{where}: {' '.join(str(problem).split())}"


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    try:
        return yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as exc:
        raise StageFileError(f"{path}: not valid YAML: {exc}") from exc


# A YAML file that many jobs read (a library's deck.yaml: 150-odd shipped solutions on an RDNA deck, parsed
# by every generation's mutate, emit, compile and benchmark) gets a hidden JSON mirror beside it,
# ``.<name>.json``: what the YAML text parses to, keyed by the text's sha256. JSON parses ~50x faster than
# PyYAML's constructor; a mirror that is missing, unreadable or of other text (the YAML edited or rewritten
# since) is ignored and the YAML parsed. The YAML stays the file and the contract; the mirror is a cache.
_KEYED = "\x00keyed"  # a mirror's mapping whose keys are not all text (AssertStrideAEqual: {0: 1}): pairs


def mirror_path(path: str | Path) -> Path:
    """Where :func:`write_yaml_mirrored` keeps the JSON mirror of ``path``."""
    path = Path(path)
    return path.with_name(f".{path.name}.json")


def _json_tree(data: Any) -> Any:
    if isinstance(data, dict):
        if all(type(k) is str for k in data):
            return {k: _json_tree(v) for k, v in data.items()}
        return {_KEYED: [[k, _json_tree(v)] for k, v in data.items()]}
    if isinstance(data, list):
        return [_json_tree(v) for v in data]
    return data


def _from_json_object(obj: dict[str, Any]) -> dict[Any, Any]:
    if len(obj) == 1 and _KEYED in obj:
        return {k: v for k, v in obj[_KEYED]}
    return obj


def _loads_mirror(text: str | bytes) -> Any:
    return json.loads(text, object_hook=_from_json_object)


def dumps_exact(data: Any) -> str:
    """JSON that :func:`loads_exact` turns back into ``data`` exactly, integer-keyed mappings included
    (AssertStrideAEqual {0: 1}); ValueError or TypeError where JSON cannot carry it (NaN, dates...)."""
    return json.dumps(_json_tree(data), allow_nan=False, separators=(",", ":"))


def loads_exact(text: str | bytes) -> Any:
    return _loads_mirror(text)


def write_yaml_mirrored(path: str | Path, data: Any) -> None:
    """:func:`write_yaml`, plus the JSON mirror :func:`read_yaml_mirrored` reads instead of the YAML. The
    mirror holds what the written text parses to, and only when JSON carries it exactly (no NaN, infinity,
    date or other key types than text and integers); else none is left behind."""
    text = dump_yaml(data)
    atomic_write_text(path, text)
    parsed = yaml.load(text, Loader=_Loader)
    mirror = mirror_path(path)
    try:
        body = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "data": _json_tree(parsed)}
        doc = json.dumps(body, allow_nan=False, separators=(",", ":"))
        exact = _loads_mirror(doc)["data"] == parsed
    except (TypeError, ValueError):
        exact = False
    if exact:
        atomic_write_text(mirror, doc)
    else:
        mirror.unlink(missing_ok=True)


def read_yaml_mirrored(path: str | Path) -> Any:
    """:func:`read_yaml` of a file :func:`write_yaml_mirrored` wrote: its mirror when that is of the file's
    current text, else the YAML."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        doc = _loads_mirror(mirror_path(path).read_bytes())
        if isinstance(doc, dict) and doc.get("sha256") == hashlib.sha256(raw).hexdigest() and "data" in doc:
            return doc["data"]
    except (OSError, ValueError, TypeError):
        pass
    return read_yaml(path)


def require(doc: Mapping[str, Any], key: str, path: str | Path, kind: type | tuple = object) -> Any:
    """Fetch ``doc[key]`` or raise an error naming the file and field."""
    if not isinstance(doc, Mapping) or key not in doc:
        raise StageFileError(f"{path}: missing field '{key}'")
    value = doc[key]
    if not isinstance(value, kind):
        raise StageFileError(f"{path}: field '{key}' has type {type(value).__name__}")
    return value
