"""The merged acceptance report (``oto merge``): ``results/<arch>/acceptance.md`` and its HTML twin, from
the merge document (``fleet/merge.yaml``).

Text that came from other machines or from the maintainer's folder (file names, device names, rejection
reasons that quote a bundle, quarantined fields) is data: control characters spelled as escapes (a raw ESC
never reaches a page or a terminal that shows it), then escaped in Markdown (HTML characters as entities,
Markdown punctuation backslashed, one line) and by Jinja's autoescape in HTML. Nothing from a bundle is
interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from oto.reporting.dashboard import css, environment, fmt
from oto.reporting.figures import reference_phrase, wtl_text

NUMBERS_TEXT = {
    "simulated": "**simulated** on oto's model of the GPU (docs/simulator.md) — no hardware was measured",
    "replayed": "**replayed** from recorded real measurements",
    "measured": "**measured** on the testers' GPUs",
}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def inert(value: Any) -> Any:
    """``value`` (nested) with every control, zero-width or bidirectional character in its strings spelled
    as an escape (``\\x1b``)."""
    if isinstance(value, str):
        return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), value)
    if isinstance(value, Mapping):
        return {inert(k): inert(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [inert(v) for v in value]
    return value


def md(value: Any) -> str:
    """Any value as inert Markdown text: control characters escaped, one line, HTML characters as entities,
    Markdown punctuation escaped."""
    s = " ".join(inert(str(value)).split())
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
                "not_measured": summary.get("not_measured") or 0,
                "floor_failed": summary.get("floor_failed") or 0,
                "verdict": lib.get("verdict") or "not finished on any device",
                "overruled": lib.get("overruled"),
                **agree,
            }
        )
    return out


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table; cells are already formatted (and escaped where they carry outside text)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _wtl(r: Mapping[str, Any]) -> str:
    return wtl_text(r) if r["finished"] else "—"


def _reference(doc: Mapping[str, Any]) -> str:
    """What the merged scores are ratios to (merge.yaml files before floors: the shipped gfx900 solution)."""
    if doc.get("floor"):
        return reference_phrase(doc.get("deck_of") or "gfx900", doc["floor"])
    return f"the shipped {doc.get('deck_of') or 'gfx900'} solution"


def _provenance(doc: Mapping[str, Any]) -> list[str]:
    b = doc["bundles"]
    out = [f"# oto merged acceptance report — {md(doc['arch'])}", "", "## Provenance", ""]
    if doc.get("recovered"):
        out.append(f"- Before this merge: {md(doc['recovered'])}.")
    return out + [
        f"- Numbers are {NUMBERS_TEXT.get(doc['numbers'], md(doc['numbers']))}.",
        *([f"- {doc['model_check']}"] if doc.get("model_check") else []),  # oto's own sentence
        f"- {len(b['accepted'])} bundle(s) accepted from {len(doc['devices'])} device(s); "
        f"{len(b['duplicates'])} duplicate(s) counted once; {len(b['rejected'])} rejected (below, with "
        f"reasons); {len(doc.get('quarantine') or [])} text field(s) quarantined; "
        f"{len(b.get('lost') or [])} kept bundle(s) lost.",
        f"- Backend(s): {md(', '.join(doc.get('backends') or []) or '—')}; Tensile version: "
        f"{md(doc['tensile_version'] or 'none (no Tensile measurement)')}; merged by oto "
        f"{md(doc['oto_version'])} at {md(doc['merged_at'])}.",
        "- Every score, winner and speed-up is recomputed from each bundle's own samples (its finalize races "
        "and tuning generations), as the tuning run computes them; a bundle whose claims its samples "
        "contradict is rejected.",
        f"- Scores are ratios to the reference kernel ({_reference(doc)}) measured on the same "
        "device, so devices of different speed combine: per size, the kernel with the best geometric-mean "
        "score over the devices that measured it wins, and its interval spans every device's interval. A "
        "kernel that any device measured slower than the spoof or a shipped kernel (or saw fail) is "
        "overruled and never ships on another device's word. GFLOPS and % of the ceiling are per device "
        f"(each device's roofline from its device profile). Tie tolerance ±{doc['tie_tolerance']:.0%}.",
        *([f"- {native_text(doc['native_floor'])}"] if doc.get("native_floor") else []),
        "",
    ]


def native_text(native: Mapping[str, Any]) -> str:
    """The native floor's sentence: what it is and what it overrules (``native``: merge.yaml's
    ``native_floor``)."""
    return (
        f"Upstream's own {md(native.get('arch') or '?')} library ({md(native.get('path') or '?')}) raced "
        "beside the candidates: a kernel any device measured slower than its kernel is overruled as well, "
        "and a size its kernel wins says so (kept_by_native in final.yaml)."
    )


def _devices(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Devices", ""]
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
        ],  # fmt: skip
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
    return out


def _libraries(doc: Mapping[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    finished = sum(1 for r in rows if r["finished"])
    out = ["", f"## Per library ({finished} finished of {doc['deck_libraries']} in the deck)", ""]
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
            "overruled",
            "verdict",
        ],  # fmt: skip
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
                r["overruled"] or 0,
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
        ],  # fmt: skip
        [
            [
                md(r["library"]),
                md(d),
                "yes" if v["finished"] else "no",
                v["bundles"],
                v["sizes_with_winner"],
                fmt(v["geomean_score"], ".3f", "×"),
                fmt(v["median_gflops"], ".1f"),
                fmt(v["median_pct_roofline"], ".1f"),
                fmt(v["theoretical_gflops"], ".1f"),
            ]
            for r in rows
            for d, v in sorted(r["per_device"].items())
        ],
    )
    return out


def measured_by(size: Mapping[str, Any]) -> str:
    """Who measured a size's winner: each device's score and interval, from its final race or its tuning,
    and whether its own race picked it."""
    cells = []
    for d, v in sorted((size.get("devices") or {}).items()):
        ci = f" [{fmt(v.get('ci_low'), '.3f')}, {fmt(v.get('ci_high'), '.3f')}]" if v.get("ci_low") else ""
        picked = ", picked it" if v.get("picked_it") else ""
        cells.append(f"{d}: {fmt(v.get('score'), '.3f', '×')}{ci} ({v.get('source')}{picked})")
    return "; ".join(cells) or "—"


def overruled_text(size: Mapping[str, Any]) -> str:
    cells = [
        f"{o['kernel']} on {o['device']}: {fmt(o.get('score'), '.3f', '×')} — {o['why']}"
        for o in size.get("overruled") or []
    ]
    if size.get("kept_by_shipped_kernel"):
        cells.append("every candidate overruled: the shipped kernel keeps the size")
    return "; ".join(cells) or "—"


# A library of more sizes than this lists only those with something to say (who_measured_rows); navi31's
# SGEMM libraries have ~5,000 sizes, and one shard's report listed 11,690 rows. fleet/merge.yaml has them all.
WHO_MEASURED_ALL = 200
PLAIN_VERDICTS = ("win", "tie")


def who_measured_rows(lib: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The sizes "Who measured what" lists for a library, and how many it leaves out: every size up to
    :data:`WHO_MEASURED_ALL`, else those with something to say (a loss, a failed floor, no measurement, a
    candidate overruled, the shipped kernel kept): a plain win or tie is the devices' own pick."""
    sizes = list(lib.get("per_size") or [])
    if len(sizes) <= WHO_MEASURED_ALL:
        return sizes, 0
    shown = [
        s
        for s in sizes
        if s.get("verdict") not in PLAIN_VERDICTS or s.get("overruled") or s.get("kept_by_shipped_kernel")
    ]
    return shown, len(sizes) - len(shown)


def left_out_text(n: int) -> str:
    """What the report says of the sizes :func:`who_measured_rows` leaves out."""
    if not n:
        return ""
    what = "sizes are plain wins or ties" if n != 1 else "size is a plain win or tie"
    return f"{n} other {what}, no candidate overruled: fleet/merge.yaml lists every size"


def _who_measured_what(doc: Mapping[str, Any]) -> list[str]:
    out = ["", "## Who measured what", ""]
    out.append(
        "Per size: the merged winner, each device's recomputed score of it (its interval; from its finalize "
        "race or its tuning; whether its own race picked it), and the candidates overruled."
    )
    for name, lib in sorted(doc["libraries"].items()):
        if not lib.get("finished"):
            continue
        shown, left_out = who_measured_rows(lib)
        out += ["", f"### {md(name)}", ""]
        if left_out:
            out += [f"{left_out_text(left_out)}.", ""]
        out += table(
            ["size", "M, N, B, K", "winner", "merged score", "verdict", "measured by", "overruled"],
            [
                [
                    s["size_index"],
                    md(", ".join(str(x) for x in s["size"])),
                    md(s["winner"] or "—"),
                    fmt(s["score"], ".3f", "×"),
                    md(s["verdict"]),
                    md(measured_by(s)),
                    md(overruled_text(s)),
                ]
                for s in shown
            ],
        )
    return out


def _bundles(doc: Mapping[str, Any]) -> list[str]:
    b = doc["bundles"]
    out = ["", "## Bundles", ""]
    out += table(
        ["file", "device", "shard", "created", "libraries", "finished", "records", "quarantined text"],
        [
            [
                md(a["file"]),
                md(a["device"]),
                md(a["shard"]),
                md(a["created_at"]),
                len(a["libraries"]),
                len(a["finished"]),
                a["records"],
                a.get("quarantined", 0),
            ]  # fmt: skip
            for a in b["accepted"]
        ],
    )
    out += ["", "### Quarantined text (neutralised and merged; shown here as data)", ""]
    out += [
        f"- {md(q['file'])}, {md(q['field'])}: {md(q['problem'])}: {md(q['text'])}"
        for q in doc.get("quarantine") or []
    ] or ["- none"]
    out += ["", "### Duplicates (counted once)", ""]
    out += [f"- {md(x['file'])}: the same bytes as {md(x['same_as'])}" for x in b["duplicates"]] or ["- none"]
    out += ["", "### Rejected (nothing merged from these)", ""]
    out += [f"- {md(x['file'])}: {md(x['reason'])}" for x in b["rejected"]] or ["- none"]
    out += ["", "### Kept bundles restored from their source", ""]
    out += [
        f"- {md(x.get('file'))}: {md(x['why'])}; copied again from {md(x['from'])}"
        for x in b.get("restored") or []
    ] or ["- none"]
    out += ["", "### Lost evidence (kept bundles damaged or missing, their source gone)", ""]
    out += [
        f"- {md(x.get('file'))} ({md(str(x.get('sha256'))[:16])}): {md(x['why'])}"
        for x in b.get("lost") or []
    ] or ["- none"]
    return out


def render_markdown(doc: Mapping[str, Any]) -> str:
    doc = inert(doc)
    rows = _rows(doc)
    out = _provenance(doc) + _devices(doc) + _libraries(doc, rows) + _who_measured_what(doc) + _bundles(doc)
    pkg = doc.get("package") or {}
    what = md(pkg.get("native_dat") or pkg.get("why") or "—")
    if pkg.get("solutions") is not None:
        what += f" ({pkg['solutions']} solutions from {pkg['logic_files']} logic files, labelled "
        what += f"{md(pkg['architecture'])})"
    out += ["", "## Library", "", f"- TensileLibrary.dat: {what}", ""]
    return "\n".join(out)


def render_html(doc: Mapping[str, Any]) -> str:
    doc = inert(doc)
    return (
        environment()
        .get_template("merge.html.j2")
        .render(
            d=doc,
            css=css(),
            refresh_seconds=None,
            rows=_rows(doc),
            numbers_text=NUMBERS_TEXT,
            pct=pct,
            measured_by=measured_by,
            overruled_text=overruled_text,
            native_text=native_text,
            who_measured_rows=who_measured_rows,
            left_out_text=left_out_text,
        )
    )
