"""How long a configured run takes, before it starts: ``oto plan``, and the backend's share of the time left
that the progress line shows.

From the plan (libraries, generations), the deck (each library's tuning sizes and their shipped kernels),
the racing settings and a backend's declared :class:`~oto.backends.base.Costs`:

* **Launches.** A generation's race probes every candidate ``probe_repetitions`` times at every tuning size,
  then tops up contenders until its budget (``budget_per_pair`` × candidates × sizes candidate launches).
  How much of the top-up budget a race spends, how many reference launches bracket the candidates and how
  many rounds it takes are the means over the 32 benchmark jobs of the default demo (simulated gfx90c,
  2026-12-01: ``TOPUP_SHARE``, ``REFERENCE_SHARE``, ``RACE_ROUNDS``); the budget gives the upper bound.
  Finalize races the finalists (about one per 8 tuning sizes, at least 2) on every deck size, and beside
  them up to ``benchmark.best_shipped_shortlist`` shipped kernels per size (the best shipped kernel's
  contenders: :mod:`oto.measurement.best_shipped`; the plan shows what that shortlist adds) and, at their
  own tuning size, the selection's contenders (earlier generations' leaders: the demo's mean per size).
* **Kernel time.** Each launch takes the time of the size's shipped kernel (the spoof floor) on the simulated
  GPU's performance model: tuned candidates are faster, rejected ones slower, so it is the middle of the
  range, not a measurement.
* **Backend.** Start-up per invocation (one build, one per racing round), build seconds per kernel, and per
  launch the kernel time scaled (1 on a GPU, ``sim.pace`` on the simulator) with its cool-down and warm-ups
  plus a host overhead.

A converged library freezes its later generations (no benchmark), so the figures are for a run in which
no library converges early: an upper bound in that respect.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from oto.backends.base import Costs
from oto.stages import gpu_stages, stages

# Means over the default demo's 32 benchmark jobs (simulated gfx90c, seed 1, 2026-12-01).
TOPUP_SHARE = 0.51  # share of the top-up budget (budget - probe) a race spends
REFERENCE_SHARE = 0.46  # reference launches per candidate launch (the bracketing spoof floor)
RACE_ROUNDS = 5  # measure calls per race (the probe included)
SIZES_PER_FINALIST = 8  # finalize: about one finalist per 8 tuning sizes (at least 2)
# finalize: timed launches per (shortlisted shipped kernel, size), references apart: the mean of the default
# demo's 8 finalize races (simulated gfx90c, seed 1, 2026-12-03; bench/best_shipped_bench.py)
SHORTLIST_LAUNCHES_PER_PAIR = 5.97
# finalize: the selection's contenders (earlier generations' leaders it races at their own tuning size only,
# oto.measurement.selection.size_contenders), not known before the run: per tuning size, the (contender, size)
# pairs raced that were no finalist, and their timed launches per pair, references apart; the default demo's
# 8 finalize races (simulated gfx90c, 2026-12-04, commit 6242866: 117 pairs over 288 tuning sizes, 1,275
# launches; 2.0% of the races' launches)
CONTENDER_PAIRS_PER_SIZE = 0.41
CONTENDER_LAUNCHES_PER_PAIR = 10.9
ESTIMATE_FILE = ".snakemake/oto/estimate.json"  # written when a run starts, read by the progress line
# A mean job of the demo (its seconds beyond the backend's own estimate) in units of this machine's probe
# (oto.run.probe: a job's start-up, timed when the run starts): the expected job where this folder has no
# recorded durations yet. The probe is a job's start-up (its imports, CPU × contention), so a mean job is
# near one probe: bench/estimate_bench.py's fitting runs (2026-12-03 17:18-17:33 UTC) gave 1.11 (idle, a whole
# run) and 1.30 (loaded, projected from its first 42 jobs), geometric mean 1.2; other runs judged it
# (bench/RESULTS.md, issue #27).
JOB_PROBE_RATIO = 1.2
# Where the probe cannot run and nothing is recorded: the range of a mean job on the machines measured so far
# (0.5 s idle on the 2-core development machine, 2.4 s on a 2-core VM with a dozen busy processes; RESULTS).
LEARNING_JOB_SECONDS = (0.4, 3.0)
# The order of a run's job counts: per generation, per generation of every library, per library, per run
# (family summaries are built on request only: no default target needs them).
JOB_SCOPES = ("generation", "round", "library", "run")


@dataclass(frozen=True)
class GpuJob:
    """The measuring work of one benchmark or finalize job."""

    rule: str  # benchmark | finalize
    library: str
    generation: int | None  # None for finalize
    kernels: int  # candidates (or finalists) raced, plus the distinct references
    sizes: int
    pairs: float  # (candidate, size) pairs (those racing only the probe count per round: warm-ups)
    launches: float  # expected timed launches, references included
    launches_max: float  # under the racing budget
    rounds: int  # measure invocations
    kernel_us: float  # mean kernel time of a launch (the shipped kernel's, on the performance model)

    @property
    def key(self) -> str:
        return self.library if self.generation is None else f"{self.library}/gen{self.generation}"

    def seconds(self, costs: Costs, launches: float | None = None) -> float:
        """Wall seconds of this job's measuring under ``costs`` (its builds are the compile job's)."""
        n = self.launches if launches is None else launches
        warm = costs.warmups_per_pair * self.pairs * self.rounds
        kernel_s = self.kernel_us * 1e-6 * costs.gpu_time_scale * (1 + costs.cooldown_share)
        return self.rounds * costs.startup_s + (n + warm) * kernel_s + n * costs.launch_overhead_us * 1e-6

    def build_seconds(self, costs: Costs) -> float:
        return costs.startup_s + self.kernels * costs.build_s_per_kernel

    @property
    def recorded_seconds(self) -> float:
        """The GPU seconds its samples.csv would record: launches × kernel time, the sum of ``time_us`` that
        the budget counts (:func:`oto.measurement.budget.generation_gpu_seconds`)."""
        return self.launches * self.kernel_us * 1e-6


@dataclass
class RunEstimate:
    arch: str
    libraries: list[str]
    generations: int
    jobs: dict[str, int]  # rule → jobs a fresh run has
    gpu_jobs: list[GpuJob] = field(default_factory=list)
    workload: dict | None = None  # the deck's workload record (oto.deck.sources.workload_summary), if any
    # the finalize jobs as they would be without the best-shipped shortlist (its cost is the difference)
    without_shortlist: list[GpuJob] = field(default_factory=list)
    shortlist: int = 0  # benchmark.best_shipped_shortlist
    # per library, the workload's GPU seconds at its tuning sizes on the shipped kernel (calls, or the deck's
    # weights, × mean kernel time): the budget's prior of what a library has to gain
    workload_seconds: dict[str, float] = field(default_factory=dict)
    # what config deck.max_sizes kept of the deck (oto.deck.size_cap.cap_summary); None: no cap
    size_cap: dict | None = None

    def generation_gpu_seconds(self, library: str) -> float:
        """Recorded GPU seconds (launches × kernel time, as samples.csv sums them) of one generation."""
        job = next(j for j in self.gpu_jobs if j.rule == "benchmark" and j.library == library)
        return job.recorded_seconds

    @property
    def total_jobs(self) -> int:
        return sum(self.jobs.values())

    def launches(self, rule: str | None = None, bound: bool = False) -> float:
        return sum(j.launches_max if bound else j.launches for j in self.gpu_jobs if rule in (None, j.rule))

    def gpu_seconds(self, costs: Costs, rule: str | None = None, bound: bool = False) -> float:
        return sum(
            j.seconds(costs, j.launches_max if bound else None)
            for j in self.gpu_jobs
            if rule in (None, j.rule)
        )

    def build_seconds(self, costs: Costs) -> float:
        return sum(j.build_seconds(costs) for j in self.gpu_jobs if j.rule == "benchmark")

    def shortlist_seconds(self, costs: Costs) -> tuple[float, float]:
        """(GPU seconds, build seconds) the best-shipped shortlist adds to finalize."""
        final = [j for j in self.gpu_jobs if j.rule == "finalize"]
        gpu = sum(j.seconds(costs) for j in final) - sum(j.seconds(costs) for j in self.without_shortlist)
        build = sum(j.build_seconds(costs) for j in final) - sum(
            j.build_seconds(costs) for j in self.without_shortlist
        )
        return gpu, build

    def job_seconds(self, costs: Costs) -> dict[str, dict[str, float]]:
        """Per GPU job, the backend's seconds: what the progress line adds to the recorded overhead."""
        out: dict[str, dict[str, float]] = {}
        for j in self.gpu_jobs:
            out.setdefault(j.rule, {})[j.key] = round(j.seconds(costs), 3)
        return out


def _mean_kernel_us(gpu, library, deck_lib, indices) -> float:
    """Mean model time of the shipped kernel over the given deck sizes (one vectorised call per kernel)."""
    import numpy as np

    by_kernel: dict[int | str, list[int]] = {}
    params: dict[int | str, dict] = {}
    for i in indices:
        if deck_lib.shipped[i] is not None:
            pos = int(deck_lib.shipped[i][0])
            by_kernel.setdefault(pos, []).append(i)
            params[pos] = deck_lib.solutions[pos]["params"]
    unshipped = [i for i in indices if deck_lib.shipped[i] is None]  # a workload's: the floor's kernel
    for i, ref in deck_lib.references(unshipped).items() if unshipped else ():
        if ref["id"] is not None:
            by_kernel.setdefault(ref["id"], []).append(i)
            params[ref["id"]] = ref["params"]
    total, count = 0.0, 0
    for key, idx in by_kernel.items():
        m, n, b, k = np.asarray([deck_lib.sizes[i][:4] for i in idx], dtype=float).T
        t = gpu.true_time_us(library.family, params[key], m, n, b, k, library.pattern)
        t = np.asarray(t, dtype=float)
        ok = np.isfinite(t) & (t > 0)
        total, count = total + float(t[ok].sum()), count + int(ok.sum())
    return total / count if count else 0.0


def _references(deck_lib, indices) -> int:
    """How many reference kernels race at these sizes: the shipped solutions there, and one for the sizes
    with nothing shipped (a workload's; their floor's picks are mostly one kernel or a few)."""
    shipped = {int(deck_lib.shipped[i][0]) for i in indices if deck_lib.shipped[i] is not None}
    return len(shipped) + int(any(deck_lib.shipped[i] is None for i in indices))


def _race(candidates: int, sizes: int, references: int, racing: Mapping, enabled: bool, reps: int):
    """(expected launches, launches under the budget, rounds) of one race."""
    pairs = candidates * sizes
    if not enabled:
        n = reps * (pairs + references * sizes)
        return n, n, 1
    probe = racing["probe_repetitions"] * pairs
    budget = max(probe, racing["budget_per_pair"] * pairs)
    expected = probe + TOPUP_SHARE * (budget - probe)
    return expected * (1 + REFERENCE_SHARE), budget * (1 + REFERENCE_SHARE), RACE_ROUNDS


def estimate_run(
    config: Mapping[str, Any], libraries: list[str], deck, profile: Mapping[str, Any]
) -> RunEstimate:
    """The run of ``libraries`` (a :class:`~oto.deck.model.Deck` holds their slices) under ``config``."""
    from oto.deck.tuning_sizes import deck_tuning_indices
    from oto.gemm import Library
    from oto.hardware.simulated.performance import SimGPU

    gens = int(config["max_generations"])
    bench = config["benchmark"]
    racing, enabled = bench["racing"], bool(bench["racing"]["enabled"])
    cands = int(config["search"]["candidates_per_generation"])
    shortlist = int(bench.get("best_shipped_shortlist", 0))
    gpu = SimGPU(profile, seed=int(config["seed"]))
    est = RunEstimate(
        arch=str(profile["arch"]), libraries=list(libraries), generations=gens, jobs={}, shortlist=shortlist
    )
    for name in libraries:
        deck_lib = deck.libraries[name]
        library = Library.parse(name)
        idx = deck_tuning_indices(deck_lib, int(bench["tuning_sizes"]))
        refs = _references(deck_lib, idx)
        kernel_us = _mean_kernel_us(gpu, library, deck_lib, idx)
        weights = deck_lib.calls if deck_lib.calls is not None else deck_lib.weights
        est.workload_seconds[name] = sum(float(weights[i]) for i in idx) * kernel_us * 1e-6
        n, most, rounds = _race(cands, len(idx), refs, racing, enabled, int(bench["repetitions"]))
        for g in range(gens):
            est.gpu_jobs.append(
                GpuJob(
                    "benchmark", name, g, cands + refs, len(idx), cands * len(idx), n, most, rounds, kernel_us
                )
            )
        every = range(len(deck_lib.sizes))
        finalists = min(cands, max(2, math.ceil(len(idx) / SIZES_PER_FINALIST)))
        refs_all = _references(deck_lib, every)
        final_us = _mean_kernel_us(gpu, library, deck_lib, every)
        # the shortlist: up to that many other legal shipped solutions per size, built once each
        per_size = min(shortlist, max(0, len(deck_lib.solutions) - 1))
        distinct = min(len(deck_lib.solutions), per_size * len(every))
        n, most, rounds = _race(finalists, len(every), refs_all, racing, enabled, int(bench["repetitions"]))
        # the selection's contenders, each at its own tuning size (an earlier generation's leader)
        contenders = CONTENDER_PAIRS_PER_SIZE * len(idx) if gens > 1 else 0.0
        per_pair = CONTENDER_LAUNCHES_PER_PAIR if enabled else int(bench["repetitions"])
        extra = contenders * per_pair * (1 + REFERENCE_SHARE)
        contender_pairs = contenders / rounds if enabled else contenders  # warm-ups: the probe's
        plain = GpuJob(
            "finalize", name, None, finalists + refs_all, len(every),
            finalists * len(every) + contender_pairs, n + extra, most + extra, rounds, final_us,
        )  # fmt: skip
        est.without_shortlist.append(plain)
        listed = per_size * len(every)  # (shortlisted kernel, size) pairs
        if listed and enabled:
            # a shortlisted kernel is a candidate like the finalists, but most leave the race after the
            # probe: charge the launches they took in the demo's finalize races (warm-ups: the probe's)
            _, most, _ = _race(finalists + per_size, len(every), refs_all, racing, enabled, 1)
            n += listed * SHORTLIST_LAUNCHES_PER_PAIR * (1 + REFERENCE_SHARE)
            pairs = plain.pairs + listed / rounds
        elif listed:
            n, most, rounds = _race(
                finalists + per_size, len(every), refs_all, racing, enabled, int(bench["repetitions"])
            )
            pairs = plain.pairs + listed
        else:
            pairs = plain.pairs
        job = GpuJob(
            "finalize", name, None, plain.kernels + distinct, len(every), pairs, n + extra, most + extra,
            rounds, final_us,
        )  # fmt: skip
        est.gpu_jobs.append(_with_workload_precision(job, gpu, library, deck_lib, racing, enabled))
    est.jobs = run_jobs(len(libraries), gens, config)
    return est


# finalize of a workload deck (benchmark.racing.workload_precision): the spread in log of one launch of a
# size's winner against the floor, the floor's median in quadrature, as finalize's races on the simulated
# gfx90c took it (~115 winner launches to +-1% at a size with all of a library's workload time;
# bench/RESULTS.md, "Finalize's measured workload figure")
PRECISION_SPREAD = 0.05


def _with_workload_precision(job: GpuJob, gpu, library, deck_lib, racing: Mapping, enabled: bool) -> GpuJob:
    """A finalize job with the launches its race adds for a workload's precision: the winner's launches a
    size with all the workload's time needs (its interval's spread at the large-n quantile, a fifth more,
    at most ``workload_max_repetitions``), shared over the called sizes by their share of the time (the
    targets' allocation: oto.measurement.racing.precision_targets), each with its two references, at
    the floor's time of the sizes they go to. Unchanged without calls or with the option off."""
    precision = float(racing.get("workload_precision", 0.0))
    calls = deck_lib.calls
    if not enabled or precision <= 0 or not calls or not any(calls):
        return job
    called = [i for i, c in enumerate(calls) if c]
    time = {i: calls[i] * _mean_kernel_us(gpu, library, deck_lib, [i]) for i in called}
    total = sum(t for t in time.values() if math.isfinite(t) and t > 0)
    if total <= 0:
        return job
    winner = min(
        int(racing["workload_max_repetitions"]), math.ceil(1.2 * (1.96 * PRECISION_SPREAD / precision) ** 2)
    )
    extra = 3 * winner  # the winner's launches and the two references that bracket each
    # launches go to the sizes in proportion to their share of the time: their mean launch time
    per_launch = sum(t / total * time[i] / calls[i] for i, t in time.items() if math.isfinite(t) and t > 0)
    launches = job.launches + extra
    kernel_us = (job.launches * job.kernel_us + extra * per_launch) / launches
    return replace(job, launches=launches, launches_max=job.launches_max + extra, rounds=job.rounds + 1,
                   kernel_us=kernel_us)  # fmt: skip


def run_jobs(libraries: int, generations: int, config: Mapping[str, Any]) -> dict[str, int]:
    """Jobs per rule of a fresh run under ``config``, from each stage's declared scope and condition
    (oto.stages: a stage ``when`` a config key the config leaves unset has none), in the order of
    ``JOB_SCOPES`` and, within a scope, workflow order."""
    rounds = max(generations - 1, 0)  # a round stage's job decides each generation after gen0
    per_scope = {"generation": libraries * generations, "round": rounds, "library": libraries, "run": 1}
    return {
        s.name: per_scope[scope]
        for scope in JOB_SCOPES
        for s in stages()
        if s.scope == scope and (s.when is None or config.get(s.when)) and per_scope[scope]
    }


def plan_estimate(plan, profile: Mapping[str, Any]) -> RunEstimate:
    """:func:`estimate_run` for a :class:`~oto.run.plan.Plan` (its config, libraries and deck source)."""
    from oto.deck.sources import load_run_deck

    deck = load_run_deck(plan.deck, plan.libraries)[1]  # with its floor and workload, as the deck rule has it
    est = estimate_run(plan.config, plan.libraries, deck, profile)
    est.workload = deck.workload
    est.size_cap = deck.size_cap
    return est


def _gpu_duration(seconds: float) -> str:
    """fmt_duration, with a small library's fraction of a second kept (0.18 s, not 0 s)."""
    return f"{seconds:.2g} s" if seconds < 10 else fmt_duration(seconds)


def budget_lines(est: RunEstimate, hours: float, sweep: int = 0) -> list[str]:
    """What ``oto plan`` says of config ``budget``: gen0 of every library, then the plan the first share
    (:func:`oto.measurement.budget.allocate`) makes from the deck alone (gap to the ceiling counted whole,
    improvement unknown); the run reallocates after every generation from what it measured."""
    from oto.measurement.budget import UNKNOWN_IMPROVEMENT, LibraryState, allocate

    budget_s = hours * 3600.0
    states = [
        LibraryState(
            lib,
            0,
            est.workload_seconds.get(lib, 0.0),
            UNKNOWN_IMPROVEMENT,
            est.generation_gpu_seconds(lib),
            est.generation_gpu_seconds(lib),
            True,
        )  # fmt: skip
        for lib in est.libraries
    ]
    gen0 = sum(s.spent_s for s in states)
    plan = allocate(states, budget_s, est.generations - 1)
    lines = [
        "",
        f"Budget: {fmt_duration(budget_s)} of GPU time as the benchmark records it; gen0 of every library "
        f"takes ~{fmt_duration(gen0)}, the rest is shared by expected gain (gap to the ceiling × workload "
        "time × improvement) after every generation, max_generations the cap. Planned from the deck:",
    ]
    for lib in est.libraries:
        a = plan[lib]
        lines.append(
            f"  {lib:<24s} share {_gpu_duration(a.share_s):>14s}   {1 + a.generations} of {est.generations} "
            f"generations at ~{_gpu_duration(est.generation_gpu_seconds(lib))} each"
            + ("   (starved after gen0)" if a.reason else "")
        )
    if sweep:
        lines.append(
            f"  and a sweep: up to {sweep} fork-lattice kernels for each library with a gap, in the "
            "generation after those equal generations would give it (or at its last), at its GPU time per "
            "kernel; the sweep's kernels are built too, outside the budget"
        )
    return lines


def workload_lines(w: Mapping[str, Any]) -> list[str]:
    """What ``oto plan`` says of a workload: the calls the run covers and every GEMM it does not, with why."""
    called = sum(1 for c in w["calls_by_library"].values() if c)
    head = (
        f"Workload: {w['calls_covered']} calls in {called} of the {len(w['calls_by_library'])} libraries; "
        f"{w['calls_uncovered']} calls not covered by this run"
    )
    rows = [f"  {u['where']}: {u['gemm']} ({u['calls']} calls): {u['reason']}" for u in w["uncovered"]]
    note = workload_warning(w)
    return ["", head + (":" if rows else "."), *rows, *([f"Warning: {note}"] if note else [])]


def workload_warning(w: Mapping[str, Any] | None) -> str | None:
    """What a dry-run and ``oto plan`` warn of a workload none of whose calls this run tunes (its GEMMs all
    outside the selected families or the deck: the likeliest mistake, which went unsaid until the run's
    coverage job); None where some are covered, or there is no workload."""
    if not w or w.get("calls_covered"):
        return None
    total = int(w.get("calls_uncovered") or 0)
    return (
        f"none of the workload's {total} calls is in this run's libraries: the run tunes as if there were no "
        "workload (select the families and patterns it calls: `oto plan` lists them with why)"
    )


def estimate_document(est: RunEstimate, backend: str, numbers: str, costs: Costs) -> dict[str, Any]:
    """What the progress line reads of a run's estimate: per GPU job, the configured backend's seconds."""
    return {
        "arch": est.arch,
        "backend": backend,
        "numbers": numbers,
        "costs": asdict(costs),
        "jobs": est.jobs,
        "gpu_seconds": est.job_seconds(costs),
        **({"size_cap": est.size_cap} if est.size_cap else {}),
        **({"workload_warning": note} if (note := workload_warning(est.workload)) else {}),
    }


def write_estimate(path: str | Path, doc: Mapping[str, Any]) -> None:
    from oto.files import atomic_write_text

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(path), json.dumps(doc, indent=1, sort_keys=True))


def plan_document(plan) -> dict[str, Any] | None:
    """:func:`estimate_document` of a :class:`~oto.run.plan.Plan` under its configured backend. Best effort: a
    failure here only costs the time estimate (None, with a warning)."""
    import logging

    from oto.backends import backend_class

    try:
        profile = plan.profile  # the device profile where the config names one (a calibrated one included)
        cls = backend_class(plan.config, profile)
        return estimate_document(plan_estimate(plan, profile), cls.name, cls.numbers, cls.costs(plan.config))
    except Exception as exc:  # noqa: BLE001
        logging.getLogger(__name__).warning("no run estimate for the progress line: %s", exc)
        return None


def record_run_estimate(
    plan, resumed: tuple[int, int] | None = None, path: str | Path = ESTIMATE_FILE
) -> dict[str, Any]:
    """When a run starts (the Snakefile's onstart, after the DAG is built): for the progress line's first
    estimate, the configured backend's seconds for every GPU job of the plan, this machine's probe measured
    now (oto.run.probe) and, for a resumed run, ``resumed`` = (jobs of the target already done in this
    folder, jobs of the target). ``pid`` ties the file to this run: the logger ignores another run's."""
    import os
    import time

    from oto.run.probe import job_probe

    probe = job_probe(max_age_s=0)
    doc: dict[str, Any] = {
        **(plan_document(plan) or {}),
        "pid": os.getpid(),
        "written_at": time.time(),
        "probe": None if probe is None else probe.document(),
        "resumed": list(resumed) if resumed else None,
    }
    try:
        write_estimate(path, doc)
    except OSError as exc:
        import logging

        logging.getLogger(__name__).warning("no run estimate for the progress line: %s", exc)
    return doc


def read_estimate(path: str | Path, pid: int | None = None) -> dict[str, Any] | None:
    """The estimate file; with ``pid``, only when the run of that process wrote it."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or (pid is not None and doc.get("pid") != pid):
        return None
    return doc


def recorded_durations(
    metadata_dir: str | Path = ".snakemake/metadata", arch: str | None = None
) -> dict[str, list[float]]:
    """Per rule, the durations of the jobs Snakemake recorded in this folder. Snakemake keeps one record per
    output file (the latest run's); a job's records share its job hash (their times differ by the
    microseconds between writing them), so one job is one entry, from its earliest start to its last end.
    With ``arch``, only the jobs whose output lies in that arch's results folder: another arch's deck may be
    eight times larger (navi31's demo families against vega10's), and its library-wide jobs with it."""
    folder = Path(metadata_dir)
    jobs: dict[tuple, list[float]] = {}
    if not folder.is_dir():
        return {}
    for f in folder.iterdir():
        if arch is not None and arch not in _recorded_output(f.name).parts:
            continue
        try:
            meta = json.loads(f.read_text())
            rule, start, end = meta["rule"], float(meta["starttime"]), float(meta["endtime"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        key = (rule, meta.get("job_hash"), None if meta.get("job_hash") is not None else end)
        jobs[key] = [min(start, jobs[key][0]), max(end, jobs[key][1])] if key in jobs else [start, end]
    out: dict[str, list[float]] = {}
    for (rule, _, _), (start, end) in sorted(jobs.items(), key=lambda kv: kv[1][0]):
        if end >= start:
            out.setdefault(rule, []).append(end - start)
    return out


def _recorded_output(name: str) -> Path:
    """The output file a Snakemake metadata record is named after (its path, urlsafe base64)."""
    import base64

    try:
        return Path(base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode())
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors: not a record of a file
        return Path()


def fmt_duration(seconds: float) -> str:
    """3 s, 4 min 10 s, 2 h 05 min, 3 d 4 h."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400 * 2:
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    return f"{s // 86400} d {(s % 86400) // 3600} h"


def report(
    est: RunEstimate,
    backend: str,
    numbers: str,
    costs: Costs,
    target_costs: Costs,
    job_overhead_s: float,
    overhead_source: str,
    budget_hours: float | None = None,
    budget_sweep: int = 0,
) -> str:
    """The text ``oto plan`` prints (``budget_hours``: config ``budget.hours``, if set)."""
    lines = [
        f"{len(est.libraries)} libraries × {est.generations} generations on {est.arch}: "
        f"{est.total_jobs} jobs ({', '.join(f'{r} {n}' for r, n in est.jobs.items())})",
        f"timed launches: ~{est.launches():,.0f} expected, at most {est.launches(bound=True):,.0f} under the "
        f"racing budget (benchmark ~{est.launches('benchmark'):,.0f}, "
        f"finalize ~{est.launches('finalize'):,.0f})",
        *([f"deck: {est.size_cap['text']}"] if est.size_cap else []),
        "",
        f"On the real {est.arch} (kernel times from the performance model; Tensile's start-up, build and "
        "cool-down costs):",
    ]
    gpu_b, gpu_f = est.gpu_seconds(target_costs, "benchmark"), est.gpu_seconds(target_costs, "finalize")
    build = est.build_seconds(target_costs) + est.shortlist_seconds(target_costs)[1]
    orchestration = est.total_jobs * job_overhead_s
    most = est.gpu_seconds(target_costs, bound=True) + build + orchestration
    extra_gpu, extra_build = est.shortlist_seconds(target_costs)
    base = gpu_b + gpu_f - extra_gpu
    lines += [
        f"  benchmark  {fmt_duration(gpu_b):>14s}   GPU",
        f"  finalize   {fmt_duration(gpu_f):>14s}   GPU, of which the best-shipped shortlist "
        f"{fmt_duration(extra_gpu)} (+{100 * extra_gpu / base if base else 0:.1f}% GPU time; "
        f"{est.shortlist} shipped kernels per size, builds +{fmt_duration(extra_build)})",
        f"  builds     {fmt_duration(build):>14s}   CPU (compile jobs, and finalize's of the shortlist)",
        f"  jobs       {fmt_duration(orchestration):>14s}   "
        f"{est.total_jobs} × {job_overhead_s:.1f} s ({overhead_source})",
        f"  total      {fmt_duration(gpu_b + gpu_f + build + orchestration):>14s}   "
        f"(at most {fmt_duration(most)} if every race spends its budget)",
    ]
    if costs != target_costs:
        here = est.gpu_seconds(costs) + est.build_seconds(costs) + orchestration
        lines += [
            "",
            f"Here, backend {backend} ({numbers} numbers): about {fmt_duration(here)} "
            f"({est.total_jobs} jobs × {job_overhead_s:.1f} s + {fmt_duration(est.gpu_seconds(costs))} "
            f"in the backend: {costs.source}).",
        ]
    if est.workload:
        lines += workload_lines(est.workload)
    if budget_hours:
        lines += budget_lines(est, budget_hours, budget_sweep)
        recorded = sum(j.recorded_seconds for j in est.gpu_jobs if j.rule == "benchmark")
        if recorded > 0:  # the budget counts what samples.csv records; a night also builds and starts Tensile
            night = gpu_b + est.build_seconds(target_costs)
            lines.append(
                f"  The budget counts kernel time only: on the real {est.arch} the benchmark stage's builds, "
                f"Tensile's start-up and launch overheads make its night ~{night / recorded:.1f}× the kernel "
                f"time ({fmt_duration(night)} for {fmt_duration(recorded)} here), so set budget.hours to the "
                "night's hours divided by that."
            )
    lines.append(
        "Estimates, not measurements: a library that converges early skips its later generations; the real "
        "GPU's races may stop sooner or later than the simulated ones the launch counts come from."
    )
    return "\n".join(lines)


def _override(config: dict, item: str) -> None:
    """KEY=VALUE (YAML value; KEY may be dotted: benchmark.tuning_sizes=32), as snakemake --config takes."""
    import yaml

    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValueError(f"--config {item!r}: expected KEY=VALUE, e.g. families=all or 'families=[SB,DB]'")
    *parents, leaf = key.split(".")
    node = config
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"--config {item!r}: {p} is not a mapping")
    node[leaf] = yaml.safe_load(value)


def job_overhead(durations: Mapping[str, list[float]], probe=None) -> tuple[float, str]:
    """Mean seconds of a job beyond the backend's work: recorded in this folder, else this machine's probe
    (an :class:`oto.run.probe.Probe`) × ``JOB_PROBE_RATIO``, else the middle of ``LEARNING_JOB_SECONDS``."""
    other = [d for rule, ds in durations.items() if rule not in gpu_stages() for d in ds]
    if len(other) >= 10:
        return sum(other) / len(other), f"mean of {len(other)} jobs recorded in .snakemake/metadata"
    if probe is not None:
        return probe.seconds * JOB_PROBE_RATIO, (
            f"{JOB_PROBE_RATIO:g} × this machine's probe: {probe.describe()}"
        )
    low, high = LEARNING_JOB_SECONDS
    return math.sqrt(low * high), f"no probe ran: a job takes {low:g}-{high:g} s on the machines measured"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    import yaml

    from oto.backends import backend_class
    from oto.backends.tensile import TensileBackend
    from oto.config import layered_config
    from oto.registry.transfer import donor_notes
    from oto.run.plan import PlanError, plan_run
    from oto.run.probe import job_probe

    ap = argparse.ArgumentParser(
        prog="oto plan",
        description="Estimate a configured run before starting it: its jobs, timed launches, the GPU time "
        "of a real run on the target (kernel times from the performance model, Tensile's measured start-up "
        "and build costs) and the wall time with the configured backend on this machine. Run it in the "
        "workflow folder (it reads config/, arch_profiles/ and, when present, the job durations Snakemake "
        "recorded in .snakemake/metadata).",
        epilog="examples: oto plan  |  oto plan --config families=all max_generations=8  |  "
        "oto plan --config 'families=[SB]' --json",
    )
    ap.add_argument(
        "--configfile",
        default="config/config.yaml",
        type=Path,
        help="run configuration to estimate (default: %(default)s, the workflow's)",
    )
    ap.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="override config values as snakemake --config does (YAML values; dotted keys for nested "
        "fields, e.g. benchmark.tuning_sizes=32)",
    )
    ap.add_argument("--json", action="store_true", help="print the estimate as JSON instead of text")
    args = ap.parse_args(argv)
    try:
        config = layered_config([args.configfile])  # as Snakemake layers it over config/config.yaml
        given: dict = {}  # the --config entries alone, as Snakemake passes them: errors there name --config
        for item in args.config:
            _override(config, item)
            _override(given, item)
        plan = plan_run(config, [args.configfile], given)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # PlanError is a ValueError
        print(f"oto plan: {exc}", file=sys.stderr)
        return 2
    del PlanError
    profile = plan.profile  # the device profile where the config names one (a calibrated one included)
    est = plan_estimate(plan, profile)
    cls = backend_class(plan.config, profile)
    costs, target = cls.costs(plan.config), TensileBackend.costs(plan.config)
    overhead, source = job_overhead(recorded_durations(arch=est.arch), job_probe())
    donors = donor_notes(plan.config["registry"]["warm_start"], plan.arch, plan.libraries)
    if args.json:
        doc = {
            "arch": est.arch,
            "libraries": est.libraries,
            "generations": est.generations,
            "jobs": est.jobs,
            "launches": {"expected": est.launches(), "at_most": est.launches(bound=True)},
            "target_seconds": {
                "benchmark": est.gpu_seconds(target, "benchmark"),
                "finalize": est.gpu_seconds(target, "finalize"),
                "best_shipped_shortlist": est.shortlist_seconds(target)[0],
                "best_shipped_shortlist_builds": est.shortlist_seconds(target)[1],
                "builds": est.build_seconds(target),
                "jobs": est.total_jobs * overhead,
            },
            "backend": {"name": cls.name, "numbers": cls.numbers, "seconds": est.gpu_seconds(costs)},
            "job_seconds": {"value": overhead, "source": source},
            **({"workload": est.workload} if est.workload else {}),
            **({"size_cap": est.size_cap} if est.size_cap else {}),
            **({"warm_start": donors} if donors else {}),
        }
        if plan.config["budget"]:
            doc["budget"] = {
                "hours": plan.config["budget"]["hours"],
                "plan": budget_lines(est, plan.config["budget"]["hours"], plan.config["budget"]["sweep"])[1:],
            }
        print(json.dumps(doc, indent=1))
        return 0
    budget = plan.config["budget"]
    hours, sweep = (budget["hours"], budget["sweep"]) if budget else (None, 0)
    print(report(est, cls.name, cls.numbers, costs, target, overhead, source, hours, sweep))
    if donors:
        print("", *donors, sep="\n")
    return 0
