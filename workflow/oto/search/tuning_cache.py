"""Kernel Tuner cache files as recorded tuning spaces: every configuration that was compiled and timed.

The cache (``.json`` or ``.json.gz``; format in Kernel Tuner's ``doc/source/cache_files.rst``) lists every
configuration of a space that was compiled and timed. A configuration absent from ``cache`` violates the
space's restrictions; one whose ``time`` is a string (``CompilationFailedConfig``…) failed. The replay
scorer (:mod:`oto.search.replay_scorer`) and the replay backend (:mod:`oto.backends.replay`) answer from one.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oto.search.space import Index, Parameter, Space


class CacheError(ValueError):
    """A cache file that is not a Kernel Tuner cache; the message names the file and the field."""


@dataclass
class TuningCache:
    path: Path
    space: Space
    times: dict[Index, float | None]  # recorded mean time (ms); None = failed configuration
    reps: dict[Index, np.ndarray]  # recorded repetitions (ms), may be empty
    failures: dict[Index, str]
    device: str
    kernel: str

    @property
    def optimum(self) -> float:
        return min(t for t in self.times.values() if t is not None)


def _read_json(path: Path) -> Any:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt") as fh:
                raw = fh.read()
        else:
            raw = path.read_text()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CacheError(f"{path}: cannot read ({exc})") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        # Kernel Tuner appends while tuning and accepts an unterminated ("open") cache file.
        try:
            return json.loads(raw.rstrip().rstrip(",") + "}}")
        except json.JSONDecodeError as exc:
            raise CacheError(f"{path}: not valid JSON ({exc})") from None


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v  # list-valued parameters (Tensile's ThreadTile)


def load_cache(path: str | Path) -> TuningCache:
    path = Path(path)
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise CacheError(f"{path}: top level must be an object, got {type(doc).__name__}")
    for key in ("tune_params_keys", "tune_params", "cache"):
        if key not in doc:
            raise CacheError(f"{path}: missing field {key!r} (is this a Kernel Tuner cache file?)")
    keys, tune, cache = doc["tune_params_keys"], doc["tune_params"], doc["cache"]
    if not isinstance(keys, list) or not keys:
        raise CacheError(f"{path}: field 'tune_params_keys' must be a non-empty list")
    if not isinstance(tune, dict) or any(not isinstance(tune.get(k), list) or not tune[k] for k in keys):
        raise CacheError(f"{path}: field 'tune_params' must map every tune_params_keys entry to a list")
    if not isinstance(cache, dict) or not cache:
        raise CacheError(f"{path}: field 'cache' must be a non-empty object")
    objective = doc.get("objective", "time")
    params = tuple(Parameter(k, tuple(_hashable(v) for v in tune[k])) for k in keys)
    lookup = [{v: i for i, v in enumerate(p.values)} for p in params]
    times: dict[Index, float | None] = {}
    reps: dict[Index, np.ndarray] = {}
    failures: dict[Index, str] = {}
    for ckey, rec in cache.items():
        if not isinstance(rec, dict):
            raise CacheError(f"{path}: field 'cache.{ckey}' must be an object")
        try:
            idx = tuple(lookup[i][_hashable(rec[k])] for i, k in enumerate(keys))
        except (KeyError, TypeError) as exc:
            raise CacheError(
                f"{path}: field 'cache.{ckey}': parameter {exc} missing or not among tune_params"
            ) from None
        t = rec.get(objective)
        if isinstance(t, int | float) and math.isfinite(t) and t > 0:
            times[idx] = float(t)
            r = rec.get("times")
            reps[idx] = np.asarray(r, dtype=float) if isinstance(r, list) and r else np.asarray([t])
        elif isinstance(t, str) or t is None:
            times[idx] = None
            failures[idx] = str(t or "missing objective")
        else:
            raise CacheError(
                f"{path}: field 'cache.{ckey}.{objective}' must be a positive number or a string"
            )
    if all(t is None for t in times.values()):
        raise CacheError(f"{path}: every configuration in 'cache' failed; nothing to replay")
    space = Space(name=f"replay:{path.name}", parameters=params, members=frozenset(times))
    return TuningCache(
        path, space, times, reps, failures, str(doc.get("device_name", "")), str(doc.get("kernel_name", ""))
    )


def measure(cache: TuningCache, idx: Index, rng: np.random.Generator) -> float | None:
    """One benchmark of a configuration: mean of a bootstrap resample of its recorded repetitions."""
    if cache.times.get(idx) is None:
        return None
    r = cache.reps[idx]
    return float(r[rng.integers(len(r), size=len(r))].mean())
