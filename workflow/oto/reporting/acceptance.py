"""The acceptance report, ``results/<arch>/acceptance.md`` and its HTML twin: coverage of the deck, % of the
ceilings, wins/ties/losses against the spoof floor, the slowest sizes and a verdict per library.

Every figure comes from :func:`oto.reporting.collect.collect` over the same files the dashboard reads, through
the same functions (:mod:`oto.reporting.figures`): the report and the dashboard cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from oto.files import StageFileError, read_yaml, require
from oto.reporting import figures
from oto.reporting.dashboard import css, environment, fmt

ORDER_TEXT = {
    "plan": "the plan's order (the reference interleaved by the benchmark stage)",
    "reported": "the order the backend reported (Tensile's client: each problem's kernels back to back with "
    "its reference, one sweep per repetition, orders permuted per sweep)",
}
TELEMETRY_TEXT = {"per_launch": "a clock reading per launch", "per_sweep": "one clock reading per sweep",
                  "none": "no clock telemetry"}  # fmt: skip
NUMBERS_TEXT = {
    "simulated": "**simulated** on oto's model of the GPU (docs/simulator.md) — no hardware was measured",
    "replayed": "**replayed** from recorded real measurements",
    "measured": "**measured** on the GPU",
}


def check_finals(final_paths: Sequence[Path]) -> None:
    """A final.yaml the report cannot read fails here, naming the file and field."""
    for p in final_paths:
        doc = read_yaml(p)
        for key, kind in (("per_size", list), ("sizes", list), ("summary", dict), ("kernels", dict)):
            require(doc, key, p, kind)
        for i, row in enumerate(doc["per_size"]):
            if not isinstance(row, Mapping) or "verdict" not in row:
                raise StageFileError(f"{p}: per_size[{i}] has no field 'verdict'")


def _wtl(r: Mapping) -> str:
    return figures.wtl_text(r)


def _wtl_best(r: Mapping) -> str:
    """W/T/L against the best shipped kernel, and how many sizes kept it; — where it was not measured."""
    if not r.get("best_shipped_sizes"):
        return "—"
    kept = r.get("best_shipped_kept") or 0
    return f"{r['best_shipped_wins']}/{r['best_shipped_ties']}/{r['best_shipped_losses']}" + (
        f" ({kept} kept)" if kept else ""
    )


def _native_markdown(rows: list[Mapping], reference: str) -> list[str]:
    """The native floor beside the floor: what the tuned kernels gain over upstream's own library for the
    GPU (config deck.native_floor), next to their scores against the floor."""
    if not rows:
        return []
    out = [
        "",
        "## Against the native floor",
        "",
        "The tuned winners also raced, at every deck size, the solution upstream's own library for this GPU "
        f"runs there (its Matching table's pick); the floor column repeats their scores against {reference}. "
        "A size where upstream's kernel is the fastest raced ships it (kept); a size where upstream's "
        "kernel gave wrong results counts in no speed-up (wrong results).",
        "",
        "| library | native library | sizes | geomean speed-up over native | over the floor | "
        "sizes where native beats the floor | kept | wrong results |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['library']} | {r['arch']} ({r['path']}) | {r['sizes']} | "
            f"{fmt(r['geomean_vs_native'], '.3f', '×')} | {fmt(r['geomean_score'], '.3f', '×')} | "
            f"{r['native_faster_than_floor']} | {r['kept']} | {r['native_wrong']} |"
        )
    return out


def _listed(value) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def nights_markdown(nights: Mapping[str, Mapping], finished: Sequence[str]) -> list[str]:
    """One line per run (night) that finished libraries of the report, with its settings and, when there are
    several, its libraries; libraries finished before nights were recorded are named as such."""
    out = []
    for night_id, n in nights.items():
        which = f" ({', '.join(n['libraries'])})" if len(nights) > 1 else " (every library)"
        out.append(
            f"- Night `{night_id}`{which}: families {_listed(n.get('families'))}; patterns "
            f"{_listed(n.get('patterns') or [])}; strategy {n.get('strategy')}; seed {n.get('seed')}; "
            f"{n.get('max_generations')} generations; backend {n.get('backend')}"
            + (
                f"; warm start from {_listed(n['warm_start'])} (other GPUs' registries: their kernels were "
                "labelled priors of the search, never measurements here)."
                if n.get("warm_start")
                else "."
            )
        )
    unrecorded = sorted(set(finished) - {lib for n in nights.values() for lib in n["libraries"]})
    if unrecorded:
        out.append(f"- Finished before nights were recorded: {', '.join(unrecorded)}.")
    return out


def one_kernel_markdown(finals: list[Mapping]) -> list[str]:
    """Where sizes that differ only in the batch count took one kernel (rocBLAS serves them one: the
    logic's row with the highest GFLOPS among equal [M, N, K]); nothing where none did."""
    done = {f["library"]: f.get("one_kernel_per_key") or {} for f in finals}
    done = {n: d for n, d in done.items() if d.get("sizes")}
    if not done:
        return []
    sizes, groups = sum(d["sizes"] for d in done.values()), sum(d["groups"] for d in done.values())
    return [
        "**One kernel per [M, N, K].** rocBLAS matches a problem to a logic row by M, N and K, not the "
        f"batch count, so sizes that differ only in it are served one kernel. {sizes} size(s) in {groups} "
        f"such group(s) of {len(done)} librar{'y' if len(done) == 1 else 'ies'} ship their group's kernel "
        "(the best geomean over the group) and are scored with it; their own best kernel could not be served "
        "there.",
        "",
    ]


def size_cap_markdown(cap: Mapping | None) -> list[str]:
    """What config deck.max_sizes kept, under the coverage table: the tuned deck is a sample, not the
    footprint (nothing without a capped library)."""
    if not cap:
        return []
    per = "; ".join(
        f"{n} {r['kept']} of {r['of']}" + (f" ({r['note']})" if r.get("note") else "")
        for n, r in cap["libraries_capped"].items()
    )
    return [
        f"**Capped deck: {cap['text']}.** Each capped library keeps every size a workload calls, then "
        "sizes spread over its flops and batch counts (oto.deck.size_cap); every figure of this report is "
        "over the kept sizes, not the shipped footprint (set `deck.max_sizes: null` for the whole deck). "
        f"Per library: {per}.",
        "",
    ]


def render_markdown(data: Mapping, deck_source: Mapping) -> str:
    tol = data["tie_tolerance"] or 0.0
    fin, cov = data["final"], data["coverage"]
    libs = {lib["library"]: lib for lib in data["libraries"]}
    finished = [name for name, lib in libs.items() if lib["final"]]
    out = [f"# oto acceptance report — {data['arch']}", ""]
    if data.get("simulated_build_banner"):
        out += [f"> **Warning:** {data['simulated_build_banner']}", ""]
    out += ["## Provenance", ""]
    for n in data["numbers"] or ["unknown"]:
        out.append(f"- Numbers are {NUMBERS_TEXT.get(n, n)}.")
    if data.get("model_check"):
        out.append(f"- {data['model_check']}")
    kinds = data.get("measurement") or []
    for m in kinds:
        which = f" ({', '.join(m['libraries'])})" if len(kinds) > 1 else ""
        order = ORDER_TEXT.get(m.get("launch_order"), m.get("launch_order") or "?")
        tele = TELEMETRY_TEXT.get(m.get("clock_telemetry"), m.get("clock_telemetry") or "?")
        out.append(
            f"- Measured{which}: launches in {order}; {tele}; drift estimator `{m['drift']}`"
            + (f" — {m['drift_reason']}." if m.get("drift_reason") else ".")
        )
    out += [
        f"- Backend: `{', '.join(data['backends']) or '?'}`; seed {data['seed']}; deck: "
        f"{deck_source.get('kind', '?')} of the shipped {cov['deck_of']} library.",
        *nights_markdown(data.get("nights") or {}, finished),
        f"- Scores are drift-normalised ratios to {cov['reference']}; tie tolerance ±{tol:.0%}: a size is a "
        f"win when its score is ≥ {1 + tol:.2f} with the 95% interval above 1, a loss when ≤ {1 - tol:.2f} "
        "with the interval below 1, else a tie. Scores are taken in each batch's median thermal/DVFS state "
        "(a memory-bound kernel's ratio to the reference depends on it); GFLOPS and % of the ceiling at the "
        "peak state: the nominal clock where samples carry clock readings, else the fastest state seen.",
        "",
        *headline_markdown(fin["overall"], fin["families"], data.get("launch_us"), tol),
        f"## Coverage of the deck (against the shipped {cov['deck_of']} footprint)",
        "",
        "| | tuned | shipped (every library of the footprint) |",
        "|---|---|---|",
        f"| libraries | {cov['libraries_finished']} | {cov['libraries_in_source'] or '?'} |",
        f"| deck sizes (of the tuned libraries: {cov['deck_sizes_selected']}) | "
        f"{cov['final_sizes_with_winner']} with a measured winner | {cov['sizes_in_source'] or '?'} |",
        f"| kernels on those sizes | {cov['final_kernels']} | {cov['final_shipped_kernels']} |",
        f"| solutions in the tuned libraries | — | {cov['shipped_solutions_selected']} of "
        f"{cov['solutions_in_source'] or '?'} |",
        "",
        *size_cap_markdown(cov.get("size_cap")),
        *one_kernel_markdown([lib["final"] for lib in libs.values() if lib["final"]]),
        "## Per family: % of the theoretical ceiling",
        "",
        "| family | patterns | sizes | theoretical GFLOPS | best % | median % | median % of roofline |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in fin["families"]:
        out.append(
            f"| {r['family']} | {r['patterns']} | {r['sizes']} | {fmt(r['peak'], '.0f')} | "
            f"{fmt(r['best_pct_theoretical'], '.1f')} | {fmt(r['median_pct_theoretical'], '.1f')} | "
            f"{fmt(r['median_pct_roofline'], '.1f')} |"
        )
    weighted = any("weighted_geomean_score" in r for r in fin["libraries"])
    out += [
        "",
        "## Per library",
        "",
        "| library | generations | converged | sizes | kernels | geomean speed-up | "
        + ("workload-weighted | " if weighted else "")
        + "W/T/L | verdict | vs best shipped | W/T/L vs best shipped |",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if weighted else ""),
    ]
    for r in fin["libraries"]:
        lib = libs[r["library"]]
        out.append(
            f"| {r['library']} | {len(lib['generations'])} | "
            f"{'yes' if lib['convergence'].get('converged') else 'no'} | {r['sizes']} | {r['kernels']} | "
            f"{fmt(r['geomean_score'], '.3f', '×')} | "
            + (f"{fmt(r.get('weighted_geomean_score'), '.3f', '×')} | " if weighted else "")
            + f"{_wtl(r)} | {r['verdict']} | "
            f"{fmt(r.get('best_shipped_geomean'), '.3f', '×')} | {_wtl_best(r)} |"
        )
    starved = {
        name: next(g["starved"] for g in lib["generations"] if g.get("starved"))
        for name, lib in libs.items()
        if any(g.get("starved") for g in lib["generations"])
    }
    if starved:  # config budget: the libraries it stopped before max_generations, and why
        out += ["", "## Starved by the time budget", ""]
        out += [f"- {name}: {reason}" for name, reason in sorted(starved.items())]
    if data.get("workload"):
        out += workload_markdown(data["workload"])
    out += _native_markdown(fin.get("native") or [], cov["reference"])
    out += [
        "",
        "## Most left to gain (furthest below their roofline)",
        "",
        "Left to gain: the speed-up a kernel at the size's roofline would still give (roofline ÷ achieved); "
        "the bound says what sets the roofline.",
        "",
        "| library | M, N, batch, K | bound | GFLOPS | roofline GFLOPS | % of roofline | left to gain | "
        "speed-up vs spoof |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in fin["slowest"]:
        out.append(
            f"| {r['library']} | {', '.join(map(str, r['size']))} | {r.get('bound') or '—'} | "
            f"{fmt(r['gflops'], '.3g')} | {fmt(r['ceiling_gflops'], '.3g')} | "
            f"{fmt(r['pct_ceiling'], '.1f')} | {fmt(r.get('headroom'), '.1f', '×')} | "
            f"{fmt(r['score'], '.3f', '×')} |"
        )
    out += ["", "## Failures (all generations and the final measurement, by class)", ""]
    out += [failure_line(k, v, fin.get("failure_stages")) for k, v in fin["failures"].items()] or ["- none"]
    out.append("")
    out += rocblas_markdown(data.get("rocblas"))
    return "\n".join(out)


def _ms(us: float | None) -> str:
    """Microseconds as ms, or as s from a second on (a workload's run can take minutes)."""
    if us is None:
        return "—"
    return f"{us / 1e6:.3g} s" if abs(us) >= 1e6 else f"{us / 1000:.3g} ms"


def workload_markdown(w: Mapping) -> list[str]:
    """The workload's section: the time its calls take per run with the shipped floor and with this run's
    winners, per library and in total, with the 95% interval of the time saved; then every GEMM the run does
    not cover, with why."""
    deck = w["deck"]
    files = ", ".join(f"{f['path']} ({f['format']}, {f['calls']} calls)" for f in deck.get("files", []))
    out = [
        "",
        "## Your workload: expected time saved",
        "",
        f"Workload: {files}. One run of all its calls that the tuned libraries serve, timed as this run "
        "measured each size (the winner's time in the race's median thermal state, the floor's = the "
        "winner's × its score); the interval is each size's 95% interval on its score with the floor's own, "
        "sizes and libraries combined as independent; finalize raced the sizes the workload spends its time "
        "on towards a set precision (benchmark.racing.workload_precision, up to a launch cap).",
        "",
        "| library | calls | with the floor | with the winners | saved | 95% interval | saved % |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in [*w["libraries"], {"library": "**total**", **w["total"]}]:
        lo, hi = r["saved_ci_us"]
        share = r.get("saved_share")
        out.append(
            f"| {r['library']} | {r['calls']} | {_ms(r['time_before_us'])} | {_ms(r['time_after_us'])} | "
            f"{_ms(r['saved_us'])} | {_ms(lo)} … {_ms(hi)} | "
            f"{fmt(None if share is None else 100 * share, '.1f')} |"
        )
    if w.get("other_workload"):
        out.append(
            f"\nNot counted: {', '.join(w['other_workload'])}, finished by an earlier night for another "
            "workload (their figures are in their final.yaml)."
        )
    if w["total"].get("calls_unmeasured"):
        out.append(
            f"\n{w['total']['calls_unmeasured']} calls are at sizes without a measured winner: not counted."
        )
    uncovered = deck.get("uncovered") or []
    out += ["", f"Not covered by this run: {deck.get('calls_uncovered', 0)} calls.", ""]
    out += [f"- {u['where']}: {u['gemm']} ({u['calls']} calls): {u['reason']}" for u in uncovered]
    skipped = {k: v for f in deck.get("files", []) for k, v in (f.get("skipped") or {}).items()}
    if skipped:
        out.append(
            "- other BLAS calls (not GEMMs), skipped: " + ", ".join(f"{k} {v}" for k, v in skipped.items())
        )
    return out


def failure_line(kind: str, count: int, stages: Mapping | None) -> str:
    """``- timeout: 22 (20 while tuning, 2 in the final measurement)``: the dashboard's chart draws both."""
    split = (stages or {}).get(kind)
    if not split:
        return f"- {kind}: {count}"
    return f"- {kind}: {count} ({split['tuning']} while tuning, {split['final']} in the final measurement)"


def headline_markdown(
    overall: Mapping, families: Sequence[Mapping], launch_us: float | None, tolerance: float = 0.0
) -> list[str]:
    """The headline figures over every size, then per family (one family's figures can hide another's),
    against both floors: the spoof (each size's shipped winner) and the best shipped kernel."""
    out = [
        "## Headline figures, overall and per family",
        "",
        "| | libraries | sizes | geomean speed-up vs spoof | wins / ties / losses | "
        "geomean vs best shipped | W/T/L vs best shipped | beats best shipped by ≥5% | "
        "median % of roofline | latency-bound sizes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in [("**all families**", overall), *((f["family"], f) for f in families)]:
        beats = r.get("best_shipped_beats_5pct")
        out.append(
            f"| {name} | {r.get('libraries', '—')} | {r['sizes']} | {fmt(r['geomean_score'], '.3f', '×')} | "
            f"{_wtl(r)} | {fmt(r.get('best_shipped_geomean'), '.3f', '×')} | {_wtl_best(r)} | "
            f"{fmt(None if beats is None else 100 * beats, '.0f', '%')} | "
            f"{fmt(r['median_pct_roofline'], '.1f')} | {r.get('latency_bound', 0)} |"
        )
    return [*out, "", figures.roofline_text(launch_us), "", figures.best_shipped_text(tolerance), ""]


def inline_svg(svg: str) -> str:
    """An SVG document as an element to inline in HTML (no XML declaration or doctype)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


LIB_HEADER = "| library | sizes | passed | not passed | results | kernels taken out |"
CMP_HEADER = (
    "| against | family | sizes (measured) | median speed-up | 95% CI | geomean | p10 | p90 | W / T / L "
    "| regressions |"
)


def rocblas_markdown(section: Mapping | None) -> list[str]:
    """The report's section of rocBLAS's own client: verify and compare (collect.rocblas_clients)."""
    section = section or {}
    ver, cmp = section.get("verify"), section.get("compare")
    if ver is None and cmp is None:
        return []
    out = ["## rocBLAS's own client: verify and compare", ""]
    if ver is not None:
        label = " (simulated)" if ver.get("numbers") == "simulated" else ""
        out += [f"### verify{label}", ""]
        if ver.get("skipped"):
            out += [f"verify was {ver['skipped']}.", ""]
        else:
            env = ver.get("environment") or "no variables"
            out += [
                f"rocblas-bench with verification ({ver.get('client')}; the tuned library installed with "
                f"{env}); numbers {ver.get('numbers')}.",
                "",
                LIB_HEADER,
                "|---|---|---|---|---|---|",
            ]
            for r in ver["libraries"]:
                out.append(
                    f"| {r['library']} | {r['sizes']} | {r['passed']} | {r['failed']} | {r['counts']} | "
                    f"{'; '.join(r['taken_out']) or 'none'} |"
                )
            out.append("")
    if cmp is not None:
        label = " (simulated)" if cmp.get("numbers") == "simulated" else ""
        out += [f"### compare{label}", ""]
        if cmp.get("skipped"):
            out += [f"compare was {cmp['skipped']}.", ""]
        else:
            out += [
                f"The tuned library against each baseline, paired and interleaved through rocblas-bench "
                f"({cmp.get('client')}; {cmp.get('repetitions')} repetitions of every arm at every size), "
                "scored as the races are (drift-normalised median ratio per size; per family the median "
                "over the sizes with its 95% interval).",
                "",
                CMP_HEADER,
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
            for r in cmp["rows"]:
                out.append(
                    f"| {r['against']} | {r['family']} | {r['sizes']} ({r['measured']}) | {r['median']} | "
                    f"{r['ci']} | {r['geomean']} | {r['p10']} | {r['p90']} | {r['wins']} / {r['ties']} / "
                    f"{r['losses']} | {'; '.join(r['regressions']) or 'none'} |"
                )
            out += [*(f"- {n}" for n in cmp.get("notes") or []), ""]
    return out


def render_html(data: Mapping, deck_source: Mapping) -> str:
    # matplotlib is loaded where a chart is drawn, as the dashboard does: parsing the workflow imports every
    # stage module (oto.stages.stages) and should not load it.
    from oto.reporting import plots

    libs = {lib["library"]: lib for lib in data["libraries"]}
    return (
        environment()
        .get_template("acceptance.html.j2")
        .render(
            d=data,
            css=css(),
            refresh_seconds=None,
            libs=libs,
            deck_kind=deck_source.get("kind", "?"),
            roofline_text=figures.roofline_text(data.get("launch_us")),
            best_shipped_text=figures.best_shipped_text(data.get("tie_tolerance") or 0.0),
            charts={
                "wins_ties_losses": inline_svg(plots.wins_ties_losses(data)),
                "progress_score": inline_svg(plots.progress_score(data)),
            },
        )
    )
