"""A generic discrete search space: ordered parameters plus constraints.

Strategies search any space described this way. Tensile's kernel parameters are one instance
(:func:`tensile_space`: values from :data:`oto.tensile_params.PARAMS`, constraint = the legality checker);
a Kernel Tuner cache is another (:func:`oto.replay.load_cache` builds one whose constraint is "present in
the cache", exactly like Kernel Tuner's own restriction inference).

Inside the engine a configuration is a tuple of value indices (hashable, cheap to encode); ``config()`` and
``index()`` convert to and from the ``{name: value}`` form the rest of oto uses.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Index = tuple[int, ...]


@dataclass(frozen=True)
class Parameter:
    name: str
    values: tuple  # in a meaningful order: adjacent values are neighbours


def _components(value) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _component_columns(values: Sequence) -> list[list]:
    """The values split into one column per component (None where a tuple value is shorter)."""
    comps = [_components(v) for v in values]
    return [[c[j] if j < len(c) else None for c in comps] for j in range(max(len(c) for c in comps))]


def _rank_features(values: Sequence) -> np.ndarray:
    """One row per value, one column per component, each component's rank scaled to [0, 1].

    Tuple values (Tensile's ThreadTile [4, 8]) get one feature per component, so a neighbour in one
    component is close in feature space; non-numeric values are ranked by their position."""
    columns = _component_columns(values)
    out = np.zeros((len(values), len(columns)))
    for j, col in enumerate(columns):
        try:
            distinct = sorted(set(col), key=lambda x: (x is None, x))
        except TypeError:  # mixed or non-comparable values: keep the declared order
            distinct = list(dict.fromkeys(col))
        rank = {v: i for i, v in enumerate(distinct)}
        scale = max(len(distinct) - 1, 1)
        out[:, j] = [rank[v] / scale for v in col]
    return out


def _is_int(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _power_of_two_features(values: Sequence) -> np.ndarray:
    """One 0/1 column per integer component whose values mix powers of two and other numbers.

    GPU kernels are not smooth in their sizes: a block or tile whose width is a power of two coalesces,
    divides the warp and the problem, and avoids bank conflicts; its neighbours need not (the convolution
    cache's block widths 32, 64, 128 and 256 run 3x faster than 48 or 240 without shared memory). This
    column puts the powers of two close to each other for a surrogate; components that are all powers of
    two (Tensile's tile sizes) or binary get none, since their rank already says it."""
    cols = []
    for col in _component_columns(values):
        if not all(_is_int(v) for v in col) or len(set(col)) <= 2:
            continue
        flags = [float(v > 0 and v & (v - 1) == 0) for v in col]
        if 0 < sum(flags) < len(col):
            cols.append(flags)
    return np.asarray(cols, dtype=float).T.reshape(len(values), len(cols))


@dataclass
class Space:
    """Parameters, a validity constraint, and (when known) the full set of valid configurations."""

    name: str
    parameters: tuple[Parameter, ...]
    constraint: Callable[[Mapping[str, Any]], bool] | None = None
    members: frozenset[Index] | None = None  # enumerated valid set (e.g. a replay cache's keys)
    identify: Callable[[Mapping[str, Any]], str] | None = None  # id used for dedupe (default: key())
    _feat: list[np.ndarray] = field(init=False, repr=False)
    _model_feat: list[np.ndarray] = field(init=False, repr=False)
    _adjacent: list[list[list[int]]] = field(init=False, repr=False)
    _member_list: list[Index] | None = field(init=False, repr=False, default=None)
    _valid_cache: dict[Index, bool] = field(init=False, repr=False, default_factory=dict)
    _key_cache: dict[Index, str] = field(init=False, repr=False, default_factory=dict)
    _by_key: dict[str, Index] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        self._feat = [_rank_features(p.values) for p in self.parameters]
        self._model_feat = [
            np.hstack([f, _power_of_two_features(p.values)])
            for f, p in zip(self._feat, self.parameters, strict=True)
        ]
        # Neighbours of a value: differ in exactly one component by one rank step.
        self._adjacent = []
        for f in self._feat:
            unit = self._unit_steps(f)
            adj = []
            for i in range(len(f)):
                d = np.abs(f - f[i])
                moved = (d > 1e-12).sum(axis=1)
                close = np.all(d <= unit + 1e-9, axis=1)
                adj.append([j for j in range(len(f)) if j != i and moved[j] == 1 and close[j]])
            self._adjacent.append(adj)
        if self.members is not None:
            self._member_list = sorted(self.members)
        # Only parameters with more than one value carry information.
        self._active = [i for i, p in enumerate(self.parameters) if len(p.values) > 1]

    @staticmethod
    def _unit_steps(f: np.ndarray) -> np.ndarray:
        out = np.ones(f.shape[1])
        for j in range(f.shape[1]):
            distinct = np.unique(f[:, j])
            out[j] = np.min(np.diff(distinct)) if len(distinct) > 1 else 1.0
        return out

    # --- conversions -------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def config(self, idx: Index) -> dict[str, Any]:
        out = {}
        for p, i in zip(self.parameters, idx, strict=True):
            v = p.values[i]
            out[p.name] = list(v) if isinstance(v, tuple) else v
        return out

    def index(self, config: Mapping[str, Any]) -> Index | None:
        """Index tuple of a configuration, or None when a value is not in the space."""
        out = []
        for p in self.parameters:
            v = config.get(p.name)
            v = tuple(v) if isinstance(v, list) else v
            try:
                out.append(p.values.index(v))
            except ValueError:
                return None
        return tuple(out)

    def key(self, idx: Index) -> str:
        """Canonical hash of a configuration (stable across runs and processes)."""
        hit = self._key_cache.get(idx)
        if hit is None:
            if self.identify is not None:
                hit = self.identify(self.config(idx))
            else:
                text = json.dumps(self.config(idx), sort_keys=True, separators=(",", ":"))
                hit = "c" + hashlib.sha256(text.encode()).hexdigest()[:12]
            self._key_cache[idx] = hit
            self._by_key[hit] = idx
        return hit

    def known(self, key: str) -> Index | None:
        """The configuration behind an id this space has produced (None if it never did)."""
        return self._by_key.get(key)

    # --- validity and sampling ----------------------------------------------------------------------
    def valid(self, idx: Index) -> bool:
        if self.members is not None:
            return idx in self.members
        hit = self._valid_cache.get(idx)
        if hit is None:
            hit = bool(self.constraint(self.config(idx))) if self.constraint else True
            self._valid_cache[idx] = hit
        return hit

    @property
    def enumerable(self) -> bool:
        return self._member_list is not None

    def size(self) -> int | None:
        return len(self._member_list) if self._member_list is not None else None

    def all_members(self) -> list[Index]:
        if self._member_list is None:
            raise ValueError(f"space {self.name!r} is not enumerated")
        return self._member_list

    def random(self, rng: np.random.Generator, attempts: int = 2000) -> Index | None:
        """A uniformly random valid configuration (None if rejection sampling finds none)."""
        if self._member_list is not None:
            return self._member_list[int(rng.integers(len(self._member_list)))]
        for _ in range(attempts):
            idx = tuple(int(rng.integers(len(p.values))) for p in self.parameters)
            if self.valid(idx):
                return idx
        return None

    def neighbours(self, idx: Index) -> list[Index]:
        """Valid configurations one step away in exactly one parameter component."""
        out = []
        for k in self._active:
            for j in self._adjacent[k][idx[k]]:
                nb = (*idx[:k], j, *idx[k + 1 :])
                if self.valid(nb):
                    out.append(nb)
        return out

    def walk(self, idx: Index, steps: int, rng: np.random.Generator) -> Index:
        """A random walk of up to ``steps`` moves through valid configurations (stays put if stuck)."""
        cur = idx
        for _ in range(steps):
            k = self._active[int(rng.integers(len(self._active)))] if self._active else None
            if k is None:
                break
            adj = self._adjacent[k][cur[k]]
            if not adj:
                continue
            nb = (*cur[:k], adj[int(rng.integers(len(adj)))], *cur[k + 1 :])
            if self.valid(nb):
                cur = nb
        return cur

    def encode(self, idxs: Iterable[Index]) -> np.ndarray:
        """Feature matrix in [0, 1] for surrogate models: the component ranks of the active parameters,
        plus a power-of-two flag for integer components that mix them with other numbers."""
        idxs = list(idxs)
        if not idxs:
            return np.zeros((0, sum(self._model_feat[k].shape[1] for k in self._active)))
        arr = np.asarray(idxs, dtype=int)
        return np.hstack([self._model_feat[k][arr[:, k]] for k in self._active])


def tensile_space(name: str, is_legal: Callable[[Mapping[str, Any]], bool]) -> Space:
    """Tensile's kernel parameters (:data:`oto.tensile_params.PARAMS`) under a legality constraint
    (normally :func:`oto.legality.check` for one library); ids are oto's kernel ids."""
    from oto.tensile_params import PARAMS, candidate_id

    return Space(
        name=f"tensile:{name}",
        parameters=tuple(Parameter(p.name, tuple(p.values)) for p in PARAMS.values()),
        constraint=is_legal,
        identify=candidate_id,
    )
