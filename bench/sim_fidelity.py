"""How well the simulated GPU agrees with real hardware: recorded GFLOPS of shipped logic files.

    python bench/sim_fidelity.py --logic DIR --profile arch_profiles/X.yaml [--json OUT] [--physics FILE]
        [--rivals fit|held_back]

Every exact row ``[[M, N, batch, K, ...], [solution, GFLOPS]]`` of a shipped Tensile logic file is what the
solution that won that size measured on the real GPU the file was tuned for. The benchmark simulates every
row's winner (and every other solution of its file, for the ranks) on the arch profile and prints, per
family and overall, separately for the rows of the files the physics was fitted on (``fit``: the file names
``oto calibrate`` recorded in the physics file) and for every other file (``held back``: never fitted):

* ``within 25%``: share of rows whose simulated GFLOPS are within 0.75-1.25x the recorded ones;
* ``median ratio`` and its IQR: simulated / recorded GFLOPS;
* ``eff rho``: Spearman rank correlation of the % of peak, simulated vs recorded, on rows of >= 1 GFLOP (the
  size dependence alone would give a high correlation of raw GFLOPS over 13 decades of work);
* ``winner pct``: the shipped winner's rank among its file's solutions that can run the size (their
  AssertElementMultiple hold) under the simulator, as the share of those rivals simulated faster (0 = first);
  median over rows, and the share of rows where it is first and in the top 10%;
* ``winner pct, same-K rivals`` (a diagnostic, not a target): the same median among the rivals that won at
  least one row of the file with the row's K (``RecordedFile.won_at_same_k``). A logic file merges benchmark
  groups and keeps only solutions that won somewhere, so a rival that never won at a K may never have run at
  it; comparing the two figures shows how much of the winner's rank such rivals account for.
* ``winner gap`` (a diagnostic, not a target): the winner's simulated time over the fastest runnable
  solution's at the row (1.00 = the simulator puts the winner first), median over rows, and the share of rows
  where it is within 5% of the fastest: how much a search on the simulator would miss the real winner by, in
  the simulator's own terms. JSON: ``winner_gap_median``, ``winner_within_5pct_share``.

With ``--rivals SPLIT`` (a diagnostic; issue #15's fourth pass, ``fit`` is the split to choose changes on) it
also prints, for that split, how the simulator's fastest runnable rival differs from the shipped winner on
the rows where it puts that rival more than 5% ahead: per family and campaign, among the rows where both are
assembly kernels, the share of rivals with fewer / as many / more resident waves per SIMD than the winner
(and the medians), a larger / smaller macro tile or thread tile, another Tensile generation (a rival that
never ran on the row's board), and each knob that differs; then the winners' own simulated / real time by
resident waves per SIMD (assembly winners, >= 1 GFLOP, K >= 256). JSON: ``rivals``.

GFLOPS use oto's flop count (8 per complex MAC); the recorded complex GFLOPS (Tensile's client counts 2) are
converted through the launch time they imply (``oto.hardware.simulated.calibration.recorded_time_us``).

A folder may hold rows of several measurement campaigns (``calibration.CAMPAIGNS``, told apart by their
winners' Tensile generation, never by GFLOPS), measured on boards that ran the chip at different operating
points. The headline figures simulate each row -- its winner and its rivals -- at the operating point of its
campaign, as the profile declares it (``timing.operating_points.<campaign>``, fitted by ``oto calibrate`` on
the fit split); the **profile-default** figures beside them simulate every row at the profile's own timing
figures. They are the same where the profile declares no operating point for a campaign. Each campaign's
rows are also reported on their own, at the profile's default. JSON: ``splits`` (headline) and
``splits_profile_default``, each ``{fit, held_back}`` -> ``overall`` and ``families``; ``operating_points``
names the point each campaign's rows were simulated at.
Targets (issue #15, held-back vega10 files): >= 75% within 25%, eff rho >= 0.7, winner pct median <= 5%, every
family's median ratio within 0.85-1.15. The numbers are simulated against recorded real measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from oto.hardware.profile import ProfileError, load_profile, profile_argument  # noqa: E402
from oto.hardware.simulated.calibration import (  # noqa: E402
    CAMPAIGNS,
    DEFAULT_POINT,
    RecordedFile,
    all_times,
    campaign_gpu,
    campaign_operating_point,
    chip_split,
    fidelity,
    figures,
    load_recorded,
    read_flop_counts,
    rows_frame,
)
from oto.hardware.simulated.performance import (  # noqa: E402
    MODEL_VERSION,
    PHYSICS_FILE,
    Physics,
    SimGPU,
    geometry,
    physics_file,
    with_defaults,
)

TARGETS = {"within_25pct": 0.75, "efficiency_spearman": 0.7, "winner_rank_percentile_median": 5.0}
FAMILY_MEDIAN = (0.85, 1.15)


def _fmt(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(title: str, fid: dict) -> str:
    lines = [
        f"### {title}",
        "",
        "| family | rows | within 25% | median ratio (IQR) | eff rho (rows >= 1 GFLOP) | winner pct median | "
        "winner first | winner top 10% | winner pct, same-K rivals | winner gap (within 5%) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in [*fid["families"].items(), ("**overall**", fid["overall"])]:
        lines.append(
            f"| {name} | {f['rows']} | {_fmt(f['within_25pct'] * 100, '.1f')}% | "
            f"{_fmt(f['median_ratio'], '.3f')} "
            f"({_fmt(f['ratio_q25'], '.2f')}-{_fmt(f['ratio_q75'], '.2f')}) | "
            f"{_fmt(f['efficiency_spearman'], '.3f')} ({f['efficiency_rows']}) | "
            f"{_fmt(f.get('winner_rank_percentile_median'), '.1f')}% | "
            f"{_fmt(f.get('winner_first_share', math.nan) * 100, '.1f')}% | "
            f"{_fmt(f.get('winner_top10pct_share', math.nan) * 100, '.1f')}% | "
            f"{_fmt(f.get('winner_rank_percentile_same_k_median'), '.1f')}% | "
            f"{_fmt(f.get('winner_gap_median'), '.3f')} "
            f"({_fmt(f.get('winner_within_5pct_share', math.nan) * 100, '.1f')}%) |"
        )
    return "\n".join(lines)


def verdict(fid: dict) -> list[str]:
    """One line per target of issue #15."""
    o = fid["overall"]
    out = [
        f"within 25%: {o['within_25pct'] * 100:.1f}% (target >= 75%): "
        + ("met" if o["within_25pct"] >= TARGETS["within_25pct"] else "NOT met"),
        f"efficiency rank correlation: {o['efficiency_spearman']:.3f} (target >= 0.7): "
        + ("met" if o["efficiency_spearman"] >= TARGETS["efficiency_spearman"] else "NOT met"),
        f"winner's median rank percentile: {o['winner_rank_percentile_median']:.1f}% (target <= 5%): "
        + (
            "met"
            if o["winner_rank_percentile_median"] <= TARGETS["winner_rank_percentile_median"]
            else "NOT met"
        ),
    ]
    lo, hi = FAMILY_MEDIAN
    off = {k: f["median_ratio"] for k, f in fid["families"].items() if not lo <= f["median_ratio"] <= hi}
    out.append(
        "every family's median ratio in 0.85-1.15: "
        + ("met" if not off else "NOT met: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(off.items())))
    )
    return out


RIVAL_AHEAD = 1.05  # --rivals: rows where the simulated fastest rival beats the winner by more than 5%
# knobs --rivals compares, as the simulator reads them (LocalSplitU is WorkGroup[2])
RIVAL_KNOBS = (
    "KernelLanguage",
    "PrefetchGlobalRead",
    "PrefetchLocalRead",
    "DepthU",
    "VectorWidth",
    "GlobalReadVectorWidth",
    "GlobalSplitU",
    "WorkGroupMapping",
    "LocalSplitU",
)
WAVE_BINS = [0, 1, 2, 3, 4, 6, 8, 16]  # resident waves per SIMD


def _shape(f: RecordedFile, s: int) -> dict:
    """A solution's knobs as the simulator reads them, with its macro/thread tile area, waves per workgroup
    and Tensile generation (``RecordedFile.generation``)."""
    p = with_defaults(f.solutions[s])
    g = geometry(f.library.family, p, f.library.pattern)
    knobs = {k: p[k] for k in RIVAL_KNOBS if k in p}
    return {**knobs, "LocalSplitU": g.lsu, "mt": g.mt0 * g.mt1, "tt": g.tt0 * g.tt1, "waves": g.waves,
            "asm": g.asm, "gen": int(f.generation[s])}  # fmt: skip


def _waves_per_simd(
    gpu: SimGPU, f: RecordedFile, rows: np.ndarray, sols: np.ndarray, shapes: dict[int, dict]
) -> np.ndarray:
    """Resident waves per SIMD of solution ``sols[j]`` at row ``rows[j]``, at the row's campaign point
    (``shapes``: each solution's :func:`_shape`)."""
    out = np.empty(len(rows))
    fam, pat = f.library.family, f.library.pattern
    camp = f.campaign[rows]
    for c in np.unique(camp):
        g = campaign_gpu(gpu, int(c))
        for s in np.unique(sols[camp == c]):
            sel = (sols == s) & (camp == c)
            m, n, b, k = f.sizes[rows[sel]].T
            resident = g.breakdown(fam, f.solutions[s], m, n, b, k, pat)["resident"]
            out[sel] = np.broadcast_to(resident, m.shape) * shapes[s]["waves"] / g.arch.unit_simds
    return out


def rival_frame(gpu: SimGPU, files: list[RecordedFile]) -> pd.DataFrame:
    """One row per recorded row: the winner, the simulated fastest runnable rival, how they differ."""
    parts = []
    for f in files:
        t = all_times(gpu, f, at_campaign_points=True)
        rows = np.arange(len(f.winner))
        rival_t = np.where(f.valid(), t, np.inf)
        rival_t[f.winner, rows] = np.inf
        best = rival_t.argmin(axis=0)
        ok = np.isfinite(rival_t[best, rows])  # rows with at least one runnable rival
        rows, best, win = rows[ok], best[ok], f.winner[ok]
        m, n, b, k = f.sizes[rows].T
        shapes = {s: _shape(f, int(s)) for s in np.unique(np.concatenate([win, best]))}
        d = {
            "family": f.family,
            "campaign": [CAMPAIGNS[c] for c in f.campaign[rows]],
            "ahead": t[win, rows] / t[best, rows],
            "ratio": t[win, rows] / f.real_time_us[rows],  # winner's simulated / real time
            "gflop": f.library.family.flops_per_mac * m * n * b * k / 1e9,
            "k": k,
            "w_wps": _waves_per_simd(gpu, f, rows, win, shapes),
            "r_wps": _waves_per_simd(gpu, f, rows, best, shapes),
        }
        for key in (*RIVAL_KNOBS, "mt", "tt", "asm", "gen"):
            d["w_" + key] = [shapes[s][key] for s in win]
            d["r_" + key] = [shapes[s][key] for s in best]
        parts.append(pd.DataFrame(d))
    return pd.concat(parts, ignore_index=True)


def _rival_figures(part: pd.DataFrame) -> dict:
    """How the fastest rival differs from the winner on rows where it is RIVAL_AHEAD ahead."""
    ahead = part[part["ahead"] > RIVAL_AHEAD]
    a = ahead[ahead["w_asm"] & ahead["r_asm"]]  # assembly against assembly: the same kernel writer
    fig = {"rows": len(part), "rival_ahead": len(ahead), "lead_median": float(ahead["ahead"].median()),
           "asm_vs_asm": len(a)}  # fmt: skip
    if len(a):
        fig |= {
            "fewer_waves": float((a["r_wps"] < a["w_wps"]).mean()),
            "same_waves": float((a["r_wps"] == a["w_wps"]).mean()),
            "more_waves": float((a["r_wps"] > a["w_wps"]).mean()),
            "winner_waves_median": float(a["w_wps"].median()),
            "rival_waves_median": float(a["r_wps"].median()),
            "larger_tile": float((a["r_mt"] > a["w_mt"]).mean()),
            "smaller_tile": float((a["r_mt"] < a["w_mt"]).mean()),
            "larger_thread_tile": float((a["r_tt"] > a["w_tt"]).mean()),
            "other_generation": float((a["r_gen"] != a["w_gen"]).mean()),
            "knob_differs": {k: float((a["r_" + k] != a["w_" + k]).mean()) for k in RIVAL_KNOBS},
        }
    return fig


def _pct(fig: dict, key: str) -> str:
    return _fmt(fig.get(key, math.nan) * 100, ".0f") + "%"


def rival_report(df: pd.DataFrame) -> tuple[list[str], dict]:
    """The --rivals tables (markdown lines) and their figures."""
    lines = [
        f"| family | campaign | rows | rival > {RIVAL_AHEAD:.2f}x ahead | its median lead | asm vs asm | "
        "rival fewer / same / more waves per SIMD | median waves per SIMD (winner, rival) | "
        "larger / smaller macro tile | larger thread tile | other Tensile generation | knobs that differ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    out: dict = {"families": {}, "winner_ratio_by_waves": {}}
    for (fam, camp), part in df.groupby(["family", "campaign"]):
        fig = out["families"][f"{fam} {camp}"] = _rival_figures(part)
        if not fig["rival_ahead"]:
            continue
        differ = sorted(fig.get("knob_differs", {}).items(), key=lambda kv: -kv[1])
        knobs = ", ".join(f"{k} {v * 100:.0f}%" for k, v in differ if v >= 0.1) or "-"
        waves = f"{_fmt(fig.get('winner_waves_median'), '.2f')}, {_fmt(fig.get('rival_waves_median'), '.2f')}"
        lines.append(
            f"| {fam} | {camp} | {len(part)} | {fig['rival_ahead'] / len(part) * 100:.0f}% | "
            f"{fig['lead_median']:.3f} | {fig['asm_vs_asm']} | {_pct(fig, 'fewer_waves')} / "
            f"{_pct(fig, 'same_waves')} / {_pct(fig, 'more_waves')} | {waves} | {_pct(fig, 'larger_tile')} / "
            f"{_pct(fig, 'smaller_tile')} | {_pct(fig, 'larger_thread_tile')} | "
            f"{_pct(fig, 'other_generation')} | {knobs} |"
        )
    big = df[df["w_asm"] & (df["gflop"] >= 1) & (df["k"] >= 256)]
    bins = pd.cut(big["w_wps"], WAVE_BINS)
    heads = [f"({lo}, {hi}]" for lo, hi in zip(WAVE_BINS, WAVE_BINS[1:], strict=False)]
    lines += [
        "",
        "winners' simulated / real time by resident waves per SIMD (assembly winners, >= 1 GFLOP, K >= 256): "
        "median (rows)",
        "",
        "| campaign | " + " | ".join(heads) + " |",
        "|---|" + "---|" * len(heads),
    ]
    for camp, part in big.groupby("campaign"):
        by = part.groupby(bins[part.index], observed=False)["ratio"]
        med, cnt = by.median(), by.size()
        out["winner_ratio_by_waves"][camp] = {str(iv): [float(med[iv]), int(cnt[iv])] for iv in med.index}
        cells = " | ".join(f"{_fmt(med[iv], '.2f')} ({cnt[iv]})" for iv in med.index)
        lines.append(f"| {camp} | {cells} |")
    return lines, out


def observation_table(profile: dict, args: argparse.Namespace) -> int:
    """Model against the recorded observations of a real device of the profile's arch."""
    from oto.hardware.simulated.checks import observations
    from oto.hardware.simulated.predict import nearest_row, predict
    from oto.tensile import legality
    from spoof_headroom import grid

    gpu = SimGPU(profile, physics=Physics.load(args.physics))
    files = {f.library.name: f for f in load_recorded(args.logic)}
    limits = legality.Limits.from_profile(profile)
    rows = []
    print(f"observations of a real {profile['arch']} against the model ({args.profile}, {MODEL_VERSION}); "
          "spoof: the --logic file's winner of the nearest row; best: the fastest of the spoof and "
          "bench/spoof_headroom.py's grid\n")  # fmt: skip
    print("| observation | observed | model | model / observed | within ±25% | model's bound |")
    print("|---|---|---|---|---|---|")
    for o in observations(profile["arch"]):
        f, size = files[o["library"]], o["size"]
        spoof = f.solutions_as_built()[f.winner[nearest_row(f.sizes, size)]]
        kernels = [spoof, *(grid(f.library, gpu, limits) if o["kernel"] == "best" else [])]
        pick = min((predict(gpu, f.library, p, size, o["kernel"]) for p in kernels), key=lambda p: p.time_us)
        key, unit = ("gflops", " GFLOPS") if "gflops" in o else ("pct_peak", "% of peak")
        model = pick.gflops if key == "gflops" else pick.pct_peak
        ok = abs(model / o[key] - 1) <= 0.25
        rows.append({**o, "model": model, "ratio": model / o[key], "within_25pct": ok, "bound": pick.bound})
        print(f"| {o['name']} | {o[key]:.1f}{unit} | {model:.1f}{unit} | {model / o[key]:.2f} | "
              f"{'yes' if ok else 'no'} | {pick.bound} |")  # fmt: skip
    within = sum(r["within_25pct"] for r in rows)
    print(f"\n{within} of {len(rows)} observations within ±25%")
    if args.json:
        doc = {
            "model_version": MODEL_VERSION,
            "profile": args.profile,
            "observations": rows,
            "within": within,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logic", required=True, help="folder of shipped logic files")
    ap.add_argument(
        "--profile",
        required=True,
        help="arch profile (a file or an arch name) of the GPU that measured the files",
    )
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument(
        "--physics",
        default=None,
        help=f"physics constants (default: the shipped fit of the profile's ISA family: {PHYSICS_FILE.name}, "
        "or physics-rdna.json for RDNA)",
    )
    ap.add_argument(
        "--observations",
        action="store_true",
        help="instead of the logic files' rows: the recorded observations of a real device of the profile's "
        "arch (hardware/simulated/model_checks.json) against the model, the spoof taken from --logic and "
        "the best from bench/spoof_headroom.py's grid (oto.hardware.simulated.predict, as oto predict)",
    )
    ap.add_argument(
        "--splits",
        choices=("fit", "held_back", "both"),
        default="both",
        help="which files to simulate: the fit ones, the held-back ones or both (default; choose changes on "
        "'fit' only, and run the held-back files once, when the protocol says so)",
    )
    ap.add_argument(
        "--before",
        default=None,
        help="a second profile (e.g. the chip's assumed constants before a calibration): its overall figures "
        "on the same rows, beside the profile's (a before/after table)",
    )
    ap.add_argument(
        "--chip-split",
        action="store_true",
        help="split the files as a chip-constant fit does (calibration.chip_split), whatever the profile's "
        "calibration names: the fit half of a chip not yet calibrated",
    )
    ap.add_argument(
        "--rivals",
        choices=("fit", "held_back"),
        default=None,
        help="diagnostic: how the simulated fastest rival differs from the winner on this split's rows "
        "(choose changes on 'fit' only)",
    )
    args = ap.parse_args(argv)

    t0 = time.time()
    try:
        profile = load_profile(profile_argument(args.profile))
    except ProfileError as exc:
        ap.error(str(exc))
    args.physics = str(args.physics or physics_file(profile))
    if args.observations:
        return observation_table(profile, args)
    doc = json.loads(Path(args.physics).read_text())
    physics = Physics.load(args.physics)
    fitted = set(doc.get("fitted_on", {}).get("fit_files", []))
    fitted_logic = doc.get("fitted_on", {}).get("logic")
    files = load_recorded(args.logic)
    old_client = read_flop_counts(files, profile)  # files whose GFLOPS the older Tensile client counted
    gpu = SimGPU(profile, physics=physics)
    if Path(args.logic).resolve().name != fitted_logic:
        fitted = set()  # a file is "fit" for the physics only in the folder the physics was fitted on
    calibration = profile.get("calibration") or {}
    chip_fitted = (
        {i["name"] for i in calibration.get("inputs", [])} if calibration.get("source") == "logic" else set()
    )
    fitted |= chip_fitted  # ... and for the chip constants if the profile's calibration names it
    if args.chip_split:  # before a chip calibration: the halves its protocol will fit and hold back
        fitted = {f.name for f in chip_split(files)[0]}
    split_of = {f.name: "fit" if f.name in fitted else "held_back" for f in files}
    if args.splits != "both":
        files = [f for f in files if split_of[f.name] == args.splits]
    df = rows_frame(gpu, files)
    df["split"] = [split_of[name] for name in df["file"]]
    # The operating point each campaign's rows are simulated at (absent from the profile: its default).
    points = {
        c: (name if name in gpu.operating_points else "default")
        for c, name in (
            (c, campaign_operating_point(i, gpu.operating_points)) for i, c in enumerate(CAMPAIGNS)
        )
    }
    out = {
        "model_version": MODEL_VERSION,
        "profile": args.profile,
        "logic": str(args.logic),
        "physics": args.physics,
        "numbers": "simulated, compared with recorded real GFLOPS",
        "operating_points": {c: points[c] for c in sorted(set(df["campaign"]))},
        "old_client_files": old_client,
        "chip_calibration": calibration.get("id"),
        "splits": {},
        "splits_profile_default": {},
        "by_campaign": {},
    }
    print(f"sim fidelity: {len(files)} files, {len(df)} rows, {args.profile}, model {MODEL_VERSION}")
    if old_client:
        print(f"read with the older Tensile client's flop count (8 per complex MAC): {', '.join(old_client)}")
    out["efficiency_files"] = [f.name for f in files if f.efficiency_percent]
    if out["efficiency_files"]:
        names = ", ".join(out["efficiency_files"])
        print(f"files of efficiency figures, read at the datasheet peak: {names}")
    print("rows per campaign (simulated at operating point): " + ", ".join(
        f"{c} {n} ({points[c]})" for c, n in df["campaign"].value_counts().items()
    ))  # fmt: skip
    shifted = any(points[c] != "default" for c in out["operating_points"])
    views = [("", "splits", "at each campaign's operating point")]
    if shifted:
        views.append((DEFAULT_POINT, "splits_profile_default", "profile default only"))
    else:
        views[0] = ("", "splits", "profile default (no campaign operating point applies)")
    for suffix, key, label in views:
        for split in ("fit", "held_back"):
            part = df[df["split"] == split]
            if part.empty:
                continue
            fid = fidelity(part, suffix)
            fid["files"] = sorted(set(part["file"]))
            out[key][split] = fid
            print()
            print(table(f"{label}, {split.replace('_', ' ')}: {len(fid['files'])} files", fid))
        if "held_back" in out[key]:
            print()
            for line in verdict(out[key]["held_back"]):
                print(f"- {label}, held back: {line}")
    if not shifted:
        out["splits_profile_default"] = out["splits"]
    # Each campaign's rows on their own, at the profile's default operating point.
    print()
    print("profile default, per campaign:")
    print("| split | campaign | rows | within 25% | median ratio (IQR) | eff rho | winner pct median |")
    print("|---|---|---|---|---|---|---|")
    for split in ("fit", "held_back"):
        for campaign, part in sorted(df[df["split"] == split].groupby("campaign"), key=lambda x: x[0]):
            f = figures(part, DEFAULT_POINT)
            out["by_campaign"].setdefault(split, {})[campaign] = f
            iqr = f"{_fmt(f['ratio_q25'], '.2f')}-{_fmt(f['ratio_q75'], '.2f')}"
            print(
                f"| {split} | {campaign} | {f['rows']} | {f['within_25pct'] * 100:.1f}% | "
                f"{_fmt(f['median_ratio'], '.3f')} ({iqr}) | {_fmt(f['efficiency_spearman'], '.3f')} | "
                f"{_fmt(f.get('winner_rank_percentile_median'), '.1f')}% |"
            )
    if args.rivals:
        split_of = dict(zip(df["file"], df["split"], strict=True))
        mine = [f for f in files if split_of.get(f.name) == args.rivals]
        if mine:
            lines, out["rivals"] = rival_report(rival_frame(gpu, mine))
            out["rivals"]["split"] = args.rivals
            split_name = args.rivals.replace("_", " ")
            print(f"\nrivals simulated ahead of the winner, {split_name}: {len(mine)} files\n")
            print("\n".join(lines))
    if args.before:
        before = SimGPU(load_profile(args.before), physics=physics)
        bdf = rows_frame(before, files)
        bdf["split"] = [split_of[name] for name in bdf["file"]]
        out["before"] = {"profile": args.before, "splits": {}}
        print(f"\nbefore ({args.before}) and after ({args.profile}), each row at its campaign's point:")
        print("| split | profile | rows | within 25% | median ratio (IQR) | eff rho | winner pct median |")
        print("|---|---|---|---|---|---|---|")
        for split in ("fit", "held_back"):
            for label, frame in (("before", bdf), ("after", df)):
                part = frame[frame["split"] == split]
                if part.empty:
                    continue
                fid = fidelity(part)
                if label == "before":
                    out["before"]["splits"][split] = fid
                o = fid["overall"]
                iqr = f"{_fmt(o['ratio_q25'], '.2f')}-{_fmt(o['ratio_q75'], '.2f')}"
                print(
                    f"| {split} | {label} | {o['rows']} | {o['within_25pct'] * 100:.1f}% | "
                    f"{_fmt(o['median_ratio'], '.3f')} ({iqr}) | {_fmt(o['efficiency_spearman'], '.3f')} | "
                    f"{_fmt(o.get('winner_rank_percentile_median'), '.1f')}% |"
                )
    out["all"] = fidelity(df)
    out["all_profile_default"] = fidelity(df, DEFAULT_POINT)
    out["wall_s"] = round(time.time() - t0, 1)
    print(f"\n{out['wall_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
