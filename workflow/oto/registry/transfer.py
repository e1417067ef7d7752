"""What earlier runs know, handed to a new one: measurements of a library estimated at this run's tuning
sizes (:func:`size_transfer`), kernels never to measure again, and the family's other patterns as priors.

Only records of the same kind of numbers as this run's (simulated, replayed or measured: the resolved
backend's provenance) are knowledge; "already measured" also needs the same protocol. A run that measures
on the GPU may opt in (``registry.simulated_priors``) to simulated records as **priors**: they reach the
search labelled as such (``Knowledge.priors``, ``Observation.source``), never as measurements, never as
"already measured", never re-measured as top-ups."""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.config import config_block
from oto.registry.records import protocol_of, run_id, size_key
from oto.registry.store import RunChain, Store, outside, store_path

log = logging.getLogger(__name__)


@dataclass
class Knowledge:
    """What earlier runs (the consolidated store) know about one library. Scores are estimated at the
    current tuning sizes from the sizes each kernel was measured at (:func:`size_transfer`)."""

    measured: set[str]  # kernel ids benchmarked at every given size under this protocol: never again
    rejected: set[str]  # kernel ids the legality checker rejected (a fact of the parameters, not a number)
    own: list[dict[str, Any]]  # this library's kernels {id, params, score}, best first: same kind of numbers
    family: list[dict[str, Any]]  # the other patterns of its family, best first (for transfer): same kind
    numbers: str = ""  # the kind of numbers of this run, the only kind ``own`` and ``family`` hold
    # Opt-in priors of another kind of numbers (registry.simulated_priors), labelled {"numbers": ...}.
    priors: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        """One line for a job's log: what it knows, and of which numbers."""
        others = ", ".join(sorted({_prior_kind(p) for p in self.priors})) or "none"
        return (
            f"registry knowledge ({self.numbers} numbers only): {len(self.own)} kernel(s) of this library, "
            f"{len(self.family)} of its family, {len(self.measured)} measured here before under this "
            f"protocol; {len(self.priors)} labelled prior(s) of other numbers ({others})"
        )


def _prior_kind(prior: Mapping[str, Any]) -> str:
    where = prior.get("from_arch")
    return f"{prior['numbers']} on {where}" if where else prior["numbers"]


# Sizes whose (M, N, batch, K) differ by about 1.4x in each dimension still inform each other.
SIZE_BANDWIDTH = math.log(2) / 2
SIZE_PRIOR_WEIGHT = 0.05  # pull towards the kernel's overall geomean where no measured size is near


def _log_size(size: Sequence | str) -> list[float]:
    parts = size.split(",") if isinstance(size, str) else list(size)[:4]
    return [math.log(max(float(x), 1.0)) for x in parts]


def size_transfer(measured: Mapping[str, float], sizes: Sequence) -> float | None:
    """A kernel's geomean score over ``sizes``, estimated from its scores at the sizes it was measured at
    (``{"M,N,B,K": score}``): at each wanted size a Gaussian-weighted mean of the log scores by distance in
    log (M, N, batch, K), shrunk towards its overall geomean where nothing measured is near. A kernel that
    excelled at small sizes ranks high for a run tuning small sizes, not for one tuning large ones."""
    import numpy as np  # a job scores every registry kernel of the family at every tuning size: vectorised

    pts = [(_log_size(k), math.log(v)) for k, v in measured.items() if v and v > 0 and math.isfinite(v)]
    if not pts:
        return None
    overall = sum(v for _, v in pts) / len(pts)
    if not sizes:
        return math.exp(overall)
    wanted = [_log_size(w) for w in sizes]
    dims = min(len(x) for x in [*(at for at, _ in pts), *wanted])  # as zip: the dimensions both sides have
    at = np.asarray([a[:dims] for a, _ in pts])
    logs = np.asarray([v for _, v in pts])
    d2 = ((np.asarray([w[:dims] for w in wanted])[:, None, :] - at[None, :, :]) ** 2).sum(axis=2)
    weight = np.exp(-d2 / (2 * SIZE_BANDWIDTH**2))  # wanted size x measured size
    near = (SIZE_PRIOR_WEIGHT * overall + weight @ logs) / (SIZE_PRIOR_WEIGHT + weight.sum(axis=1))
    return math.exp(float(near.mean()))


def _scored(
    db: Store,
    arch: str,
    family: str,
    numbers: str,
    sizes: Sequence,
    chain: RunChain | None = None,
    also: tuple[str, tuple] = ("", ()),
) -> list[tuple[str, dict]]:
    """(library, {id, params, score}) of every kernel the store benchmarked in ``family`` with ``numbers``,
    scored at ``sizes`` (best first); ``chain``: records left out (:func:`oto.registry.store.outside`);
    ``also``: one more SQL condition and its parameters."""
    per: dict[tuple[str, str], dict[str, Any]] = {}
    skip, extra = outside(chain)
    where = f"family = ? AND numbers = ?{skip}{also[0]}"
    for r in db.size_scores(arch, where, (family, numbers, *extra, *also[1])):
        k = per.setdefault((r["library"], r["kernel_id"]), {"params": r["params"], "sizes": {}})
        k["sizes"][r["size"]] = r["score"]
    kernels = [
        (
            lib,
            {"id": kid, "params": json.loads(k["params"] or "{}"), "score": size_transfer(k["sizes"], sizes)},
        )
        for (lib, kid), k in per.items()
    ]
    kernels.sort(key=lambda lk: (-(lk[1]["score"] or 0.0), lk[1]["id"]))
    return [(lib, k) for lib, k in kernels if k["score"] is not None]


def calibrated_chip(config: Mapping) -> str | None:
    """The simulated chip identity (``performance.chip_version``) of the run's device profile when that
    profile is calibrated (``oto calibrate --bundles``, config ``device_profile``); None otherwise."""
    from oto.hardware.profile import ProfileError, read_profile_figures
    from oto.hardware.simulated.performance import chip_version

    path = config.get("device_profile")
    if not path:
        return None
    try:
        profile = read_profile_figures(path)
    except (ProfileError, OSError) as exc:
        log.warning("registry priors: cannot read the device profile %s: %s", path, exc)
        return None
    return chip_version(profile) if profile.get("calibration") else None


def knowledge(
    arch_dir: Path,
    arch: str,
    library: str,
    config: Mapping,
    sizes: Sequence,
    provenance: Mapping,
    as_job: bool = False,
    measured_only: bool = False,
) -> Knowledge | None:
    """Optional knowledge for mutate and emit: None when there is no store yet (first run). ``provenance``
    is the resolved backend's (what this run's numbers will be). ``as_job``: leave out this run's own
    selection chain (its generations still on disk), so a job that Snakemake runs again sees what it saw the
    first time (:func:`oto.registry.store.outside`). ``measured_only``: what emit reads, ``measured`` alone,
    without scoring the family's kernels and other GPUs' priors at every tuning size."""
    from oto.gemm import Library

    registry = config_block(config, "registry")
    warm = registry["warm_start"]
    numbers = str(provenance.get("numbers") or "")
    fam = Library.parse(library).family.code
    db = Store.open_optional(store_path(arch_dir))
    if db is None:  # a first run: only other GPUs' registries (registry.warm_start) know anything
        priors = [] if measured_only else warm_start_priors(warm, library, fam, numbers, sizes)
        return Knowledge(set(), set(), [], [], numbers, priors) if priors else None
    chain = RunChain.on_disk(arch_dir, run_id(config)) if as_job else None
    try:
        want = {size_key(s) for s in sizes}
        protocol = protocol_of(provenance, config)
        measured = {k for k, got in db.measured(arch, library, protocol, chain).items() if want <= got}
        if measured_only:
            return Knowledge(measured, set(), [], [], numbers)
        kernels = _scored(db, arch, fam, numbers, sizes, chain)
        own = [k for lib, k in kernels if lib == library]
        family = [k for lib, k in kernels if lib != library]
        priors: list[dict[str, Any]] = []
        if registry["simulated_priors"] and numbers != "simulated":
            chip = calibrated_chip(config)  # a calibrated device: priors simulated on its own chip only
            extra = (" AND json_extract(tool_versions, '$.chip_version') = ?", (chip,)) if chip else ("", ())
            priors = [
                {**k, "numbers": "simulated", "library": lib, **({"chip_version": chip} if chip else {})}
                for lib, k in _scored(db, arch, fam, "simulated", sizes, chain, extra)
            ]
        priors += warm_start_priors(warm, library, fam, numbers, sizes)
        return Knowledge(measured, db.rejected(arch, library), own, family, numbers, priors)
    except sqlite3.DatabaseError as exc:
        log.warning("ignoring the registry store %s: %s", db.path, exc)
        return None
    finally:
        db.close()


class WarmStartError(ValueError):
    """A ``registry.warm_start`` entry that names no usable registry (the message names the field)."""


def check_warm_start(folders: Sequence[str], arch_dir: Path, source: str = "config") -> None:
    """Fail the dry-run on a ``registry.warm_start`` entry that is this run's own folder or holds no registry
    store (a typo would otherwise warm-start nothing, silently)."""
    for i, folder in enumerate(folders):
        field = f"{source}: field 'registry.warm_start[{i}]'"
        path = Path(folder)
        if path.resolve() == Path(arch_dir).resolve():
            raise WarmStartError(f"{field}: {folder} is this run's own results folder")
        if not store_path(path).is_file():
            raise WarmStartError(
                f"{field}: {folder} holds no registry store ({store_path(path)}); name the results folder of "
                "a finished run of another GPU, e.g. results/gfx90c"
            )


def warm_start_priors(
    folders: Sequence[str], library: str, family: str, numbers: str, sizes: Sequence
) -> list[dict[str, Any]]:
    """What other GPUs' registries (``registry.warm_start``: their results folders, each named after its arch)
    measured in ``library``'s family, scored at this run's tuning ``sizes``, as labelled priors: this
    library's kernels first, then its family's, best first. Only records of this run's kind of ``numbers``;
    each says whether its GPU had a matrix instruction for the library (``valu_only``): the search maps every
    prior onto this GPU's space (:mod:`oto.search.prior_map`), counting those it cannot."""
    same: list[dict[str, Any]] = []
    related: list[dict[str, Any]] = []
    for folder in folders:
        path = Path(folder)
        db = Store.open_optional(store_path(path))
        if db is None:
            log.warning("registry.warm_start: %s holds no registry store: nothing transferred", folder)
            continue
        valu = valu_only(path.name, library)
        try:
            for lib, k in _scored(db, path.name, family, numbers, sizes):
                prior = {**k, "numbers": numbers, "library": lib, "from_arch": path.name}
                if valu is not None:
                    prior["valu_only"] = valu
                (same if lib == library else related).append(prior)
        except sqlite3.DatabaseError as exc:
            log.warning("registry.warm_start: ignoring the registry store of %s: %s", folder, exc)
        finally:
            db.close()
    best_first = [*sorted(same, key=_best), *sorted(related, key=_best)]
    return best_first


def valu_only(arch: str, library: str) -> bool | None:
    """Whether ``arch``'s ISA has no matrix instruction for ``library``'s types (gfx1035's half and int8
    kernels, where gfx1103 has WMMA): its kernels then adopt the target's instruction when the search maps
    them onto the target's space (:mod:`oto.search.prior_map`). None for a folder not named after an ISA the
    legality rules know (its kernels are mapped as they are)."""
    from oto.gemm import Library
    from oto.tensile.isa import UnknownIsa, caps_donor, isa_caps
    from oto.tensile.params import offers_matrix_instruction
    from oto.tensile.runtime import isa_of

    try:
        isa = isa_of(arch)
        caps = isa_caps(isa, caps_donor(isa))
    except (ValueError, UnknownIsa):
        return None
    return not offers_matrix_instruction(caps, Library.parse(library).family)


def donor_notes(folders: Sequence[str], arch: str, libraries: Sequence[str]) -> list[str]:
    """What ``oto plan`` says of each ``registry.warm_start`` folder: the run's families whose kernels the
    donor ran without the matrix instruction ``arch`` runs them on, or the other way round. Those kernels are
    not points of ``arch``'s space as they are: the search maps them (:mod:`oto.search.prior_map`) and weighs
    them only as far as their ranking holds on ``arch``. A donor of ``arch``'s own ISA generation hands on
    kernels legal here as they are, and saves far more (bench/RESULTS.md, "Warm start across GPUs")."""
    from oto.gemm import Library
    from oto.tensile.runtime import isa_of

    try:
        generation = f"gfx{isa_of(arch)[0]}"
    except ValueError:
        return []
    notes = []
    for folder in folders:
        donor = Path(folder).name
        adopt, drop = set(), set()
        for library in libraries:
            theirs, ours = valu_only(donor, library), valu_only(arch, library)
            if theirs is None or ours is None or theirs == ours:
                continue
            (adopt if theirs else drop).add(Library.parse(library).family.code)
        if not adopt and not drop:
            continue
        parts = []
        if adopt:
            parts.append(f"{', '.join(sorted(adopt))} without the matrix instruction {arch} runs them on")
        if drop:
            parts.append(f"{', '.join(sorted(drop))} on a matrix instruction {arch} lacks")
        notes.append(
            f"warm start from {folder}: {donor} ran {' and '.join(parts)}. Those kernels reach the search "
            f"mapped onto {arch}'s own kernels and count only as far as their ranking holds on {arch}; a "
            f"registry of another {generation} GPU hands on kernels legal here as they are."
        )
    return notes


def _best(kernel: Mapping[str, Any]) -> tuple[float, str]:
    return (-(kernel["score"] or 0.0), str(kernel["id"]))
