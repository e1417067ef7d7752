"""Reading and writing stage files: fast YAML, atomic writes, and errors that name the file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


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
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120)


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


def require(doc: Mapping[str, Any], key: str, path: str | Path, kind: type | tuple = object) -> Any:
    """Fetch ``doc[key]`` or raise an error naming the file and field."""
    if not isinstance(doc, Mapping) or key not in doc:
        raise StageFileError(f"{path}: missing field '{key}'")
    value = doc[key]
    if not isinstance(value, kind):
        raise StageFileError(f"{path}: field '{key}' has type {type(value).__name__}")
    return value
