"""The merged acceptance report (``oto merge``): ``results/<arch>/acceptance.md`` and its HTML twin, from
the merge document (``fleet/merge.yaml``).

Text that came from other machines or from the maintainer's folder (file names, device names, rejection
reasons that quote a bundle) is data: escaped in Markdown (HTML characters as entities, Markdown
punctuation backslashed, one line) and by Jinja's autoescape in HTML. Nothing from a bundle is interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from oto.reporting.dashboard import css, environment, fmt

NUMBERS_TEXT = {
    "simulated": "**simulated** on oto's model of the GPU (docs/simulator.md) — no hardware was measured",
    "replayed": "**replayed** from recorded real measurements",
    "measured": "**measured** on the testers' GPUs",
}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def md(value: Any) -> str:
    """Any value as inert Markdown text: one line, HTML characters as entities, Markdown punctuation
    escaped."""
    s = " ".join(str(value).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def pct(x: Any) -> str:
    return fmt(None if x is None else 100 * float(x), ".1f", "%")


def _rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, lib in sorted(doc["libraries"].items()):
        agree = {
            k: lib.get(k)
            for k in (
                "replicated",
                "median_difference",
                "p90_difference",
                "intervals_overlap",
                "same_winner",
                "sizes_compared",
            )
        }
        summary = lib.get("summary") or {}
        out.append(
            {
                "library": name,
                "finished": lib.get("finished"),
                "devices": sorted(lib.get("devices") or {}),
                "per_device": lib.get("devices") or {},
                "sizes": lib.get("sizes"),
                "sizes_with_winner": lib.get("sizes_with_winner"),
                "geomean_score": summary.get("geomean_score"),
                "wins": summary.get("wins"),
                "ties": summary.get("ties"),
                "losses": summary.get("losses"),
                "verdict": lib.get("verdict") or "not finished on any device",
                **agree,
            }
        )
    return out


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table; cells are already formatted (and escaped where they carry outside text)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _wtl(r: Mapping[str, Any]) -> str:
    return f"{r['wins']}/{r['ties']}/{r['losses']}" if r["finished"] else "—"


def render_markdown(doc: Mapping[str, Any]) -> str:
    b = doc["bundles"]
    rows = _rows(doc)
    finished = sum(1 for r in rows if r["finished"])
    out = [f"# oto merged acceptance report — {md(doc['arch'])}", "", "## Provenance", ""]
    out += [
        f"- Numbers are {NUMBERS_TEXT.get(doc['numbers'], md(doc['numbers']))}.",
        f"- {len(b['accepted'])} bundle(s) accepted from {len(doc['devices'])} device(s); "
        f"{len(b['duplicates'])} duplicate(s) counted once; {len(b['rejected'])} rejected (below, with "
        "reasons).",
        f"- Backend(s): {md(', '.join(doc.get('backends') or []) or '—')}; Tensile version: "
        f"{md(doc['tensile_version'] or 'none (no Tensile measurement)')}; merged by oto "
        f"{md(doc['oto_version'])} at {md(doc['merged_at'])}.",
        "- Scores are ratios to the reference kernel (the shipped gfx900 solution) measured on the same "
        "device, so devices of different speed combine: per size, the kernel with the best geometric-mean "
        "score over the devices that measured it wins, and its interval spans every device's interval. "
        "GFLOPS and % of the ceiling are per device (each device's roofline from its device profile). "
        f"Tie tolerance ±{doc['tie_tolerance']:.0%}.",
        "",
        "## Devices",
        "",
    ]
    out += table(
        [
            "device",
            "CPU",
            "CUs",
            "clock MHz",
            "memory",
            "GB/s",
            "FP32 ceiling GFLOPS",
            "kernel",
            "ROCm",
            "Tensile",
            "bundles",
            "shards",
        ],
        [
            [
                md(d),
                md(r["cpu"] or r["gpu_name"] or "?"),
                r["compute_units"],
                r["clock_mhz"],
                md(r["memory"]),
                fmt(r["peak_bandwidth_gbs"], ".1f"),
                fmt(r["fp32_ceiling_gflops"], ".0f"),
                md(r["kernel"] or "?"),
                md(r["rocm"] or "?"),
                md(r["tensile"] or "—"),
                r["bundles"],
                md(", ".join(r["shards"])),
            ]
            for d, r in sorted(doc["devices"].items())
        ],
    )
    out += ["", "## Shards", ""]
    for n, s in doc["shards"].items():
        got = ", ".join(f"{i}/{n} ({len(devs)} device(s))" for i, devs in s["received"].items())
        missing = ", ".join(f"{i}/{n}" for i in s["missing"]) or "none"
        replicated = ", ".join(f"{i}/{n}" for i in s["replicated"]) or "none"
        out.append(f"- {n} shards: received {md(got)}; missing {md(missing)}; replicated: {md(replicated)}.")
    if not doc["shards"]:
        out.append("- no bundle accepted yet")
    out += ["", f"## Per library ({finished} finished of {doc['deck_libraries']} in the deck)", ""]
    out += table(
        [
            "library",
            "devices",
            "sizes with a winner",
            "geomean speed-up",
            "W/T/L",
            "replicated (kernel, size)",
            "median / p90 score difference",
            "intervals overlap",
            "same winner",
            "verdict",
        ],
        [
            [
                md(r["library"]),
                len(r["devices"]),
                f"{r['sizes_with_winner']}/{r['sizes']}" if r["finished"] else "—",
                fmt(r["geomean_score"], ".3f", "×"),
                _wtl(r),
                r["replicated"] or 0,
                f"{pct(r['median_difference'])} / {pct(r['p90_difference'])}",
                pct(r["intervals_overlap"]),
                pct(r["same_winner"]) + (f" of {r['sizes_compared']}" if r["sizes_compared"] else ""),
                md(r["verdict"]),
            ]
            for r in rows
        ],
    )
    out += ["", "## Per library and device (GFLOPS and % of that device's ceiling)", ""]
    out += table(
        [
            "library",
            "device",
            "finished",
            "bundles",
            "sizes with a winner",
            "geomean speed-up on this device",
            "median GFLOPS",
            "median % of roofline",
            "theoretical GFLOPS",
        ],
        [
            [
                md(r["library"]),
                md(d),
                "yes" if v["finished"] else "no",
                v["bundles"],
                v["sizes_with_winner"],
                fmt(v["geomean_score"], ".3f", "×"),
                fmt(v["median_gflops"], ".1f"),
                fmt(v["median_pct_ceiling"], ".1f"),
                fmt(v["theoretical_gflops"], ".1f"),
            ]
            for r in rows
            for d, v in sorted(r["per_device"].items())
        ],
    )
    out += ["", "## Bundles", ""]
    out += table(
        ["file", "device", "shard", "created", "libraries", "finished", "records"],
        [
            [
                md(a["file"]),
                md(a["device"]),
                md(a["shard"]),
                md(a["created_at"]),
                len(a["libraries"]),
                len(a["finished"]),
                a["records"],
            ]
            for a in b["accepted"]
        ],
    )
    out += ["", "### Duplicates (counted once)", ""]
    out += [f"- {md(x['file'])}: the same bytes as {md(x['same_as'])}" for x in b["duplicates"]] or ["- none"]
    out += ["", "### Rejected (nothing merged from these)", ""]
    out += [f"- {md(x['file'])}: {md(x['reason'])}" for x in b["rejected"]] or ["- none"]
    pkg = doc.get("package") or {}
    what = md(pkg.get("native_dat") or pkg.get("why") or "—")
    if pkg.get("solutions") is not None:
        what += f" ({pkg['solutions']} solutions from {pkg['logic_files']} logic files, labelled "
        what += f"{md(pkg['architecture'])})"
    out += ["", "## Library", "", f"- TensileLibrary.dat: {what}", ""]
    return "\n".join(out)


def render_html(doc: Mapping[str, Any]) -> str:
    return (
        environment()
        .get_template("merge.html.j2")
        .render(d=doc, css=css(), refresh_seconds=None, rows=_rows(doc), numbers_text=NUMBERS_TEXT, pct=pct)
    )
