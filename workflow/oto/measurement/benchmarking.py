"""Benchmarking kernels on a backend: the launch plan that interleaves the spoof-floor reference with the
candidates, the GPU lock, the memory guard, and the race that decides how many launches each kernel gets.

The launch order is the measurement design: each size's reference kernel is re-timed after every few
candidates, so the drift model in :mod:`oto.measurement.scoring` always has reference samples close in time.
Samples are spent adaptively (:mod:`oto.measurement.racing`): a probe for everyone, then top-ups only where
the leader is not yet separated from its rivals.

Measurements outlive the job that took them: every race's samples are also kept in
``results/<arch>/measurements/<library>/<job>/<key>.csv``, where the key hashes everything the experiment
is (protocol, backend and the profile figures it reads, kernels, sizes, the launch plan's seed). Snakemake
deletes a job's outputs before running it again; when it re-runs a benchmark for the same experiment (a
forced re-run, an upstream job redone with the same result), the samples are taken from there instead of
being measured again (``benchmark.reuse_measurements``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from oto.backends.base import Kernel, Launch, MeasurePlan, Problem, Sample, Size
from oto.config import config_block
from oto.deck.model import LibraryDeck
from oto.files import atomic_write_text
from oto.gemm import Library
from oto.hardware import memory
from oto.hardware.memory import oversize
from oto.hardware.profile import profile_view
from oto.measurement.racing import BUDGET, FIXED, RaceResult, RaceSettings, decide_sizes, race
from oto.measurement.samples import read_samples
from oto.measurement.scoring import MEASUREMENT_COLUMNS, SAMPLE_COLUMNS, ImplausibleReference, score_library
from oto.registry.records import protocol_of
from oto.search.lattice import SWEEP_PROPOSER

log = logging.getLogger(__name__)
REFERENCE_EVERY = 4  # candidates between two reference launches
# Resamples per interval inside a race: the decisions only need the interval's ends roughly (the robust
# t-interval floors them anyway); normalise rescores with the configured count.
RACE_BOOTSTRAP = 100


@contextlib.contextmanager
def gpu_mutex(device: int = 0) -> Iterator[None]:
    """Serialise GPU work across processes; the kernel drops the lock even after kill -9."""
    with open(Path(tempfile.gettempdir()) / f"oto-gpu{device}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _rng(seed: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))


def interleave_sizes(
    per_size: Mapping[int, Sequence[str]],
    reference: Mapping[int, str],
    repetitions: int,
    seed: str,
    rep_offset: int = 0,
) -> list[Launch]:
    """Per repetition, visit the sizes in shuffled order; at each size time ref, candidates…, ref, …, ref.

    ``per_size`` names the candidates of each size (racing tops up only the contenders of unresolved
    sizes); the reference brackets every ``REFERENCE_EVERY`` candidates so drift is sampled close by."""
    rng = _rng(seed)
    sizes = sorted(per_size)
    launches: list[Launch] = []
    for rep in range(rep_offset, rep_offset + repetitions):
        for size in rng.permutation(sizes) if sizes else []:
            size = int(size)
            ref = reference.get(size)
            cands = [c for c in per_size[size] if c != ref]
            order = [str(c) for c in rng.permutation(cands)] if cands else []
            if ref is not None:
                launches.append(Launch(ref, "reference", size, rep))
            for i, kid in enumerate(order, 1):
                launches.append(Launch(kid, "candidate", size, rep))
                if ref is not None and (i % REFERENCE_EVERY == 0 or i == len(order)):
                    launches.append(Launch(ref, "reference", size, rep))
    return launches


def interleave(
    candidates: Sequence[str], reference: Mapping[int, str], n_sizes: int, repetitions: int, seed: str
) -> list[Launch]:
    """Every candidate at every size, ``repetitions`` times (see :func:`interleave_sizes`)."""
    return interleave_sizes({i: list(candidates) for i in range(n_sizes)}, reference, repetitions, seed)


def measure_frame(backend, problem, plan: MeasurePlan, workdir: Path) -> pd.DataFrame:
    """Run a plan on the backend (holding the GPU lock) and return the samples in the samples.csv layout,
    ordered as they really ran, with the backend's capabilities on every row."""
    samples = []
    caps = backend.capabilities
    # Memory guard, for every backend: launches at sizes that do not fit in the device memory are not run.
    skipped = oversize(problem.library, plan.sizes, problem.arch) if "memory" in problem.arch else {}
    runnable = [i for i, la in enumerate(plan.launches) if la.size_index not in skipped]
    if runnable:
        with gpu_mutex():
            run_plan = replace(plan, launches=[plan.launches[i] for i in runnable])
            measured = backend.measure(problem, run_plan, Path(workdir))
            # Plan order: seq is the launch's index in the plan. Reported order: the position it ran at.
            if caps.launch_order == "plan" and len(runnable) < len(plan.launches):
                samples = [replace(s, seq=runnable[s.seq]) for s in measured]
            else:
                samples = list(measured)
    after = max((s.seq for s in samples), default=-1) + 1
    for j, i in enumerate(i for i, la in enumerate(plan.launches) if la.size_index in skipped):
        la = plan.launches[i]
        seq = i if caps.launch_order == "plan" else after + j  # never ran: after everything that did
        why = skipped[la.size_index]
        samples.append(Sample(seq, la.kernel_id, la.role, la.size_index, la.rep, math.nan, "too_large", why))
    samples.sort(key=lambda s: s.seq)
    samples = [_past_timeout(s, getattr(backend, "launch_timeout_us", math.inf)) for s in samples]
    rows = [
        (
            s.seq,
            s.kernel_id,
            s.role,
            s.size_index,
            *plan.sizes[s.size_index].as_list(),
            s.rep,
            s.time_us,
            s.status,
            s.reason,
            backend.numbers,
            s.clock_mhz,
            s.temperature_c,
            s.power_w,
            s.telemetry_note,
            s.sweep,
            caps.launch_order,
            caps.clock_telemetry,
        )
        for s in samples
    ]
    return pd.DataFrame(rows, columns=[*SAMPLE_COLUMNS, *MEASUREMENT_COLUMNS])


def _past_timeout(s: Sample, timeout_us: float) -> Sample:
    """A launch reported slower than the backend's own timeout cannot have completed: a bad timing."""
    if s.status == "ok" and math.isfinite(s.time_us) and s.time_us > timeout_us:
        why = f"{s.time_us:.3g} us is longer than the backend's launch timeout {timeout_us:.3g} us"
        return replace(s, status="bad_timing", reason=why)
    return s


def measurement_key(
    backend,
    problem,
    kernels: Mapping[str, Kernel],
    sizes: Sequence[Size],
    candidates: Mapping[int, Sequence[str]],
    reference: Mapping[int, str],
    config: Mapping,
    seed: str,
    workload: Mapping[int, float] | None = None,
) -> str:
    """The identity of one race's experiment: equal keys, the same measurement."""
    bench = {k: v for k, v in config_block(config, "benchmark").items() if k != "reuse_measurements"}
    fields = (*getattr(backend, "PROFILE_FIELDS", ()), *memory.PROFILE_FIELDS)
    facts = {
        "protocol": protocol_of(backend.provenance(), config),
        "benchmark": bench,
        "backend": [backend.name, backend.numbers],
        "figures": profile_view(problem.arch, fields),
        "library": problem.library.name,
        "seed": seed,
        "kernels": {k: dict(kernels[k].params) for k in sorted(kernels)},
        "sizes": [s.as_list() for s in sizes],
        "candidates": {str(i): list(c) for i, c in sorted(candidates.items())},
        "reference": {str(i): r for i, r in sorted(reference.items())},
    }
    if workload:  # finalize of a workload deck: the calls steer the race (racing.workload_precision)
        facts["workload"] = {str(i): float(c) for i, c in sorted(workload.items())}
    text = json.dumps(facts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _kept_samples(path: Path, kernels: Mapping[str, Kernel], n_sizes: int) -> pd.DataFrame | None:
    """The archived samples of this experiment, or None; an unreadable file is moved aside, never used."""
    if not path.is_file():
        return None
    try:
        df = read_samples(path)
        stray = set(df["kernel_id"]) - set(kernels)
        if stray or (len(df) and int(df["size_index"].max()) >= n_sizes):
            raise ValueError(f"kernels or sizes outside this experiment ({sorted(stray)[:3]})")
        launches = _kept_record(path).get("launches")
        if launches is not None and launches != len(df):  # cut at a line's end: it reads, but is not whole
            raise ValueError(f"{len(df)} launches where the race kept {launches}")
    except (ValueError, OSError) as exc:
        aside = path.with_suffix(f".unreadable-{int(time.time())}")
        path.replace(aside)
        log.warning(
            "kept measurements %s unreadable (%s); moved aside to %s, measuring again", path, exc, aside
        )
        return None
    return df


def stops_path(kept: Path) -> Path:
    """Where a kept race's record is kept beside its samples: its launches and each size's stop reason."""
    return kept.with_suffix(".stops.json")


def _kept_record(kept: Path) -> dict[str, Any]:
    """{launches, stops} of a kept race ({} where there is none, or it is unreadable)."""
    try:
        doc = json.loads(stops_path(kept).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("stops"), dict) else {}


def _reused(samples: pd.DataFrame, score, settings: RaceSettings, path: Path, open_label: str) -> RaceResult:
    """The earlier race's result from its kept samples, decided on their final scores (as normalise does),
    each size's stop reason the race's own where it was kept (how the race there ended: the final scores may
    separate a size the budget stopped, and a job run again said "separated" where the first said "budget"). A
    size still open on them is one that race stopped open: on its racing budget, or at the fixed count."""
    scores = score(samples, None) if len(samples) else pd.DataFrame()
    decisions = decide_sizes(scores, settings.tie_tolerance) if len(scores) else {}
    decisions = {i: d if d.stop else replace(d, stop=open_label) for i, d in decisions.items()}
    stops = {int(i): str(s) for i, s in (_kept_record(path).get("stops") or {}).items() if s}
    decisions = {i: replace(d, stop=stops.get(i, d.stop)) for i, d in decisions.items()}
    rounds = int(samples["round"].max()) + 1 if "round" in samples and len(samples) else 0
    note = f"reused {len(samples)} launches measured earlier for this experiment ({path}): none re-measured"
    return RaceResult(samples, scores, decisions, rounds, len(samples), [note])


def run_race(
    backend,
    problem,
    kernels: Mapping[str, Kernel],
    sizes: Sequence[Size],
    candidates: Mapping[int, Sequence[str]],
    reference: Mapping[int, str],
    score: Callable[[pd.DataFrame, set[int] | None], pd.DataFrame],
    config: Mapping,
    workdir: Path,
    seed: str,
    archive: Path | None = None,
    workload: Mapping[int, float] | None = None,
) -> RaceResult:
    """Race (or, with ``benchmark.racing.enabled: false``, time every kernel ``repetitions`` times).

    ``archive``: the folder that keeps this job's measurements (see the module doc); None: keep nothing.
    ``workload``: the workload's calls per size (finalize of a workload deck: ``racing.race``)."""
    bench = config_block(config, "benchmark")
    settings = RaceSettings.from_config(bench)
    # what stopped a size left open: the racing budget, or (racing off) the fixed count; race() says budget
    open_label = BUDGET if bench["racing"]["enabled"] else FIXED
    if not bench["racing"]["enabled"]:
        reps = int(bench["repetitions"])
        settings = replace(settings, probe_repetitions=reps, max_repetitions=0)
    kept = None
    if archive is not None:
        key = measurement_key(backend, problem, kernels, sizes, candidates, reference, config, seed, workload)
        kept = Path(archive) / f"{key}.csv"
        earlier = _kept_samples(kept, kernels, len(sizes)) if bench["reuse_measurements"] else None
        if earlier is not None:
            return _reused(earlier, score, settings, kept, open_label)

    def plan(per_size, reps, rep_offset, rnd):
        return interleave_sizes(per_size, reference, reps, f"{seed}:r{rnd}", rep_offset)

    def measure(launches):
        return measure_frame(backend, problem, MeasurePlan(kernels, sizes, launches), workdir)

    def checked_score(samples: pd.DataFrame, only: set[int] | None) -> pd.DataFrame:
        try:
            return score(samples, only)
        except ImplausibleReference as exc:  # fail loudly, but keep what was measured for inspection
            aside = (kept or Path(workdir) / "samples.csv").with_suffix(".implausible.csv")
            atomic_write_text(aside, samples.to_csv(index=False))
            raise ImplausibleReference(f"{exc} (its {len(samples)} launches are kept in {aside})") from None

    result = race(measure, checked_score, plan, candidates, reference, settings, workload)
    if open_label != BUDGET:
        result.decisions = {
            i: replace(d, stop=open_label) if d.stop == BUDGET else d for i, d in result.decisions.items()
        }
    if not len(result.samples):  # nothing to launch: samples.csv still gets its header
        result.samples = pd.DataFrame(columns=[*SAMPLE_COLUMNS, *MEASUREMENT_COLUMNS, "round"])
    if kept is not None:
        stops = {str(i): d.stop for i, d in result.decisions.items()}
        atomic_write_text(stops_path(kept), json.dumps({"launches": len(result.samples), "stops": stops}))
        atomic_write_text(kept, result.samples_csv())
    return result


def sweep_workload(candidates: Mapping, deck: LibraryDeck) -> dict[int, float] | None:
    """The workload's calls per tuning size of a generation that sweeps the fork lattice (a candidate
    candidates.yaml says the lattice proposed); None for other generations and decks without a workload.

    A sweep races a thousand kernels, most within a few % of each other, where max_repetitions cannot tell
    the one that beats the earlier generations' best from the luckiest of the rest. With the workload its
    race goes on where the user's time is, as finalize's does (``racing.workload_decides`` and
    ``workload_precision``). Other generations race a few kernels and keep the equal plan's cost."""
    kernels = candidates.get("kernels") or []
    if deck.calls is None or not any(k.get("proposer") == SWEEP_PROPOSER for k in kernels):
        return None
    at = candidates.get("deck_indices") or range(len(candidates.get("sizes") or []))
    return {i: float(deck.calls[int(d)]) for i, d in enumerate(at)}


def race_library(
    backend,
    deck: LibraryDeck,
    profile: Mapping,
    config: Mapping,
    kernels: Mapping[str, Kernel],
    sizes: Sequence[Size],
    candidates: Mapping[int, Sequence[str]],
    reference: Mapping[int, str],
    workdir: Path,
    job: str,
    results: Path,
    workload: Mapping[int, float] | None = None,
) -> RaceResult:
    """One benchmark or finalize job's race of ``kernels`` (built) on one library of the deck at ``sizes``:
    scored as normalise scores (with fewer resamples: :data:`RACE_BOOTSTRAP`), the launch plan seeded by the
    run's seed, library and ``job`` (``gen<N>`` or ``final``), the samples kept in
    ``results/measurements/<library>/<job>`` (``results``: the run's folder, results/<arch>). ``workload``:
    the workload's calls per size, which finalize's race follows (``racing.workload_precision``)."""
    library = Library.parse(deck.name)
    size_lists = [s.as_list() for s in sizes]
    return run_race(
        backend,
        Problem.of(deck, profile),
        kernels,
        sizes,
        candidates,
        reference,
        lambda df, only: score_library(df, library, size_lists, profile, config, only, RACE_BOOTSTRAP),
        config,
        workdir,
        f"{config['seed']}:{deck.name}:{job}",
        archive=Path(results) / "measurements" / deck.name / job,
        workload=workload,
    )
