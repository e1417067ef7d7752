"""The dashboard's charts: matplotlib, drawn to SVG text in the Carbon data-visualisation style.

Every chart function takes the document from ``oto.reporting.collect.collect`` and returns SVG text; with no
data yet it returns a small placeholder that says so. Text stays text in the SVG (svg.fonttype none), so
the charts are searchable and small.
"""

from __future__ import annotations

import io
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping

import matplotlib

matplotlib.use("Agg")  # no display; the charts are files

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

# Carbon v11 categorical palette (light theme), in Carbon's recommended order.
PALETTE = [
    "#6929c4", "#1192e8", "#005d5d", "#9f1853", "#fa4d56", "#570408", "#198038",
    "#002d9c", "#ee538b", "#b28600", "#009d9a", "#012749", "#8a3800", "#a56eff",
]  # fmt: skip
TEXT, TEXT_2, GRID, LAYER = "#161616", "#525252", "#e0e0e0", "#ffffff"
STATUS = {
    "win": "#24a148",
    "tie": "#8d8d8d",
    "loss": "#da1e28",
    "floor_failed": "#8a3ffc",
    "not_measured": "#f1c21b",
}
PROPOSER_COLOURS = {  # every strategy its own colour, so one proposer looks the same on every page
    "agent": "#6929c4",
    "symbolic": "#1192e8",
    "surrogate": "#9f1853",
    "random": "#fa4d56",
    "topup": "#198038",
    "seed": "#005d5d",
    "shipped": "#b28600",
    "reference": "#c6c6c6",
    "unknown": "#8d8d8d",
}
PATTERNS = ("NN", "NT", "TN", "TT")
APART = (("floor_failed", "spoof failed"), ("not_measured", "not measured"))  # beside wins/ties/losses
# The smallest text in a chart (pt in the SVG = 4/3 px at the chart's own size): pages show charts at their
# own size or larger at 1400 px, so no chart text is below 11 px (tests/browser.py checks it).
MIN_FONT = 8.5
FONT_CHOICES = ("IBM Plex Sans", "Helvetica Neue", "Arial", "Liberation Sans", "DejaVu Sans")


def _font() -> str:
    have = {f.name for f in font_manager.fontManager.ttflist}
    return next((f for f in FONT_CHOICES if f in have), "DejaVu Sans")


def _style() -> dict:
    return {
        "svg.fonttype": "none",
        "svg.hashsalt": "oto",  # stable ids: identical data gives identical files
        "font.family": "sans-serif",
        "font.sans-serif": [_font(), "DejaVu Sans"],
        "font.size": 9.5,  # pt in the SVG: 12.7 px where a chart is shown at its own size
        "axes.edgecolor": GRID,
        "axes.labelcolor": TEXT_2,
        "axes.titlesize": 10.5,
        "axes.titleweight": "regular",
        "axes.titlecolor": TEXT,
        "axes.titlelocation": "left",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": GRID,
        "grid.linewidth": 0.8,
        "xtick.color": TEXT_2,
        "ytick.color": TEXT_2,
        "xtick.major.size": 0,
        "ytick.major.size": 0,
        "legend.frameon": False,
        "legend.fontsize": 9,
        "figure.facecolor": LAYER,
        "axes.facecolor": LAYER,
        "savefig.facecolor": LAYER,
        "lines.linewidth": 1.6,
        "lines.markersize": 4,
    }


def _svg(fig) -> str:
    buf = io.StringIO()
    # Small multiples are laid out by hand (_grid): a tight bounding box would draw them twice.
    tight = None if getattr(fig, "oto_fixed_layout", False) else "tight"
    fig.savefig(buf, format="svg", bbox_inches=tight, pad_inches=0.08, metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def _drawn(draw: Callable) -> Callable:
    def wrapper(data: Mapping) -> str:
        with plt.rc_context(_style()):
            fig = draw(data)
            if fig is None:
                fig = _placeholder()
            return _svg(fig)

    wrapper.__name__ = draw.__name__
    wrapper.__doc__ = draw.__doc__
    return wrapper


def _placeholder(text: str = "waiting for first results") -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6.4, 1.2))
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", color=TEXT_2, fontsize=10, transform=ax.transAxes)
    return fig


def _grid(n: int, cols: int = 4, panel: tuple[float, float] = (2.8, 2.2)):
    """Small multiples at a fixed panel size, so one family is not blown up to the page width."""
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    panel = (max(panel[0], 8.4 / cols), panel[1] * (1.2 if n <= 2 else 1))
    # Fixed margins in inches (constrained layout costs seconds at 13 panels): y labels left, the
    # legend band on top, tick labels and the x label below each row.
    left, right, top, bottom, gap_w, gap_h = 0.8, 0.15, 0.6, 0.55, 0.5, 0.75
    width = left + right + panel[0] * cols
    height = top + bottom + panel[1] * rows
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=gap_w / (panel[0] - gap_w),
        hspace=gap_h / (panel[1] - gap_h),
    )
    fig.oto_fixed_layout = True
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _value_axis(ax, values) -> None:
    """Log scale with 1-2-5 ticks where the values span a decade or more; else linear with about five ticks
    (a log axis over 30..100 GFLOPS would show only two labels)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if finite and max(finite) / min(finite) >= 10:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _pattern_colour(pattern: str) -> str:
    return PALETTE[PATTERNS.index(pattern) if pattern in PATTERNS else 4]


def _by_family(data: Mapping) -> dict[str, list[Mapping]]:
    fams: dict[str, list[Mapping]] = defaultdict(list)
    for lib in data["libraries"]:
        if lib["generations"]:
            fams[lib["family"]].append(lib)
    return dict(sorted(fams.items()))


def _gen_axis(ax, max_gen) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if max_gen:
        ax.set_xlim(-0.3, max_gen - 0.7)


def _legend_above(fig, handles, labels) -> None:
    if handles:
        fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.0, 1.0), ncol=min(len(labels), 7))


def _bottom_row_xlabel(axes, cols: int = 4) -> None:
    n = len(axes)
    for i, ax in enumerate(axes):
        if i + cols >= n:
            ax.set_xlabel("generation")


@_drawn
def progress_gflops(data: Mapping):
    """Per family and pattern: median best GFLOPS over generations, against the theoretical and realistic
    (roofline) ceilings of the same sizes."""
    fams = _by_family(data)
    if not fams:
        return None
    fig, axes = _grid(len(fams))
    handles = {}
    for ax, (fam, libs) in zip(axes, fams.items(), strict=True):
        peak = data["peaks"].get(fam)
        for lib in sorted(libs, key=lambda x: x["pattern"]):
            g = [x["gen"] for x in lib["generations"]]
            colour = _pattern_colour(lib["pattern"])
            (h,) = ax.plot(g, [x.get("median_gflops") for x in lib["generations"]], "-o", color=colour)
            handles[lib["pattern"]] = h
            ax.plot(
                g, [x.get("median_ceiling_gflops") for x in lib["generations"]], ":", color=colour, lw=1.2
            )
        if peak:
            ax.axhline(peak, color=TEXT, ls="--", lw=1)
            ax.annotate(f"theoretical {peak:g}", (0, peak), xycoords=("axes fraction", "data"),
                        xytext=(2, -11), textcoords="offset points", color=TEXT_2,
                        fontsize=MIN_FONT)  # fmt: skip
        _value_axis(ax, [y for line in ax.get_lines() for y in line.get_ydata()])
        ax.set_title(fam)
        _gen_axis(ax, data.get("max_generations"))
    axes[0].set_ylabel("GFLOPS (median over sizes)")
    ceiling = plt.Line2D([], [], color=TEXT_2, ls=":", lw=1.2)
    theory = plt.Line2D([], [], color=TEXT, ls="--", lw=1)
    labels = [*sorted(handles), "realistic ceiling (roofline)", "theoretical ceiling"]
    _legend_above(fig, [handles[k] for k in sorted(handles)] + [ceiling, theory], labels)
    _bottom_row_xlabel(axes)
    return fig


@_drawn
def progress_score(data: Mapping):
    """Per family and pattern: geomean speed-up over the spoof floor (1 = the shipped kernels of the deck)."""
    fams = _by_family(data)
    if not fams:
        return None
    fig, axes = _grid(len(fams))
    handles = {}
    tol = data.get("tie_tolerance") or 0
    for ax, (fam, libs) in zip(axes, fams.items(), strict=True):
        if tol:
            ax.axhspan(1 - tol, 1 + tol, color="#f4f4f4", lw=0)
        ax.axhline(1, color=TEXT_2, lw=1)
        # the baseline says what it is, whether or not a tick label falls on it
        ax.annotate("1.00× spoof", (1, 1), xycoords=("axes fraction", "data"), xytext=(-2, 3),
                    textcoords="offset points", ha="right", va="bottom", color=TEXT_2,
                    fontsize=MIN_FONT)  # fmt: skip
        for lib in sorted(libs, key=lambda x: x["pattern"]):
            g = [x["gen"] for x in lib["generations"]]
            (h,) = ax.plot(g, [x.get("geomean_score") for x in lib["generations"]], "-o",
                           color=_pattern_colour(lib["pattern"]))  # fmt: skip
            handles[lib["pattern"]] = h
            last = lib["generations"][-1]
            if last["converged"]:
                ax.plot([last["gen"]], [last["geomean_score"]], "s", mfc="none", ms=8,
                        color=_pattern_colour(lib["pattern"]))  # fmt: skip
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2f}×"))
        ax.set_title(fam)
        _gen_axis(ax, data.get("max_generations"))
    axes[0].set_ylabel("geomean speed-up vs spoof")
    band = plt.Rectangle((0, 0), 1, 1, color="#e8e8e8")
    conv = plt.Line2D([], [], marker="s", mfc="none", ms=8, color=TEXT_2, ls="none")
    labels = [*sorted(handles), f"tie band ±{tol:.0%}" if tol else "tie band", "converged"]
    _legend_above(fig, [handles[k] for k in sorted(handles)] + [band, conv], labels)
    _bottom_row_xlabel(axes)
    return fig


@_drawn
def wins_ties_losses(data: Mapping):
    """Per library: sizes won, tied and lost against the spoof floor (latest generation or final)."""
    rows = [lib for lib in data["libraries"] if lib["final"] or lib["latest"]]
    if not rows:
        return None
    # one family's patterns together, in pattern order, a gap between families
    rows.sort(key=lambda lib: (lib["family"], PATTERNS.index(lib["pattern"]) if lib["pattern"] in PATTERNS
                               else len(PATTERNS), lib["pattern"]))  # fmt: skip
    counts, y, at = [], [], 0.0
    for i, lib in enumerate(rows):
        if i and lib["family"] != rows[i - 1]["family"]:
            at += 0.6
        v = Counter(r.get("verdict") for r in (lib["final"] or lib["latest"])["per_size"])
        counts.append((f"{lib['family']} {lib['pattern']}", v))
        y.append(-at)
        at += 1
    fig, ax = plt.subplots(figsize=(6.0, 1.0 + 0.28 * at))
    left = [0] * len(counts)
    kinds = [("win", "win"), ("tie", "tie"), ("loss", "loss")]
    # sizes where the spoof's kernel failed (selection.FLOOR_FAILED) and sizes no kernel ran at
    # (selection.NOT_MEASURED), where there are any: the bars then add up to the deck's sizes
    kinds += [(k, label) for k, label in APART if any(v[k] for _, v in counts)]
    for kind, label in kinds:
        vals = [v[kind] for _, v in counts]
        ax.barh(y, vals, left=left, color=STATUS[kind], height=0.62, label=label)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_yticks(y, [c[0] for c in counts])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("sizes")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(kinds))
    return fig


@_drawn
def coverage(data: Mapping):
    """Per family: deck sizes of the shipped libraries (the deck's arch), sizes tuned, sizes with a winner."""
    fams: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for lib in data["libraries"]:
        f = fams[lib["family"]]
        f[0] += lib["deck_sizes"]
        f[1] += len((lib["latest"] or {}).get("per_size") or [])
        f[2] += sum(1 for r in (lib["final"] or {}).get("per_size") or [] if r.get("winner"))
    if not fams or not any(v[0] for v in fams.values()):
        return None
    names = sorted(fams)
    fig, ax = plt.subplots(figsize=(6.0, 1.0 + 0.36 * len(names)))
    y = list(range(len(names)))[::-1]
    deck_of = (data.get("coverage") or {}).get("deck_of") or "gfx900"
    ax.barh(
        y, [fams[n][0] for n in names], color="#d0e2ff", height=0.7, label=f"deck sizes (shipped {deck_of})"
    )
    ax.barh(y, [fams[n][1] for n in names], color="#4589ff", height=0.42, label="tuning sizes measured")
    ax.barh(y, [fams[n][2] for n in names], color="#002d9c", height=0.18, label="final sizes with a winner")
    ax.set_yticks(y, names)
    # Counts span 1 to thousands: a log axis, which has no 0; bars start at 1 (a bar of 0 sizes is absent).
    ax.set_xscale("log")
    ax.set_xlim(left=1, right=max(10.0, 1.5 * max(v[0] for v in fams.values())))
    ax.xaxis.set_major_locator(LogLocator(subs=(1,)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("sizes (log scale)")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2)
    return fig


def series_colours(keys, fixed: Mapping[str, str]) -> dict[str, str]:
    """One colour per series: the fixed colour where a key has one, else the next palette colour no other
    series of the chart uses (so a strategy's name never takes the colour of 'seed')."""
    taken = {fixed[k] for k in keys if k in fixed}
    free = iter([c for c in PALETTE if c not in taken] + PALETTE)
    return {k: fixed[k] if k in fixed else next(free) for k in keys}


FINAL = "final"  # the bar after the generations: the final measurement's own


def _stacked_by_gen(ax, per_gen: Mapping[int | str, Counter], colours: Mapping[str, str]) -> None:
    gens = sorted(g for g in per_gen if g != FINAL)
    keys = sorted({k for c in per_gen.values() for k in c}, key=lambda k: (k not in colours, k))
    colour = series_colours(keys, colours)
    slots = [*gens, *([FINAL] if FINAL in per_gen else [])]
    x = [*gens, *([max(gens, default=-1) + 1] if FINAL in per_gen else [])]
    bottom = [0] * len(slots)
    for k in keys:
        vals = [per_gen[g][k] for g in slots]
        ax.bar(x, vals, bottom=bottom, color=colour[k], width=0.7, label=k)
        bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
    ax.grid(axis="x", visible=False)
    if FINAL in per_gen:
        ax.set_xticks(x, [str(g) for g in gens] + [FINAL])
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")


def _summed_by_gen(data: Mapping, key: str) -> dict[int, Counter]:
    """Per generation, the counts under ``key`` of every library's digest, summed over libraries."""
    per_gen: dict[int, Counter] = defaultdict(Counter)
    for lib in data["libraries"]:
        for g in lib["generations"]:
            per_gen[g["gen"]].update(g.get(key) or {})
    return per_gen


@_drawn
def benchmarks_by_proposer(data: Mapping):
    """Where the search spent its benchmarks: timed launches per generation by who proposed the kernel."""
    per_gen = _summed_by_gen(data, "launches")
    if not any(sum(c.values()) for c in per_gen.values()):
        return None
    fig, ax = plt.subplots(figsize=(6.0, 2.8))
    _stacked_by_gen(ax, per_gen, PROPOSER_COLOURS)
    ax.set_ylabel("timed launches")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=6)
    return fig


@_drawn
def failures_over_time(data: Mapping):
    """Failure classes per generation: the failures each generation added (build, rejection and launch), and
    last those the final measurement added, so the bars sum to the acceptance report's count."""
    per_gen: dict[int | str, Counter] = dict(_summed_by_gen(data, "failures_new"))
    if not per_gen:
        return None
    if any(lib.get("final") for lib in data["libraries"]):
        per_gen[FINAL] = Counter()
        for lib in data["libraries"]:
            per_gen[FINAL].update(lib.get("final_failures_new") or {})
    fig, ax = plt.subplots(figsize=(6.0, 2.8))
    if not any(sum(c.values()) for c in per_gen.values()):
        ax.text(
            0.5, 0.5, "no failures so far", ha="center", va="center", color=TEXT_2, transform=ax.transAxes
        )
        gens = sorted(g for g in per_gen if g != FINAL)
        ax.set_xticks(range(len(per_gen)), [str(g) for g in gens] + ([FINAL] if FINAL in per_gen else []))
        ax.set_yticks([])
        ax.set_xlabel("generation")
        return fig
    _stacked_by_gen(ax, per_gen, {})
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(2, ax.get_ylim()[1]))  # at least three labels (0, 1, 2) when a generation failed once
    ax.set_ylabel("failures")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4)
    return fig


@_drawn
def reference_drift(data: Mapping):
    """Noise over the run: the reference kernels' drift (slowdown against the batch's fastest state), batch
    after batch in the order the generations finished."""
    batches = sorted(
        ((g["finished_ts"], lib["library"], g) for lib in data["libraries"] for g in lib["generations"]
         if (g.get("drift") or {}).get("seq")),
        key=lambda t: (t[0], t[1]),
    )  # fmt: skip
    if not batches:
        return None
    fig, ax = plt.subplots(figsize=(12.5, 2.8))
    x0 = 0.0
    families = sorted({lib["family"] for lib in data["libraries"]})
    colour = {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(families)}
    seen = set()
    # One line per batch (a library's generation), side by side in the order they finished; each batch's
    # drift is relative to its own fastest state, so the lines are not joined.
    for _, _name, g in batches:
        seq, slow = g["drift"]["seq"], g["drift"]["slowdown_pct"]
        fam = next(lib["family"] for lib in data["libraries"] if g in lib["generations"])
        ax.plot([x0 + s - seq[0] for s in seq], slow, color=colour[fam], lw=1.1,
                label=fam if fam not in seen else None)  # fmt: skip
        seen.add(fam)
        x0 += seq[-1] - seq[0] + 1
    ax.set_ylabel("reference slowdown %")
    ax.set_xlabel("timed launches, one line per batch (a library's generation) in the order they finished")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylim(bottom=0)
    ax.grid(axis="x", visible=False)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=8)
    return fig


# name (dashboard/plots/<name>.svg, see oto.reporting.charts) → chart.
CHARTS: dict[str, Callable[[Mapping], str]] = {
    "progress_gflops": progress_gflops,
    "progress_score": progress_score,
    "wins_ties_losses": wins_ties_losses,
    "coverage": coverage,
    "benchmarks_by_proposer": benchmarks_by_proposer,
    "failures": failures_over_time,
    "reference_drift": reference_drift,
}
