"""What ``snakemake -n`` prints with oto's logger: the run's short plan instead of Snakemake's listing.

Snakemake's dry-run lists every job with its files and reasons (11,119 lines for ``families=all``). oto's
logger (``workflow/snakemake_logger_plugin_oto``) collects the jobs instead and prints, at the end, the jobs
per stage, the jobs per library (grouped by family: the libraries of a family usually share their plan) and
the time the run should take here (:class:`oto.run.progress.RunProgress`, as the run's first line would say:
the backend's estimate of the GPU jobs from the plan, this machine's probe). ``--logger-oto-full`` prints
Snakemake's own listing.

The plan and the count of jobs already done come from the workflow parsed in this process: rules/common.smk
hands them over with :func:`remember` (in memory; a dry-run writes nothing but the probe's cache).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from oto.gemm import Library
from oto.stages import stages

_REMEMBERED: dict[str, Any] = {}


def remember(plan, jobs_done: Callable[[], tuple[int, int]] | None = None) -> None:
    """The plan the workflow parsed in this process, and how to count the target's jobs already done (asked
    only when the dry-run has finished: the DAG is complete by then)."""
    _REMEMBERED.update(plan=plan, jobs_done=jobs_done)


def remembered() -> tuple[Any, Callable[[], tuple[int, int]] | None]:
    return _REMEMBERED.get("plan"), _REMEMBERED.get("jobs_done")


def stage_jobs(jobs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The jobs of declared stages: a target rule (``all``) does no work."""
    names = {s.name for s in stages()}
    return [(rule, wc) for rule, wc in jobs if rule in names]


def _generations(gens: set[int]) -> str:
    ordered = sorted(gens)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"gen{ordered[0]}" if len(ordered) == 1 else f"gen{ordered[0]}-gen{ordered[-1]}"
    return " ".join(f"gen{g}" for g in ordered)


def library_plans(jobs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, list[str], int, str]]:
    """Per family and shared plan: (family, the libraries' patterns, jobs per library, what the jobs are)."""
    per_library: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for rule, wc in jobs:
        if wc.get("library"):
            per_library[str(wc["library"])].append((rule, wc.get("gen")))
    groups: dict[tuple[str, int, str], list[str]] = defaultdict(list)
    for name, its in sorted(per_library.items()):
        gens = {int(g) for _, g in its if g is not None}
        once = [s.name for s in stages() if any(r == s.name and g is None for r, g in its)]
        what = ", ".join(([_generations(gens)] if gens else []) + once)
        try:
            lib = Library.parse(name)
            family, pattern = lib.family.code, lib.pattern
        except ValueError:
            family, pattern = name, ""
        groups[(family, len(its), what)].append(pattern)
    return [(fam, sorted(filter(None, patterns)), n, what) for (fam, n, what), patterns in groups.items()]


def plan_lines(
    jobs: Sequence[tuple[str, Mapping[str, Any]]],
    how_long: str,
    resumed: tuple[int, int] | None = None,
    size_cap: Mapping[str, Any] | None = None,
    warning: str | None = None,
) -> list[str]:
    """The dry-run's plan: jobs per stage and per library, the time it should take (``how_long``) and, with
    config deck.max_sizes, the sizes the deck keeps (``size_cap``: oto.deck.size_cap.cap_summary);
    ``warning``: what the run's workload asks the user to look at (oto.run.estimate.workload_warning)."""
    names = [s.name for s in stages()]
    jobs = stage_jobs(jobs)
    counts = Counter(rule for rule, _ in jobs)
    head = f"oto: dry-run, nothing was run: {len(jobs)} jobs to run"
    if resumed and resumed[0] > 0:
        head += f" ({resumed[0]} of the target's {resumed[1]} jobs already done in this folder)"
    lines = [head + "; Snakemake's own listing: add --logger-oto-full", f"  {'stage':<14s} {'jobs':>4s}"]
    lines += [f"  {rule:<14s} {counts[rule]:>4d}" for rule in names if rule in counts]
    plans = library_plans(jobs)
    if plans:
        lines.append(f"  {'library':<21s} {'jobs':>7s}")
        for family, patterns, n, what in plans:
            libs = f"{family:<9s} {' '.join(patterns)}".rstrip()
            many = f"{len(patterns)} × {n}" if len(patterns) > 1 else f"{n}"
            lines.append(f"  {libs:<21s} {many:>7s}   {what}")
    if size_cap:
        lines.append(f"  {'deck':<14s} {size_cap['text']}")
    lines.append(f"  {'time':<14s} {how_long}")
    if warning:
        lines.append(f"oto: warning: {warning}")
    return lines
