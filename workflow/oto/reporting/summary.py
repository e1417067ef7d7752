"""The few lines a run ends with: what it built, where it is, the headline figures (overall and per family)
and what the numbers are: simulated or replayed numbers are **not for installing**, and the summary says so
instead of pointing at the install instructions.

The lines speak of what the run built (its finished jobs' outputs). A run that built the library, the report
or the dashboard covers the whole selection: the whole-run headline, read from the dashboard's ``data.json``
(the final page's when the run finished, else the live page's), so the terminal says what the pages say. A
run with a narrower target (one library's ``final.yaml``, one generation, a family file) names what it built
and gives that library's own figures, read from the files it wrote.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from oto.files import StageFileError, read_yaml
from oto.tensile.provenance import MEANING

LIBRARY = "TensileLibrary.dat"
INSTALL = "README: 'Tune on the real GPU (Tensile) and install the result'"


def _data(results: Path) -> dict[str, Any] | None:
    for page in ("dashboard", "live"):
        try:
            doc = json.loads((results / page / "data.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            return doc
    return None


def _reference(doc: Mapping[str, Any]) -> str:
    """What the run's scores are ratios to, in a few words (the deck's arch, or the floor it names)."""
    cov = doc.get("coverage") or {}
    if cov.get("floor"):
        return "the floor" if cov["floor"].get("source") != "none" else "the baseline floor"
    return f"the {cov.get('deck_of') or 'gfx900'} spoof"


def _figures(o: Mapping[str, Any], reference: str) -> str:
    """geomean, W/T/L and median % of roofline of one headline row (overall or a family's)."""
    g, pct, lat = o.get("geomean_score"), o.get("median_pct_roofline"), o.get("latency_bound")
    parts = [
        f"geomean {g:.2f}× {reference}" if isinstance(g, int | float) else None,
        f"{o.get('wins', 0)} wins / {o.get('ties', 0)} ties / {o.get('losses', 0)} losses" + _not_measured(o),
        f"median {pct:.1f}% of the roofline" if isinstance(pct, int | float) else None,
    ]
    text = ", ".join(p for p in parts if p)
    text += f" ({lat} sizes latency-bound)" if lat else ""
    return text + _best_shipped(
        o.get("best_shipped_geomean"),
        o.get("best_shipped_sizes"),
        (o.get(f"best_shipped_{k}") for k in ("wins", "ties", "losses", "kept")),
    )


def apart(counts: Mapping[str, Any], not_measured: str) -> str:
    """The sizes counted apart from W/T/L: ``not_measured`` (a format with ``{n}``) where no kernel ran, and
    those where the spoof's kernel failed while a passing kernel ships."""
    n, f = int(counts.get("not_measured") or 0), int(counts.get("floor_failed") or 0)
    return (not_measured.format(n=n) if n else "") + (
        f" ({f} size{'s' * (f != 1)} where the reference kernel failed: a passing kernel ships)" if f else ""
    )


def _not_measured(counts: Mapping[str, Any]) -> str:
    """The sizes no kernel ran at (the reference included: too large for the device's memory, say), and those
    where only the spoof's kernel failed (:func:`apart`)."""
    return apart(counts, " ({n} sizes not measured)")


def _best_shipped(g, sizes, counts) -> str:
    """The headline's tail against the best shipped kernel (geomean, wins / ties / losses, sizes that kept
    it), or nothing where it was not measured (a generation's figures, a run without the shortlist)."""
    if not sizes or not isinstance(g, int | float):
        return ""
    wins, ties, losses, kept = (int(c or 0) for c in counts)
    text = f"; vs the best shipped kernel: geomean {g:.2f}×, {wins} wins / {ties} ties / {losses} losses"
    return text + (f" ({kept} sizes kept it)" if kept else "")


def _headlines(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text): the whole run's headline, then one per family when there are several."""
    finished = doc.get("state") == "finished"
    table = (doc.get("final") if finished else doc.get("current")) or {}
    o = table.get("overall") or {}
    if not o.get("sizes"):
        return []
    scope = "deck sizes (final)" if finished else "tuning sizes (latest generation)"
    libs = len(table.get("libraries") or [])
    reference = _reference(doc)
    out = [("headline", f"{libs} libraries, {o['sizes']} {scope}, {_figures(o, reference)}")]
    families = table.get("families") or []
    if len(families) > 1:  # one family's many sizes can hide another's figures
        out += [(f["family"], f"{f['sizes']} sizes, {_figures(f, reference)}") for f in families]
    return out


def _native(doc: Mapping[str, Any]) -> str:
    """The run against upstream's own library for the GPU (config deck.native_floor), over every library
    raced against it: the geomean speed-up, the sizes that ship upstream's kernel and those where it gave
    wrong results; nothing without a native floor."""
    rows = [r for r in ((doc.get("final") or {}).get("native") or []) if r.get("sizes")]
    if not rows or doc.get("state") != "finished":
        return ""
    sizes = sum(int(r["sizes"]) for r in rows)
    g = math.exp(sum(int(r["sizes"]) * math.log(r["geomean_vs_native"]) for r in rows) / sizes)
    kept = sum(int(r.get("kept") or 0) for r in rows)
    wrong = sum(int(r.get("native_wrong") or 0) for r in rows)
    text = f"vs upstream's own {rows[0].get('arch')} library: geomean {g:.2f}× over {sizes} sizes"
    text += f" of {len(rows)} libraries, its kernel ships at {kept} of them"
    return text + (f", it gave wrong results at {wrong}" if wrong else "")


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


def numbers_lines(numbers: Iterable[str]) -> list[str]:
    """One line per kind of number: what it means for the deliverable (simulated — not for installing…)."""
    return [
        f"  {'numbers':<10s} {MEANING.get(n, f'{n}: unknown provenance, not for installing')}"
        for n in numbers
    ]


def library_note(results: Path, numbers: Sequence[str]) -> str:
    """What the library line adds: not for installing (numbers not measured), why no code objects were
    built, or where the install instructions are."""
    other = sorted(n for n in set(numbers) if n != "measured") or ([] if numbers else ["unknown"])
    if other:
        return f"{' and '.join(other)} — not for installing"
    try:
        manifest = read_yaml(results / "library" / "manifest.yaml") or {}
    except (OSError, StageFileError):
        manifest = {}
    built = (manifest.get("tensile_create_library") or {}) if isinstance(manifest, Mapping) else {}
    if not built.get("files"):
        return f"no code objects built ({built.get('why') or 'see library/manifest.yaml'})"
    return f"measured; {INSTALL}"


def run_summary(
    results: Path | None,
    jobs: int,
    elapsed: str,
    failed: Sequence[str] = (),
    log: str | None = None,
    built: Iterable[str] | None = None,
    interrupted: bool = False,
) -> list[str]:
    """The closing lines for one results folder (None: the run wrote none). ``built``: the outputs of the
    run's finished jobs (None: take the run to have built everything selected); ``interrupted``: Ctrl+C
    stopped the run (the jobs it stopped are no failure)."""
    lines = []
    if interrupted:
        lines.append(
            f"oto: stopped on your request (Ctrl+C); {jobs} jobs finished in {elapsed}. Run the same command "
            "again to go on: every finished job is kept."
        )
    elif failed:
        lines.append(
            f"oto: {len(failed)} job(s) failed ({', '.join(failed[:5])}{', …' if len(failed) > 5 else ''}); "
            f"{jobs} finished in {elapsed}. Fix the cause (the failed job's log is printed above) and run "
            "the same command again: every finished job is kept."
        )
    else:
        lines.append(f"oto: {jobs} jobs finished in {elapsed}.")
    if results is not None:
        # a finished job's output a later failure took away (Snakemake deletes a failed job's outputs) is
        # not something this run built
        outs = None if built is None else {Path(p) for p in built if Path(p).exists()}
        whole = outs is None or any(
            results / f in outs for f in (LIBRARY, "acceptance.html", "dashboard/index.html")
        )
        lines += _whole_run(results, outs) if whole else _partial(results, outs or set())
    if log:
        lines.append(f"  {'full log':<10s} {log}")
    return lines


def _whole_run(results: Path, outs: set[Path] | None) -> list[str]:
    """The library, report, dashboard and registry, and the whole selection's headline figures."""
    doc = _data(results) or {}
    numbers = list(doc.get("numbers") or [])
    library_built = outs is None or results / LIBRARY in outs
    where = [
        ("library", results / LIBRARY, library_note(results, numbers)),
        ("logic", results / "logic", None),
        ("report", results / "acceptance.html", "and acceptance.md"),
        ("dashboard", results / "dashboard" / "index.html", None),
        ("live page", results / "live" / "index.html", None),
        ("registry", results / "registry" / "registry.sqlite", "query: oto registry summary STORE"),
    ]
    lines = []
    for name, path, note in where:
        if name == "live page" and (results / "dashboard" / "index.html").is_file():
            continue  # the final page supersedes it
        if not path.exists() or (name in ("library", "logic") and not library_built):
            continue
        what = str(path) + ("/" if path.is_dir() else "")
        if path.is_dir():
            what += f" ({len(list(path.glob('*.yaml')))} files)"
        lines.append(f"  {name:<10s} {what}{f'  ({note})' if note else ''}")
    if not library_built:
        lines.append(f"  {'library':<10s} not built by this run (target {results / LIBRARY} builds it)")
    lines += [f"  {label:<10s} {text}" for label, text in _headlines(doc)]
    if native := _native(doc):
        lines.append(f"  {'native':<10s} {native}")
    cap = (doc.get("coverage") or {}).get("size_cap")
    if cap:  # a demo's sample of the deck: the figures above are not the footprint's
        lines.append(f"  {'deck':<10s} capped: {cap['text']}; the figures are over the kept sizes")
    return lines + numbers_lines(numbers)


def _partial(results: Path, outs: set[Path]) -> list[str]:
    """A narrower target: what it built, each library's own figures, and that the library was not built."""
    mine = sorted(p for p in outs if results in p.parents)
    finals = [p for p in mine if p.name == "final.yaml"]
    latest: dict[Path, Path] = {}  # library folder -> its latest selection built, where no final was
    for p in mine:
        if p.name == "selection.yaml" and p.parent.parent / "final.yaml" not in outs:
            lib = p.parent.parent
            if lib not in latest or _gen(p) > _gen(latest[lib]):
                latest[lib] = p
    families = [p for p in mine if p.parent.name == "family" and p.suffix == ".yaml"]
    logic = [p for p in mine if p.parent.name == "logic" and p.suffix == ".yaml"]
    shown = [*families, *logic, *finals, *latest.values()]
    lines = []
    if families:
        lines.append(f"  {'family':<10s} {', '.join(map(str, families))}")
    if logic:
        lines.append(f"  {'logic':<10s} {', '.join(map(str, logic))}")
    numbers: list[str] = []
    for path in [*finals, *latest.values()]:
        label, text, kind = _library_figures(path)
        lines.append(f"  {label:<10s} {path}" + (f"  ({text})" if text else ""))
        if kind and kind not in numbers:
            numbers.append(kind)
    if not shown:  # ceilings, the deck, the registry…
        rest = [p for p in mine if p.suffix in (".yaml", ".json", ".sqlite", ".html", ".md")] or mine
        lines += [f"  {'built':<10s} {p}" for p in rest[:3]]
        if len(rest) > 3:
            lines.append(f"  {'':<10s} … and {len(rest) - 3} more files")
    lines.append(
        f"  {'library':<10s} not built by this run, nor the report or the dashboard "
        f"(target {results / LIBRARY} builds them)"
    )
    return lines + numbers_lines(numbers)


def _gen(selection: Path) -> int:
    try:
        return int(selection.parent.name.removeprefix("gen"))
    except ValueError:
        return -1


def _library_figures(path: Path) -> tuple[str, str, str | None]:
    """(label, figures, kind of numbers) of one library's final.yaml or selection.yaml."""
    final = path.name == "final.yaml"
    label = "final" if final else "selection"
    try:
        doc = read_yaml(path) or {}
    except (OSError, StageFileError):
        return label, "", None
    if not isinstance(doc, Mapping):
        return label, "", None
    s = doc.get("summary") or {}
    sizes = len(doc.get("per_size") or [])
    scope = "deck sizes, final measurement" if final else f"tuning sizes, generation {doc.get('generation')}"
    g = s.get("geomean_score")
    deck = _library_deck((path.parent if final else path.parent.parent) / "deck.yaml")
    prov = deck.get("provenance")
    deck_of = prov.get("deck_of") if isinstance(prov, Mapping) else None
    parts = [
        f"{sizes} {scope}",
        f"geomean {g:.2f}× the {deck_of or 'gfx900'} spoof" if isinstance(g, int | float) else None,
        f"{s.get('wins', 0)} wins / {s.get('ties', 0)} ties / {s.get('losses', 0)} losses" + _not_measured(s),
    ]
    kind = (doc.get("provenance") or {}).get("numbers")
    b = s.get("best_shipped") or {}
    counts = (b.get(k) for k in ("wins", "ties", "losses", "kept_by_best_shipped"))
    best = _best_shipped(b.get("geomean_score"), b.get("sizes"), counts)
    return label, ", ".join(p for p in parts if p) + best + _library_cap(deck), str(kind) if kind else None


def _library_deck(deck_path: Path) -> Mapping[str, Any]:
    """A library's deck.yaml, or {} where it is missing or unreadable (the figures go without its parts)."""
    try:
        deck = read_yaml(deck_path)
    except (OSError, StageFileError):
        return {}
    return deck if isinstance(deck, Mapping) else {}


def _library_cap(deck: Mapping[str, Any]) -> str:
    """The tail a capped library's figures get: its deck is a sample (config deck.max_sizes)."""
    from oto.deck.size_cap import kept_text

    cap = deck.get("size_cap")
    if not isinstance(cap, Mapping):
        return ""
    return "; capped: " + kept_text(
        cap["kept"], cap["of"], [cap["max_sizes"]], cap.get("of_what", "shipped sizes")
    )
