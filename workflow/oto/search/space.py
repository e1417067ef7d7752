"""The one search space every proposer works in: ordered parameters plus a validity rule.

Strategies and the agent search any space described this way. Tensile's kernel parameters are one instance
(:func:`oto.search.tensile_space.tensile_space`: values from :data:`oto.tensile.params.PARAMS`, validity =
Tensile's legality rules, with their reasons); a Kernel Tuner cache is another
(:func:`oto.search.tuning_cache.load_cache` builds one whose members are the configurations in the cache,
exactly like Kernel Tuner's own restriction inference).

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
    default: Any = None  # the value a proposal that leaves the parameter out takes (None: the first value)
    doc: str = ""  # what it means, for people and for the agent's prompt

    @property
    def default_value(self) -> Any:
        return self.values[0] if self.default is None else self.default


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
    """Parameters, a validity rule, and (when known) the full set of valid configurations.

    Validity is, in order of precedence: membership of ``members`` (an enumerated space), ``explain``
    returning no reasons, or ``constraint`` returning True; a space with none of them accepts everything."""

    name: str  # unique per space (seeds the strategies' generators)
    parameters: tuple[Parameter, ...]
    constraint: Callable[[Mapping[str, Any]], bool] | None = None
    members: frozenset[Index] | None = None  # enumerated valid set (e.g. a replay cache's keys)
    identify: Callable[[Mapping[str, Any]], str] | None = None  # id used for dedupe (default: key())
    # Why a configuration is invalid (empty: valid), for rejections people and the agent read.
    explain: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    # Spaces of one kind share parameters and rules (Tensile's space of every library): the agent's cached
    # prompt is per kind. Default: the name.
    kind: str = ""
    # Parameters that only make sense together (a tile shape and its workgroup): recombination moves them
    # as one.
    linked: tuple[tuple[str, ...], ...] = ()
    # What a configuration implies beyond its parameters' values (RDNA3's WMMA kernels of Tensile's space
    # store by VectorWidth: SourceSwap 1); config() applies it, so validity, ids and proposals see it.
    complete: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    _feat: list[np.ndarray] = field(init=False, repr=False)
    _model_feat: list[np.ndarray] = field(init=False, repr=False)
    _adjacent: list[list[list[int]]] = field(init=False, repr=False)
    _member_list: list[Index] | None = field(init=False, repr=False, default=None)
    _valid_cache: dict[Index, bool] = field(init=False, repr=False, default_factory=dict)
    _key_cache: dict[Index, str] = field(init=False, repr=False, default_factory=dict)
    _by_key: dict[str, Index] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        self.kind = self.kind or self.name
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
        return self.complete(out) if self.complete is not None else out

    def index(self, config: Mapping[str, Any]) -> Index | None:
        """Index tuple of a configuration, or None when a value is not in the space. A parameter the
        configuration leaves out takes its default, as in a proposal: Tensile's canonical form omits the ISA
        knobs at Tensile's default (LocalDotLayout 1, ScheduleIterAlg 1), so navi31's shipped half and int8
        kernels carry none and would otherwise be no point of RDNA3's space."""
        out = []
        for p in self.parameters:
            v = config.get(p.name, p.default_value)
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
            hit = self.id_of(self.config(idx))
            self._key_cache[idx] = hit
            self._by_key.setdefault(hit, idx)
        return hit

    def id_of(self, config: Mapping[str, Any]) -> str:
        """The id of a full configuration in ``{name: value}`` form (what :meth:`key` gives its index)."""
        if self.identify is not None:
            return self.identify(config)
        text = json.dumps(dict(config), sort_keys=True, separators=(",", ":"))
        return "c" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def parameter(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)

    def known(self, key: str) -> Index | None:
        """The configuration behind an id this space has produced (None if it never did)."""
        return self._by_key.get(key)

    # --- validity and sampling ----------------------------------------------------------------------
    def valid(self, idx: Index) -> bool:
        if self.members is not None:
            return idx in self.members
        hit = self._valid_cache.get(idx)
        if hit is None:
            cfg = self.config(idx)
            if self.explain is not None:
                hit = not self.explain(cfg)
            else:
                hit = bool(self.constraint(cfg)) if self.constraint else True
            self._valid_cache[idx] = hit
        return hit

    def violations(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """Why a full configuration is not in the space (empty: it is)."""
        idx = self.index(config)
        if idx is None:
            return ("a value is not among the parameter's legal values",)
        if self.explain is not None and self.members is None:
            return tuple(self.explain(self.config(idx)))
        return () if self.valid(idx) else ("violates the space's restrictions",)

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
