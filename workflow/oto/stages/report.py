"""report: the acceptance report (results/<arch>/acceptance.md) from the final files, nothing recomputed
differently: every figure is read from final.yaml, ceilings.yaml and deck.yaml."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oto.files import atomic_write_text, read_yaml

log = logging.getLogger(__name__)
NUMBERS_TEXT = {
    "simulated": "**simulated** on oto's model of the GPU (docs/simulator.md) — no hardware was measured",
    "replayed": "**replayed** from recorded real measurements",
    "measured": "**measured** on the GPU",
}


def library_verdict(summary: Mapping[str, Any], tolerance: float) -> str:
    g = summary.get("geomean_score") or 0.0
    if summary["losses"] == 0 and g >= 1 + tolerance:
        return "better than the spoof"
    if summary["losses"] == 0:
        return "at parity with the spoof"
    if g >= 1:
        return "mixed: faster overall, slower at some sizes"
    return "slower than the spoof"


def family_rows(finals: Sequence[Mapping], peaks: Mapping[str, float]) -> list[dict[str, Any]]:
    by_family: dict[str, list[Mapping]] = defaultdict(list)
    for f in finals:
        by_family[f["family"]].append(f)
    rows = []
    for fam, libs in sorted(by_family.items()):
        per = [r for f in libs for r in f["per_size"] if r.get("gflops")]
        peak = peaks[fam]
        pct_theory = np.array([100 * r["gflops"] / peak for r in per]) if per else np.array([np.nan])
        pct_roof = np.array([r["pct_ceiling"] for r in per if r.get("pct_ceiling") is not None] or [np.nan])
        scores = np.array([r["score"] for r in per if r.get("score")] or [np.nan])
        v = Counter(r["verdict"] for f in libs for r in f["per_size"])
        rows.append(
            {
                "family": fam,
                "patterns": ", ".join(sorted(f["pattern"] for f in libs)),
                "sizes": sum(len(f["per_size"]) for f in libs),
                "peak": peak,
                "best_pct_theoretical": float(np.nanmax(pct_theory)),
                "median_pct_theoretical": float(np.nanmedian(pct_theory)),
                "median_pct_roofline": float(np.nanmedian(pct_roof)),
                "geomean_speedup": float(np.exp(np.nanmean(np.log(scores)))),
                "wins": v["win"],
                "ties": v["tie"],
                "losses": v["loss"],
            }
        )
    return rows


def render(finals: Sequence[Mapping], ceilings: Mapping, deck: Mapping, config: Mapping) -> str:
    tol = float(config["benchmark"]["tie_tolerance"])
    prov = finals[0]["provenance"] if finals else {}
    numbers = sorted({f["provenance"].get("numbers", "unknown") for f in finals})
    peaks = {fam: v["theoretical_gflops"] for fam, v in ceilings["families"].items()}
    fams = family_rows(finals, peaks)
    deck_prov = deck.get("provenance", {})
    tuned_sizes = sum(len(f["per_size"]) for f in finals)
    covered = sum(1 for f in finals for r in f["per_size"] if r.get("winner"))
    kernels = sum(len(f["kernels"]) for f in finals)
    shipped = sum(int(f["shipped_kernels"]) for f in finals)
    failures: Counter = Counter()
    for f in finals:
        failures.update(f["summary"]["failures"])

    out = [f"# oto acceptance report — {ceilings['arch']}", ""]
    out += ["## Provenance", ""]
    for n in numbers:
        out.append(f"- Numbers are {NUMBERS_TEXT.get(n, n)}.")
    out += [
        f"- Backend: `{prov.get('backend', '?')}`; seed {config['seed']}; "
        f"deck: {deck_prov.get('deck_source', {}).get('kind', '?')} of the shipped "
        f"{deck_prov.get('deck_of', 'gfx900')} library.",
        "- Scores are drift-normalised ratios to the spoof floor (the shipped gfx900 solution for each "
        f"size, run as under HSA_OVERRIDE_GFX_VERSION=9.0.0); tie tolerance ±{tol:.0%}.",
        "",
        "## Coverage of the deck",
        "",
        f"- Libraries tuned: {len(finals)} of {deck_prov.get('libraries_in_source', len(finals))} in the "
        "shipped library.",
        f"- Sizes with a measured winner: {covered} of {tuned_sizes} deck sizes of the tuned libraries.",
        f"- Kernels in the tuned libraries: {kernels} (the shipped gfx900 footprint for the same sizes: "
        f"{shipped}).",
        "",
        "## Per family: % of the theoretical ceiling and wins / ties / losses against the spoof",
        "",
        "| family | patterns | sizes | theoretical GFLOPS | best % | median % | median % of roofline | "
        "geomean speed-up | wins | ties | losses |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in fams:
        out.append(
            f"| {r['family']} | {r['patterns']} | {r['sizes']} | {r['peak']:.0f} | "
            f"{r['best_pct_theoretical']:.1f} | {r['median_pct_theoretical']:.1f} | "
            f"{r['median_pct_roofline']:.1f} | {r['geomean_speedup']:.3f}× | {r['wins']} | {r['ties']} | "
            f"{r['losses']} |"
        )
    out += [
        "",
        "## Per library",
        "",
        "| library | generations | converged | sizes | kernels | geomean speed-up | W/T/L | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in finals:
        s = f["summary"]
        out.append(
            f"| {f['library']} | {f['generations']} | {'yes' if f['converged'] else 'no'} | "
            f"{len(f['per_size'])} | {len(f['kernels'])} | {(s['geomean_score'] or float('nan')):.3f}× | "
            f"{s['wins']}/{s['ties']}/{s['losses']} | {library_verdict(s, tol)} |"
        )
    slow = sorted(
        (
            (r["pct_ceiling"], f["library"], f["sizes"][r["size_index"]], r)
            for f in finals
            for r in f["per_size"]
            if r.get("pct_ceiling") is not None
        ),
        key=lambda t: t[0],
    )[:10]
    out += [
        "",
        "## Slowest sizes (lowest % of their roofline ceiling)",
        "",
        "| library | M, N, batch, K | GFLOPS | roofline GFLOPS | % | speed-up vs spoof |",
        "|---|---|---|---|---|---|",
    ]
    for pct, lib, size, r in slow:
        out.append(
            f"| {lib} | {', '.join(map(str, size[:4]))} | {r['gflops']:.2f} | {r['ceiling_gflops']:.2f} | "
            f"{pct:.1f} | {(r['score'] or float('nan')):.3f}× |"
        )
    out += ["", "## Failures (all generations, by class)", ""]
    out += [f"- {k}: {v}" for k, v in sorted(failures.items())] or ["- none"]
    out.append("")
    return "\n".join(out)


def run(
    final_paths: Sequence[Path],
    ceilings_path: Path,
    deck_path: Path,
    profile: Mapping,
    config: Mapping,
    out: Path,
) -> str:
    finals = [read_yaml(p) for p in final_paths]
    text = render(finals, read_yaml(ceilings_path), read_yaml(deck_path), config)
    atomic_write_text(out, text)
    log.info("acceptance report for %d libraries", len(finals))
    return text
