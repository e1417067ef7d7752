"""How a sweeping timer runs a plan: Tensile's client times problem after problem, and at each problem every
solution of its library back to back, in library order (Tensile/Source/client/main.cpp: benchmark runs ×
problems × solutions). oto controls both orders (it writes the client's problem list and the order of the
solutions in the library it hands the client), so each repetition of a plan becomes one **sweep**:

* every size the repetition names is a problem of the sweep, and every kernel it names is a solution, so
  each size's reference (the spoof floor) is timed in the same pass over that problem as every candidate,
  seconds apart;
* the problems and the solutions are permuted afresh for every sweep (seeded), so no kernel always runs
  first after a problem switch, or always last before the cool-down.

The client times every solution at every problem of a call, so a sweep measures the product of its problems
and solutions: cells the plan did not ask for are measured too and kept (nothing measured is dropped). The
tensile backend writes each sweep as one client call; the simulated GPU's ``sweeps`` order runs the same
sweeps, for the benchmarks that grade scoring on Tensile's order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from oto.backends.base import Launch


@dataclass(frozen=True)
class Sweep:
    rep: int
    problems: tuple[int, ...]  # size indices, in the order the client times them
    solutions: tuple[str, ...]  # kernel ids, in the order the client times them at every problem


def _rng(seed: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))


def plan_sweeps(launches: Sequence[Launch], seed: str) -> list[Sweep]:
    """One sweep per repetition the plan names (in rep order), problems and solutions permuted per sweep."""
    by_rep: dict[int, tuple[set[int], set[str]]] = {}
    for la in launches:
        sizes, kernels = by_rep.setdefault(int(la.rep), (set(), set()))
        sizes.add(int(la.size_index))
        kernels.add(str(la.kernel_id))
    out = []
    for rep in sorted(by_rep):
        sizes, kernels = by_rep[rep]
        rng = _rng(f"{seed}:sweep{rep}")
        problems = tuple(int(i) for i in rng.permutation(sorted(sizes)))
        solutions = tuple(str(k) for k in rng.permutation(sorted(kernels)))
        out.append(Sweep(rep, problems, solutions))
    return out


def roles_of(launches: Sequence[Launch]) -> dict[tuple[str, int], str]:
    """(kernel, size) -> role as the plan names it; a kernel that is the reference at a size anywhere in the
    plan is the reference there."""
    roles: dict[tuple[str, int], str] = {}
    for la in launches:
        key = (str(la.kernel_id), int(la.size_index))
        if la.role == "reference" or key not in roles:
            roles[key] = la.role
    return roles


def sweep_launches(sweeps: Sequence[Sweep], roles: dict[tuple[str, int], str]) -> list[Launch]:
    """Every cell of the sweeps in the order the client times them (cells the plan did not name are
    candidates, unless the kernel is that size's reference)."""
    return [
        Launch(k, roles.get((k, p), "candidate"), p, sw.rep)
        for sw in sweeps
        for p in sw.problems
        for k in sw.solutions
    ]


def sweep_of_launch(sweeps: Sequence[Sweep]) -> list[int]:
    """The sweep index of each launch of :func:`sweep_launches` (same order)."""
    return [i for i, sw in enumerate(sweeps) for _ in range(len(sw.problems) * len(sw.solutions))]
