"""The few lines a run ends with: what it built, where the library, the report and the dashboard are, the
headline figures and whether they are simulated, replayed or measured.

Read from the files under ``results/<arch>/`` (the dashboard's ``data.json``: the final page's when the run
finished, else the live page's), so the terminal says what the pages say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

NUMBERS = {
    "simulated": "SIMULATED numbers: oto's model of the GPU (docs/simulator.md), no hardware was measured",
    "replayed": "REPLAYED numbers: recorded real measurements",
    "measured": "MEASURED numbers: timed on the GPU",
}


def _data(results: Path) -> dict[str, Any] | None:
    for page in ("dashboard", "live"):
        try:
            doc = json.loads((results / page / "data.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            return doc
    return None


def _headline(doc: Mapping[str, Any]) -> str | None:
    finished = doc.get("state") == "finished"
    table = (doc.get("final") if finished else doc.get("current")) or {}
    o = table.get("overall") or {}
    if not o.get("sizes"):
        return None
    scope = "deck sizes (final)" if finished else "tuning sizes (latest generation)"
    libs = len(table.get("libraries") or [])
    g, pct = o.get("geomean_score"), o.get("median_pct_roofline")
    parts = [
        f"{libs} libraries, {o['sizes']} {scope}",
        f"geomean {g:.2f}× the gfx900 spoof" if isinstance(g, int | float) else None,
        f"{o.get('wins', 0)} wins / {o.get('ties', 0)} ties / {o.get('losses', 0)} losses",
        f"median {pct:.1f}% of the roofline" if isinstance(pct, int | float) else None,
    ]
    return ", ".join(p for p in parts if p)


def results_folders(outputs: Sequence[str]) -> list[Path]:
    """The ``results/<arch>`` folders the run's job outputs lie in."""
    found = []
    for out in outputs:
        parts = Path(out).parts
        if "results" in parts:
            i = parts.index("results")
            if len(parts) > i + 1:
                folder = Path(*parts[: i + 2])
                if folder not in found:
                    found.append(folder)
    return found


def run_summary(
    results: Path | None, jobs: int, elapsed: str, failed: Sequence[str] = (), log: str | None = None
) -> list[str]:
    """The closing lines for one results folder (None: the run wrote none)."""
    lines = []
    if failed:
        lines.append(
            f"oto: {len(failed)} job(s) failed ({', '.join(failed[:5])}{', …' if len(failed) > 5 else ''}); "
            f"{jobs} finished in {elapsed}. Fix the cause (the failed job's log is printed above) and run "
            "the same command again: every finished job is kept."
        )
    else:
        lines.append(f"oto: {jobs} jobs finished in {elapsed}.")
    if results is None:
        return lines + ([f"  {'full log':<10s} {log}"] if log else [])
    where = [
        ("library", results / "TensileLibrary.dat", "README: install the result"),
        ("logic", results / "logic", None),
        ("report", results / "acceptance.html", "and acceptance.md"),
        ("dashboard", results / "dashboard" / "index.html", None),
        ("live page", results / "live" / "index.html", None),
        ("registry", results / "registry" / "registry.sqlite", "query: oto registry summary STORE"),
    ]
    shown = 0
    for name, path, note in where:
        if name == "live page" and (results / "dashboard" / "index.html").is_file():
            continue  # the final page supersedes it
        if not path.exists():
            continue
        what = str(path) + ("/" if path.is_dir() else "")
        if path.is_dir():
            what += f" ({len(list(path.glob('*.yaml')))} files)"
        lines.append(f"  {name:<10s} {what}{f'  ({note})' if note else ''}")
        shown += 1
    doc = _data(results)
    if doc:
        head = _headline(doc)
        if head:
            lines.append(f"  {'headline':<10s} {head}")
        numbers = doc.get("numbers") or []
        for n in numbers:
            lines.append(f"  {'numbers':<10s} {NUMBERS.get(n, n)}")
    if log:
        lines.append(f"  {'full log':<10s} {log}")
    return lines
